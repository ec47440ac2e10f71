"""``frostgym list``: every registered env id with its family, difficulty and task counts, and its levels."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from frostgym.commands.common import console, every_env, make_frozen
from frostgym.core.env import FrozenEnv
from frostgym.core.splits import PUBLIC_SPLITS


def list_envs(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (levels included) instead of a table.")] = False,
    levels: Annotated[
        bool, typer.Option("--levels", help="Also list each id's levels: what each is, its task counts, the default.")
    ] = False,
) -> None:
    """Registered env ids with family, difficulty and task counts per public split, and
    with --levels (always in --json) the levels each id takes as ``level=N``."""
    rows: list[dict[str, Any]] = []
    for e, env in every_env():
        rows.append(
            {
                "id": e.id,
                "family": env.family,
                "difficulty": env.source.difficulty,
                "tasks": _counts(env),
                "task_config": None if env.source.config_type is None else env.source.config_record(),
                "summary": e.summary,
                **_levels(e.id),
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    table = Table("id", "family", "difficulty", *PUBLIC_SPLITS, "summary")
    for row in rows:
        table.add_row(row["id"], row["family"], row["difficulty"], *_shown(row["tasks"]), row["summary"])
    console.print(table)
    if levels:
        console.print(_levels_table(rows))


def _counts(env: FrozenEnv) -> dict[str, int | None]:
    """Tasks per public split that ``reset`` draws from (None: unbounded)."""
    return {split: env.source.drawable_size(split) for split in PUBLIC_SPLITS}


def _shown(counts: dict[str, int | None]) -> list[str]:
    return ["unbounded" if n is None else str(n) for n in counts.values()]


def _levels(env_id: str) -> dict[str, Any]:
    """An id's levels for ``list``: each with its summary and task counts, the default
    level (None: the default serves every level together, or there are none) and the note."""
    from frostgym.envs.levels import env_levels, task_source_class

    kind = task_source_class(env_id)
    found = [
        {
            "level": level.level,
            "summary": level.summary,
            "default": level.default,
            "tasks": _counts(make_frozen(env_id, level=level.level)),
        }
        for level in env_levels(env_id)
    ]
    return {"levels": found, "default_level": kind.default_level, "levels_note": kind.levels_note}


def _levels_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("id", "level", "what it is", *PUBLIC_SPLITS, "default")
    for row in rows:
        if not row["levels"]:
            table.add_row(row["id"], "-", row["levels_note"] or "no levels", *([""] * len(PUBLIC_SPLITS)), "")
            continue
        for level in row["levels"]:
            table.add_row(
                row["id"],
                str(level["level"]),
                level["summary"],
                *_shown(level["tasks"]),
                "default" if level["default"] else "",
            )
        if row["default_level"] is None and row["levels_note"]:
            table.add_row(row["id"], "all", row["levels_note"], *_shown(row["tasks"]), "default")
    return table
