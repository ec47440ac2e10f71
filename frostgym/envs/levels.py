"""Levels by env id: the one place ``level=`` becomes a task-source config, and where
other code (``frostgym list --levels``, a calibration, a curriculum sampler) reads an id's
levels without making its env.

A level is a named config of the id's task source (``frostgym.core.tasks.Level``). The
registry names each id's source class (``EnvEntry.task_source``), so reading an id's levels
imports that class's module and nothing else: no env, no sandbox, no task generated.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import gymnasium

from frostgym.core.tasks import TaskSource
from frostgym.envs.registry import ENTRIES


@dataclass(frozen=True)
class EnvLevel:
    """One level of an env id: ``gym.make(env_id, level=level)``.

    ``summary``: what it is, in a few words. ``config``: the task-source config it is
    (``frostgym.core.tasks.Level.config``). ``default``: whether a plain
    ``gym.make(env_id)`` serves exactly this level (at most one level of an id is; where
    none is, the default serves every level's tasks together).
    """

    env_id: str
    level: int
    summary: str
    config: Any
    default: bool


def task_source_class(env_id: str) -> type[TaskSource]:
    """The task-source class behind ``env_id``: read from its registry entry (importing one
    module), or for an id registered outside frostgym, from the env it makes. Raises what
    ``gymnasium.make`` raises for an unknown id."""
    for entry in ENTRIES:
        if entry.id == env_id and entry.task_source:
            module, _, name = entry.task_source.partition(":")
            kind: type[TaskSource] = getattr(importlib.import_module(module), name)
            return kind
    env = gymnasium.make(env_id).unwrapped
    return type(env.source)  # type: ignore[attr-defined]


def env_levels(env_id: str) -> tuple[EnvLevel, ...]:
    """The levels of ``env_id``, easiest first; empty when it has none (its task source's
    ``levels_note`` says why: ``task_source_class(env_id).levels_note``). Raises what
    ``gymnasium.make`` raises for an unknown id."""
    kind = task_source_class(env_id)
    return tuple(
        EnvLevel(env_id, n, level.summary, level.config, n == kind.default_level)
        for n, level in sorted(kind.levels.items())
    )


def level_config(kind: type[TaskSource], level: int | None, task_config: object = None) -> Any:
    """The config a family builds ``kind`` with for ``gym.make(id, level=…, task_config=…)``:
    ``task_config`` as given when ``level`` is None, else the level's config with
    ``task_config``'s fields on top (``TaskSource.level_config``). Its ``ValueError``, for
    an id without levels or a level it does not have, names the env ids ``kind`` serves."""
    if level is None:
        return task_config
    path = f"{kind.__module__}:{kind.__qualname__}"
    ids = " / ".join(entry.id for entry in ENTRIES if entry.task_source == path)
    return kind.level_config(level, task_config, who=ids)
