"""``frostgym judge``: an LLM judge's grade of every episode of a card, into a new card."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from frostgym.commands.common import console


def judge_cmd(
    card_dir: Annotated[Path, typer.Argument(help="The card whose final replies to judge.")],
    rubric: Annotated[Path, typer.Option(help="The rubric, a TOML file (docs/judges.md).")],
    model: Annotated[str, typer.Option(help="The judge: smollm2, hf:DIR or openai:BASE_URL#MODEL.")],
    out: Annotated[Path, typer.Option(help="Directory for the judged card.")],
    cache: Annotated[
        Path | None, typer.Option(help="The judge's cache, a JSONL file (default: in memory, kept nowhere).")
    ] = None,
    mode: Annotated[
        str, typer.Option(help="replay (the cache only), record (the model fills misses) or live (the model always).")
    ] = "record",
    max_new_tokens: Annotated[int, typer.Option(help="The most tokens of a judge reply (greedy decoding).")] = 512,
) -> None:
    """Replay the card's recorded actions (as regrade does) and grade each episode's final
    reply with the LLM judge and RUBRIC: a new card at OUT with the judge's grade as each
    episode's grade, a drop for each episode the judge gave no verdict on (grader_error,
    replay_miss, infra_error), and OUT/judge.json."""
    from frostgym.agents.sampling import SamplingParams
    from frostgym.core.errors import UserError
    from frostgym.evaluate.judge import judge_card
    from frostgym.graders.judge import load_rubric
    from frostgym.models import CACHE_MODES, FrozenModel, ModelCache

    if mode not in CACHE_MODES:
        raise typer.BadParameter(f"--mode must be one of {', '.join(CACHE_MODES)}, not {mode!r}")
    if mode == "replay" and cache is None:
        raise UserError("--mode replay serves the judge from its cache only: give the cache with --cache")
    loaded = load_rubric(rubric)
    judge_cache = ModelCache(cache)
    if judge_cache.rejected:
        line, why = judge_cache.rejected[0]
        console.print(f"warning: {cache}: {len(judge_cache.rejected)} lines not served (line {line}: {why})")
    judge = FrozenModel(
        model, cache=judge_cache, mode=mode, sampling=SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)
    )
    report = judge_card(card_dir, out, loaded, judge)
    table = Table("judged", "passed", "dropped", "judge replies", "rubric", "grader")
    drops = ", ".join(f"{name} {count}" for name, count in report["drops"].items()) or "0"
    replies = ", ".join(f"{name} {count}" for name, count in report["judge_replies"].items()) or "-"
    table.add_row(
        str(report["judged"]),
        str(report["passed"]),
        drops,
        replies,
        loaded.name,
        f"{report['judge']['grader']} {report['judge']['grader_version']}",
    )
    console.print(table)
    console.print(f"judged card written to {out}; the judge's run in {out / 'judge.json'}")
