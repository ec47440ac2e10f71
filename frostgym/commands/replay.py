"""``frostgym replay``: re-run a card's recorded actions in fresh envs and say where anything differs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from frostgym.commands.common import console


def replay_cmd(card_dir: Annotated[Path, typer.Argument(help="A card directory.")]) -> None:
    """Re-run every recorded action in fresh envs with the recorded seeds; exit 1 on any
    difference in observations, tool results, info or grades, naming the first divergent step.
    A card whose files fail their checksums is refused first (exit 2): nothing is replayed."""
    from frostgym.evaluate.replay import replay_card

    report = replay_card(card_dir)  # CardCorruptError before any episode: ``main`` says it in one line, exit 2
    table = Table("env", "episodes", "identical", "diverged", "first divergence")
    by_env: dict[str, list[Any]] = {}
    for e in report.episodes:
        by_env.setdefault(e.env_id, []).append(e)
    for env_id, results in sorted(by_env.items()):
        bad = [e for e in results if e.divergence is not None]
        first = f"{bad[0].plan_id}: {bad[0].divergence}" if bad else ""
        same = sum(1 for e in results if e.divergence is None and e.not_replayable is None)
        table.add_row(env_id, str(len(results)), str(same), str(len(bad)), first)
    console.print(table)
    kept_short = [e for e in report.episodes if e.not_replayable is not None]
    if kept_short:
        console.print(
            f"{len(kept_short)} episodes were not replayed: the card keeps only a prefix of an over-long action "
            f"(first: {kept_short[0].plan_id}, {kept_short[0].not_replayable})"
        )
    if report.drops_not_replayed:
        console.print(f"{report.drops_not_replayed} dropped episodes have no final grade and were not replayed")
    if not report.ok:
        raise typer.Exit(1)
    console.print(f"replay identical: {len(report.episodes) - len(kept_short)} episodes")
