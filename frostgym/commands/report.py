"""``frostgym report``: cards as a static HTML report with plots and a trajectory browser.

Why its own module: the command only parses, calls ``frostgym.report.build.write_report``
and prints where the page is; exit code 2 with the reason in one line for anything that
stops it (a card that is not there, not complete or edited; a bad gates file).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from frostgym.compare.gates import read_gates
from frostgym.compare.training_log import training_diagnostics
from frostgym.core.errors import FrostgymError

EXIT_ERROR = 2


def report_cmd(
    cards: Annotated[list[Path], typer.Argument(help="Card directories; with several, each is compared to the first.")],
    out: Annotated[Path, typer.Option(help="Directory for index.html and its data/ folder.")],
    baseline: Annotated[Path | None, typer.Option(help="Compare every card with this one (it is shown first).")] = None,
    gate: Annotated[
        Path | None, typer.Option(help="A gates TOML file: show each comparison's decision (see examples/gates.toml).")
    ] = None,
    training_log: Annotated[
        Path | None,
        typer.Option(
            "--training-log",
            help="The trainer's per-step log (steps.jsonl, TRL's trainer_state.json, or a directory holding one): "
            "show KL and entropy per window of steps with their flags (default rules; see frostgym trend).",
        ),
    ] = None,
) -> None:
    """Write OUT/index.html: first the headline (pass@1 per env and level against the
    oracle's ceiling, the decision with --gate, the common failures), then accounting and
    drops, the views, plots, comparisons (with --baseline or several cards), the trainer's
    KL and entropy (with --training-log) and a trajectory browser. It opens from disk with
    no server and no network; keep data/ beside it."""
    console = Console(stderr=False, soft_wrap=True)
    began = time.perf_counter()
    from frostgym.report.build import write_report  # here: importing matplotlib would slow every other command

    try:
        gates = read_gates(gate) if gate is not None else None
        training = training_diagnostics(training_log) if training_log is not None else None
        page = write_report(cards, out, baseline=baseline, gates=gates, training=training)
    except (FrostgymError, OSError) as error:
        console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    console.print(f"report: {page} ({time.perf_counter() - began:.1f} s)", highlight=False)
