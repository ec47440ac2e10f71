"""``frostgym regrade``: today's graders on a card's recorded actions, into a new card and a grade diff."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from frostgym.commands.common import console


def regrade_cmd(
    card_dir: Annotated[Path, typer.Argument(help="The card whose trajectories to regrade.")],
    out: Annotated[Path, typer.Option(help="Directory for the regraded card.")],
) -> None:
    """Apply today's graders to a card's recorded actions (no agent runs) and write a new
    card plus OUT/regrade.json, the per-episode grade diff."""
    from frostgym.evaluate.replay import regrade_card

    try:
        report = regrade_card(card_dir, out)
    except (FileExistsError, ValueError) as error:
        raise typer.BadParameter(str(error)) from error
    table = Table("compared", "unchanged", "changed", "graders before", "graders after")

    def fmt(graders: dict[str, list[str]]) -> str:
        return ", ".join(f"{name} {'/'.join(versions)}" for name, versions in graders.items())

    table.add_row(
        str(report["compared"]),
        str(report["unchanged"]),
        str(report["changed"]),
        fmt(report["graders_before"]),
        fmt(report["graders_after"]),
    )
    console.print(table)
    console.print(f"regraded card written to {out}; diff in {out / 'regrade.json'}")
