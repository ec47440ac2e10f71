"""``frostgym export``: a rollout card in another tool's format (``export inspect``: an
inspect_ai eval log for ``inspect view``).

Why its own module: the commands only parse, call ``frostgym.export`` and report; how a
card maps to each format is the export's. A card that is missing or corrupt, an output
that cannot be written or an export library that is not installed exits 2 with the
reason in one line, as every frostgym command does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from frostgym.core.errors import FrostgymError

EXIT_ERROR = 2

export_app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Write a rollout card in another tool's format."
)


@export_app.command("inspect")
def inspect_cmd(
    card: Annotated[Path, typer.Argument(help="The card directory to export.")],
    out: Annotated[Path, typer.Option(help="The inspect log to write: FILE.eval (inspect's format) or FILE.json.")],
) -> None:
    r"""Write CARD as an inspect_ai eval log (one sample per episode and drop, with its
    messages, scores and metadata), so `inspect view` opens it. Needs the inspect extra:
    pip install 'frostgym\[inspect]'."""
    from frostgym.export.inspect_log import export_inspect

    try:
        written = export_inspect(card, out)
    except (FrostgymError, OSError) as error:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    typer.echo(f"wrote {written}: open it with `inspect view --log-dir {written.parent}`")
