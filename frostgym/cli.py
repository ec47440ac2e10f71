"""The ``frostgym`` command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, cast

import gymnasium
import typer
from rich.console import Console
from rich.table import Table

from frostgym.core.env import FrozenEnv
from frostgym.core.splits import PUBLIC_SPLITS, check_split
from frostgym.core.tasks import ProceduralSource
from frostgym.envs.registry import EnvEntry

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Frozen, seeded Gymnasium envs for LLM agents.")
console = Console()
if not console.is_terminal:  # logs and CI: rich would assume 80 columns and fold every table
    console = Console(width=160)


def _envs() -> list[tuple[EnvEntry, FrozenEnv]]:
    """One instance of every registered env: sources and families come from the envs
    themselves, so a new family needs no change here."""
    from frostgym.envs.registry import ENTRIES

    return [(e, cast(FrozenEnv, gymnasium.make(e.id).unwrapped)) for e in ENTRIES]


@app.command("list")
def list_envs(as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False) -> None:
    """Registered env ids with family, difficulty and task counts per public split."""
    rows: list[dict[str, Any]] = []
    for e, env in _envs():
        sizes = {split: env.source.size(split) for split in PUBLIC_SPLITS}
        rows.append(
            {
                "id": e.id,
                "family": env.family,
                "difficulty": env.source.difficulty,
                "tasks": sizes,
                "summary": e.summary,
            }
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
    agent: Annotated[
        str, typer.Option(help="oracle | random | smollm2 | hf:PATH | openai:BASE_URL#MODEL | replay:PATH")
    ] = "oracle",
    episodes: Annotated[int, typer.Option(min=1, help="Episodes per env.")] = 20,
    seed: Annotated[int, typer.Option(min=0, help="Run seed; every episode seed derives from it.")] = 0,
    split: Annotated[str, typer.Option(help="train | dev | test | private")] = "dev",
    batch_size: Annotated[int, typer.Option(min=1, help="Episodes per batched agent call.")] = 64,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature; 0 is greedy.")] = 0.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus sampling mass.")] = 1.0,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Most tokens a model may generate per turn.")] = 512,
    model_batch_size: Annotated[int, typer.Option(min=1, help="Prompts per model forward batch.")] = 16,
    max_turns: Annotated[
        int | None, typer.Option(min=1, help="Override every env's turn limit (default: each env's own).")
    ] = None,
) -> None:
    """Run an agent on envs and write DIR/result.json."""
    from frostgym.agents.sampling import SamplingParams
    from frostgym.agents.spec import make_agent
    from frostgym.envs.registry import entry
    from frostgym.evaluation import evaluate, write_result

    env_ids = [e.strip() for e in env.split(",") if e.strip()]
    if agent == "smollm2" or agent.startswith("hf:"):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # the CLI prints its own summary
    try:
        for env_id in env_ids:
            entry(env_id)
        split_name = check_split(split)
        sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)
        policy = make_agent(agent, seed=seed, sampling=sampling, batch_size=model_batch_size)
    except (ValueError, KeyError, gymnasium.error.Error) as error:
        raise typer.BadParameter(str(error)) from error
    env_kwargs = {} if max_turns is None else {"max_turns": max_turns}
    records = evaluate(
        env_ids, policy, episodes=episodes, seed=seed, split=split_name, batch_size=batch_size, env_kwargs=env_kwargs
    )
    config = {
        "sampling": sampling.to_dict(),
        "env_ids": env_ids,
        "agent": agent,
        "episodes": episodes,
        "seed": seed,
        "split": split_name,
        "batch_size": batch_size,
        "env_kwargs": env_kwargs,
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

    by_family: dict[str, dict[str, ProceduralSource]] = {}
    for _, env in _envs():
        by_family.setdefault(env.family, {})[env.source.name] = env.source
    bad = []
    for family, sources in sorted(by_family.items()):
        if write:
            console.print(f"wrote {write_lock(family, list(sources.values()))}")
            continue
        locked = read_lock(family)
        for name, source in sorted(sources.items()):
            ok = locked.get(name) == lock_entry(source)
            bad += [] if ok else [f"{family}/{name}"]
            console.print(f"{family}/{name}: {'ok' if ok else 'MISMATCH'}")
    if bad:
        raise typer.Exit(1)


@app.command("build-databases")
def build_databases_cmd(
    out: Annotated[Path, typer.Option(help="Directory to build the SQL fixture databases into.")],
) -> None:
    """Rebuild every SQL fixture database from its package and compare with the lock:
    the content hash always, the file hash byte for byte where the SQLite version matches."""
    import sqlite3

    from frostgym.sql.databases import DATABASES, build_database, content_sha256, file_sha256, read_db_lock

    lock = read_db_lock()
    table = Table("database", "content sha256", "file sha256", "verdict")
    failed = False
    for name, spec in DATABASES.items():
        path = build_database(spec, out / f"{name}.sqlite")
        content, file = content_sha256(path), file_sha256(path)
        expected = lock[name]
        same_sqlite = expected["sqlite_version"] == sqlite3.sqlite_version
        ok = content == expected["content_sha256"] and (file == expected["file_sha256"] or not same_sqlite)
        verdict = "identical" if ok and same_sqlite else "same content" if ok else "MISMATCH"
        if ok and not same_sqlite:
            verdict += (
                f" (file bytes not compared: SQLite {sqlite3.sqlite_version}, locked with {expected['sqlite_version']})"
            )
        failed |= not ok
        table.add_row(name, content[:16], file[:16], verdict)
    console.print(table)
    if failed:
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
