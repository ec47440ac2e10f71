"""``frostgym lock``: check, or after a reviewed data change rewrite, the locked task-data hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frostgym.commands.common import console, every_env, json_object, make_frozen, one_env_spec
from frostgym.core.tasks import TaskSource
from frostgym.envs.levels import env_levels


def lock_cmd(
    write: Annotated[bool, typer.Option(help="Rewrite the lock files instead of checking them.")] = False,
    env: Annotated[
        str | None, typer.Option(help="Only this env id (any registered one, a family kept outside frostgym too).")
    ] = None,
    task_config: Annotated[
        str | None,
        typer.Option(metavar="JSON", help="With --env: that config of its task source (--write adds its entry)."),
    ] = None,
) -> None:
    """Check (or, after a reviewed data change, rewrite) the locked task-data hashes: each
    env's task source with its default config, each of its levels, and every other config
    its lock file holds.
    With --env, only that env's entries are checked or (--write) written into its lock."""
    from frostgym.core.fixture_lock import merge_lock, read_lock, write_lock

    if task_config is not None and env is None:
        raise typer.BadParameter("--task-config needs --env")
    spec = one_env_spec(env) if env is not None else None
    made = (
        [(spec.env_id, make_frozen(spec.env_id, **spec.kwargs))]
        if spec is not None
        else [(e.id, m) for e, m in every_env()]
    )
    # lock file -> (family, id prefix) -> source
    targets: dict[Path, dict[tuple[str, str], TaskSource]] = {}
    for env_id, instance in made:
        sources = targets.setdefault(instance.lock_file, {})
        if task_config is not None:
            kwargs = {
                **(spec.kwargs if spec is not None else {}),
                "task_config": json_object(task_config, "--task-config"),
            }
            configured = make_frozen(env_id, **kwargs).source
            sources[(instance.family, configured.id_prefix)] = configured
            continue
        sources[(instance.family, instance.source.id_prefix)] = instance.source
        for key, entry in read_lock(instance.lock_file).items():
            if key.startswith(f"{instance.source.name}~"):  # another config of this source
                other = make_frozen(env_id, task_config=entry.get("config")).source
                sources[(instance.family, other.id_prefix)] = other
        if spec is None or "level" not in spec.kwargs:  # every declared level, locked yet or not
            for level in env_levels(env_id):
                if not level.default:
                    leveled = make_frozen(env_id, **(spec.kwargs if spec is not None else {}), level=level.level).source
                    sources.setdefault((instance.family, leveled.id_prefix), leveled)
    bad = []
    for path, sources in sorted(targets.items()):
        if write:  # a whole file from every env, or one env's entries merged into it
            if env is None:
                write_lock(path, sources.values())
            else:
                for source in sources.values():
                    merge_lock(path, source)
            console.print(f"wrote {path}")
            continue
        locked = read_lock(path)
        for (family, prefix), source in sorted(sources.items()):
            entry = locked.get(prefix)
            verdict = "not locked" if entry is None else "ok" if entry == source.lock_record() else "MISMATCH"
            bad += [] if verdict == "ok" else [f"{family}/{prefix}"]
            console.print(f"{family}/{prefix}: {verdict}")
    if bad:
        raise typer.Exit(1)
