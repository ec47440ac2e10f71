"""The ``frostgym`` command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import gymnasium
import typer
from rich.console import Console
from rich.table import Table

from frostgym.core.splits import PUBLIC_SPLITS, check_split

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Frozen, seeded Gymnasium envs for LLM agents.")
console = Console()


def _source_of(env_id: str):  # type: ignore[no-untyped-def]
    from frostgym.envs.math import math_source
    from frostgym.envs.registry import entry

    e = entry(env_id)
    return math_source(e.kwargs["source"])


@app.command("list")
def list_envs(as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False) -> None:
    """Registered env ids with family, difficulty and task counts per public split."""
    from frostgym.envs.registry import ENTRIES

    rows = []
    for e in ENTRIES:
        source = _source_of(e.id)
        sizes = {s: source.size(s) for s in PUBLIC_SPLITS}
        rows.append(
            {"id": e.id, "family": e.family, "difficulty": source.difficulty, "tasks": sizes, "summary": e.summary}
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    table = Table("id", "family", "difficulty", *PUBLIC_SPLITS, "summary")
    for row in rows:
        counts = ["unbounded" if n is None else str(n) for n in row["tasks"].values()]
        table.add_row(row["id"], row["family"], row["difficulty"], *counts, row["summary"])
    console.print(table)


@app.command("eval")
def eval_cmd(
    env: Annotated[str, typer.Option(help="Env id, or several separated by commas.")],
    out: Annotated[Path, typer.Option(help="Directory for result.json.")],
    agent: Annotated[str, typer.Option(help="oracle | random")] = "oracle",
    episodes: Annotated[int, typer.Option(min=1, help="Episodes per env.")] = 20,
    seed: Annotated[int, typer.Option(min=0, help="Run seed; every episode seed derives from it.")] = 0,
    split: Annotated[str, typer.Option(help="train | dev | test | private")] = "dev",
    batch_size: Annotated[int, typer.Option(min=1, help="Episodes per batched agent call.")] = 64,
) -> None:
    """Run an agent on envs and write DIR/result.json."""
    from frostgym.agents.spec import make_agent
    from frostgym.envs.registry import entry
    from frostgym.evaluation import evaluate, write_result

    env_ids = [e.strip() for e in env.split(",") if e.strip()]
    try:
        for env_id in env_ids:
            entry(env_id)
        split_name = check_split(split)
        policy = make_agent(agent, seed=seed)
    except (ValueError, KeyError, gymnasium.error.Error) as error:
        raise typer.BadParameter(str(error)) from error
    records = evaluate(env_ids, policy, episodes=episodes, seed=seed, split=split_name, batch_size=batch_size)
    config = {
        "env_ids": env_ids,
        "agent": agent,
        "episodes": episodes,
        "seed": seed,
        "split": split_name,
        "batch_size": batch_size,
    }
    path = write_result(out, config, policy, records)
    table = Table("env", "episodes", "errored", "mean reward", "labels")
    from frostgym.evaluation import summarize

    for env_id, s in summarize(records).items():
        table.add_row(
            env_id,
            str(s["episodes"]),
            str(s["errored"]),
            f"{s['mean_reward']:.3f}",
            ", ".join(f"{k}={v}" for k, v in s["labels"].items()),
        )
    console.print(table)
    console.print(f"result written to {path}")


@app.command("lock")
def lock_cmd(
    write: Annotated[bool, typer.Option(help="Rewrite the lock files instead of checking them.")] = False,
) -> None:
    """Check (or, after a reviewed data change, rewrite) the locked task-data hashes."""
    from frostgym.core.fixture_lock import lock_entry, read_lock, write_lock
    from frostgym.envs.math import SOURCES, math_source

    sources = [math_source(name) for name in SOURCES]
    if write:
        console.print(f"wrote {write_lock('math', sources)}")
        return
    locked = read_lock("math")
    bad = [s.name for s in sources if locked.get(s.name) != lock_entry(s)]
    for s in sources:
        console.print(f"math/{s.name}: {'MISMATCH' if s.name in bad else 'ok'}")
    if bad:
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
