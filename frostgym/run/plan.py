"""The plan: every episode a run will play, declared before the first one starts.

A plan is a pure function of the run's identity (envs, split, task count, samples,
seed, env options), so a resumed run can recompute it and prove it is finishing the
same run, and a card lists what was promised, not only what happened. The runner plays
a plan and the card records it, so the plan sits below both (``frostgym.run.runner`` never
imports ``frostgym.cards``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from frostgym.core.env import FrozenEnv
from frostgym.core.errors import UnknownTaskError
from frostgym.core.seeding import SeedPart, derive_generator, derive_seed
from frostgym.core.splits import Split, parse_splits
from frostgym.core.tasks import Task
from frostgym.envs.registry import make_env
from frostgym.envs.specs import env_kwargs_for

#: How seeds are derived, written into every card next to the seeds themselves.
SEEDING = {
    "task_choice": "finite split: derive_generator('plan', run_seed, env_id, split).permutation(size)[:episodes];"
    " unbounded split: distinct indices from derive_generator('plan', run_seed, env_id, split).integers(0, 2**31)",
    "episode_seed": "derive_seed('episode', run_seed, env_id, task_id, sample), passed to env.reset(seed=...)",
    "agent_seed": "derive_seed('agent', episode_seed, turn), passed to the agent with every request",
}


@dataclass(frozen=True, kw_only=True)
class PlannedEpisode:
    """One episode of a plan: which task, which sample of it, its seed and how that seed
    was derived. Its fields are declared in sorted order, so orjson encodes it as its
    entry's sorted-key JSON: a card encodes its plan once, for ``plan.json`` and for the
    plan's hash alike (``plan_json_and_sha256``)."""

    difficulty: str | None
    env_id: str
    plan_id: str  # "ENV_ID:TASK_ID:SAMPLE", unique within a plan
    sample: int
    seed: int
    seed_derivation: tuple[SeedPart, ...]
    tags: tuple[str, ...]
    task_id: str

    def to_dict(self) -> dict[str, Any]:
        """The entry ``card.json`` holds for this episode: the fields in (sorted) order, the
        sequences as lists (orjson encodes the episode itself to the same JSON, which is
        how a card writes its plan). A copy of ``__dict__``, which is faster than
        ``dataclasses.asdict`` (it deep-copies) or a dict spelled out: a card's
        plan is turned into entries at its close, 10,000 of them on a large run."""
        entry = self.__dict__.copy()
        entry["seed_derivation"] = list(self.seed_derivation)
        entry["tags"] = list(self.tags)
        return entry

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlannedEpisode:
        return cls(
            plan_id=data["plan_id"],
            env_id=data["env_id"],
            task_id=data["task_id"],
            sample=int(data["sample"]),
            seed=int(data["seed"]),
            seed_derivation=tuple(data["seed_derivation"]),
            difficulty=data["difficulty"],
            tags=tuple(data["tags"]),
        )


def choose_tasks(
    env: FrozenEnv,
    env_id: str,
    split: Split,
    episodes: int | None,
    seed: int,
    exclude: Collection[str] = frozenset(),
) -> list[Task]:
    """``episodes`` distinct tasks of ``split`` in a seeded order, or all of them (None),
    never one whose id is in ``exclude``: the seeded order passes over it, so the others
    are chosen as without it."""
    size = env.source.size(split)
    rng = derive_generator("plan", seed, env_id, split)
    if size is None:
        if episodes is None:
            raise ValueError(f"{env_id} split {split!r} is unbounded: pass a number of episodes instead of all")
        indices: dict[int, None] = {}
        while len(indices) < episodes:
            index = int(rng.integers(0, 2**31))
            if not exclude or env.source.task(split, index).task_id not in exclude:  # else passed over
                indices.setdefault(index, None)
        return [env.source.task(split, i) for i in indices]
    # A source narrowed to part of its split (Tools-v0's levels and categories) plans only
    # the tasks it would draw; for any other, this is the whole split, in index order.
    drawable = env.source.drawable_size(split)
    pool = None if drawable == size else [t for t in env.source.tasks(split) if env.source.drawable(t)]
    if episodes is None:
        every = list(env.source.tasks(split)) if pool is None else pool
        return [t for t in every if t.task_id not in exclude] if exclude else every
    left = drawable
    if exclude and drawable is not None:
        left = drawable - sum(t.task_id in exclude for t in (env.source.tasks(split) if pool is None else pool))
    if left is None or episodes > left:
        raise ValueError(
            f"{env_id} split {split!r} has {left} tasks{' left after the exclusions' if exclude else ''}, "
            f"fewer than the {episodes} asked for; "
            "pass all tasks (--all) and raise --samples for more episodes per task"
        )
    assert drawable is not None
    # The seeded order, an excluded task passed over: the other tasks are chosen as they
    # would have been without exclusions, so a card with exclusions pairs with one without.
    chosen: list[Task] = []
    for i in rng.permutation(drawable):
        task = env.source.task(split, int(i)) if pool is None else pool[int(i)]
        if task.task_id not in exclude:
            chosen.append(task)
            if len(chosen) == episodes:
                break
    return chosen


def make_plan(
    env_ids: Sequence[str],
    *,
    split: Split | str,
    episodes: int | None,
    samples: int,
    seed: int,
    env_kwargs: Mapping[str, Any] | None = None,
    env_options: Mapping[str, Mapping[str, Any]] | None = None,
    exclude: Mapping[str, Collection[str]] | None = None,
    twins: bool = False,
) -> list[PlannedEpisode]:
    """Every (env, task, sample, seed) of a run, in the order it will be started. ``split``
    may name several splits separated by commas: each env then plays ``episodes`` tasks of
    each, in the order given. Each env is made with ``env_kwargs`` and then its own
    ``env_options`` (``RunOptions``). ``exclude`` maps an env id to task ids it never plays
    (``frostgym.evaluate.exclusions``): its tasks are chosen among the others. With ``twins`` each
    chosen task is followed by its twin (``TaskSource.twin``: id ``<task id>~twin``), its
    samples seeded alike; ``ValueError`` for an env whose tasks have none."""
    if samples < 1 or (episodes is not None and episodes < 1):
        raise ValueError("episodes and samples must be >= 1")
    if seed < 0:
        raise ValueError(f"the run seed must be >= 0, got {seed}")
    if len(set(env_ids)) != len(env_ids):
        raise ValueError(f"env ids repeat: {list(env_ids)}")
    plan: list[PlannedEpisode] = []
    for env_id in env_ids:
        env = make_env(env_id, split, env_kwargs_for(env_id, env_kwargs or {}, env_options or {}))
        try:
            left_out = (exclude or {}).get(env_id, frozenset())
            tasks = [
                task for one in parse_splits(split) for task in choose_tasks(env, env_id, one, episodes, seed, left_out)
            ]
            if twins:
                tasks = [one for task in tasks for one in (task, _twin(env, env_id, task))]
        finally:
            env.close()
        for task in tasks:
            for sample in range(samples):
                derivation: tuple[SeedPart, ...] = ("episode", seed, env_id, task.task_id, sample)
                plan.append(
                    PlannedEpisode(
                        plan_id=f"{env_id}:{task.task_id}:{sample}",
                        env_id=env_id,
                        task_id=task.task_id,
                        sample=sample,
                        seed=derive_seed(*derivation),
                        seed_derivation=derivation,
                        difficulty=task.difficulty,
                        tags=tuple(task.tags),
                    )
                )
    return plan


def _twin(env: FrozenEnv, env_id: str, task: Task) -> Task:
    try:
        return env.source.twin(task)
    except UnknownTaskError as error:
        raise ValueError(f"{env_id} cannot play twins (--twins): {error}") from error


def plan_json_and_sha256(plan: Sequence[PlannedEpisode]) -> tuple[bytes, str]:
    """The plan's entries as ``plan.json`` holds them (one compact JSON array of each
    entry's sorted-key JSON) and their sha256, the plan's hash, from one encoding: a card's
    create does both, and a resume recomputes both to prove it finishes the same plan."""
    data = orjson.dumps(plan)
    return data, hashlib.sha256(data).hexdigest()
