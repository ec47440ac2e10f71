"""The plan: every episode a run will play, declared before the first one starts.

A plan is a pure function of the run's identity (envs, split, task count, samples,
seed, env options), so a resumed run can recompute it and prove it is finishing the
same run, and a card lists what was promised, not only what happened. The runner plays
a plan and the card records it, so the plan sits below both (``frostgym.run.runner`` never
imports ``frostgym.cards``).

A plan is generated one entry at a time (``iter_plan``) and a run holds none of it: its
entries are spooled to a file as ``plan.json`` holds them (``PlanFile``, whose sha256 is the
plan's) and read back from there a chunk at a time, by the runner as it starts episodes
and by a card's close. Why: held as a list, a 1,000,000-episode plan takes 500 MB, and
its ``plan.json`` encoded at once 300 MB more; generating it twice instead would cost a
run a fifth of its time (a math task takes about 150 us to generate).
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

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
    return list(iter_tasks(env, env_id, split, episodes, seed, exclude))


def iter_tasks(
    env: FrozenEnv,
    env_id: str,
    split: Split,
    episodes: int | None,
    seed: int,
    exclude: Collection[str] = frozenset(),
) -> Iterator[Task]:
    """``choose_tasks``'s tasks one at a time, each made as it is reached (``env`` must stay
    open until the last): what a plan is generated from. Raises ``ValueError`` at once for a
    split that cannot give ``episodes`` tasks (or all of its tasks, when unbounded)."""
    size = env.source.size(split)
    rng = derive_generator("plan", seed, env_id, split)
    if size is None:
        if episodes is None:
            raise ValueError(f"{env_id} split {split!r} is unbounded: pass a number of episodes instead of all")
        return _drawn_tasks(env, split, episodes, rng, exclude)
    # A source narrowed to part of its split (Tools-v0's levels and categories) plans only
    # the tasks it would draw; for any other, this is the whole split, in index order.
    drawable = env.source.drawable_size(split)
    pool = None if drawable == size else [t for t in env.source.tasks(split) if env.source.drawable(t)]
    if episodes is None:
        every = env.source.tasks(split) if pool is None else pool
        return (t for t in every if t.task_id not in exclude) if exclude else iter(every)
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
    return _permuted_tasks(env, split, episodes, rng.permutation(drawable), pool, exclude)


def _drawn_tasks(env: FrozenEnv, split: Split, episodes: int, rng: Any, exclude: Collection[str]) -> Iterator[Task]:
    """An unbounded split's tasks: distinct indices drawn in turn, an excluded task's passed
    over. Only the indices drawn are held (distinctness needs them), never the tasks."""
    drawn: set[int] = set()
    while len(drawn) < episodes:
        index = int(rng.integers(0, 2**31))
        if index in drawn:
            continue
        if not exclude or env.source.task(split, index).task_id not in exclude:  # else passed over
            drawn.add(index)
            yield env.source.task(split, index)


def _permuted_tasks(
    env: FrozenEnv,
    split: Split,
    episodes: int,
    order: Iterable[Any],
    pool: Sequence[Task] | None,
    exclude: Collection[str],
) -> Iterator[Task]:
    """A finite split's first ``episodes`` tasks in the seeded order, an excluded task passed
    over: the other tasks are chosen as they would have been without exclusions, so a card
    with exclusions pairs with one without."""
    chosen = 0
    for i in order:
        task = env.source.task(split, int(i)) if pool is None else pool[int(i)]
        if task.task_id not in exclude:
            yield task
            chosen += 1
            if chosen == episodes:
                return


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
    samples seeded alike; ``ValueError`` for an env whose tasks have none. The whole plan
    in a list: a run generates it one entry at a time instead (``iter_plan``)."""
    return list(
        iter_plan(
            env_ids,
            split=split,
            episodes=episodes,
            samples=samples,
            seed=seed,
            env_kwargs=env_kwargs,
            env_options=env_options,
            exclude=exclude,
            twins=twins,
        )
    )


def iter_plan(
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
) -> Iterator[PlannedEpisode]:
    """``make_plan``'s entries, in its order, one at a time: each env is made when its
    entries are reached and closed after its last, and only the entry being made is held.
    Raises ``ValueError`` at once for what no plan can hold (episodes or samples below 1, a
    negative seed, an env id twice); one for an env's split or twins (``make_plan``) when
    that env's entries are reached."""
    if samples < 1 or (episodes is not None and episodes < 1):
        raise ValueError("episodes and samples must be >= 1")
    if seed < 0:
        raise ValueError(f"the run seed must be >= 0, got {seed}")
    if len(set(env_ids)) != len(env_ids):
        raise ValueError(f"env ids repeat: {list(env_ids)}")
    return _plan_entries(
        list(env_ids), split, episodes, samples, seed, env_kwargs or {}, env_options or {}, exclude or {}, twins
    )


def _plan_entries(
    env_ids: list[str],
    split: Split | str,
    episodes: int | None,
    samples: int,
    seed: int,
    env_kwargs: Mapping[str, Any],
    env_options: Mapping[str, Mapping[str, Any]],
    exclude: Mapping[str, Collection[str]],
    twins: bool,
) -> Iterator[PlannedEpisode]:
    for env_id in env_ids:
        env = make_env(env_id, split, env_kwargs_for(env_id, env_kwargs, env_options))
        try:
            left_out = exclude.get(env_id, frozenset())
            # Every split's tasks are chosen (its errors raised) before the first is played
            # with its twin: as a whole plan did, each check before any twin's.
            chosen = [iter_tasks(env, env_id, one, episodes, seed, left_out) for one in parse_splits(split)]
            for task in itertools.chain.from_iterable(chosen):
                for one in (task, _twin(env, env_id, task)) if twins else (task,):
                    yield from _entries_of(env_id, one, samples, seed)
        finally:
            env.close()


def _entries_of(env_id: str, task: Task, samples: int, seed: int) -> Iterator[PlannedEpisode]:
    for sample in range(samples):
        derivation: tuple[SeedPart, ...] = ("episode", seed, env_id, task.task_id, sample)
        yield PlannedEpisode(
            plan_id=f"{env_id}:{task.task_id}:{sample}",
            env_id=env_id,
            task_id=task.task_id,
            sample=sample,
            seed=derive_seed(*derivation),
            seed_derivation=derivation,
            difficulty=task.difficulty,
            tags=tuple(task.tags),
        )


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


class PlanFile:
    """A plan's entries spooled to a file, as ``plan.json`` holds them (the bytes
    ``plan_json_and_sha256`` gives for the whole plan, and so its sha256), and read back
    from it a chunk at a time whenever it is iterated. Why: a run goes through its plan
    once to hash and write it before the first episode, and again as it starts them (and a
    card's close and resume once more), and a plan's entries are costly to generate (a
    math task's, about 150 us) and to hold (500 bytes each): read back, a chunk of
    ``CHUNK`` entries at a time, they cost a few microseconds each and the memory of a chunk.

    Iterating it reads the file with ``os.pread``, so several iterations may go on at once
    (the runner's, a close's), from any thread. ``close`` closes the file."""

    #: Entries per chunk: one ``orjson`` encoding when written, one decoding when read.
    CHUNK = 2048

    def __init__(self, handle: IO[bytes], chunks: list[tuple[int, int]], count: int, sha256: str) -> None:
        """Use ``write``: ``chunks`` are where each chunk's entries are in the file
        (offset, length: their JSON, without the brackets and commas around them)."""
        self._handle = handle
        self._chunks = chunks
        self._count = count
        #: The plan's hash: ``plan_json_and_sha256``'s.
        self.sha256 = sha256

    @classmethod
    def write(cls, entries: Iterable[PlannedEpisode], handle: IO[bytes]) -> PlanFile:
        """Spool ``entries`` (generated as they are taken: ``iter_plan``) to ``handle``, a
        file open for reading and writing, from its start: its content is then the plan's
        ``plan.json``. Raises what generating the entries raises."""
        hasher = hashlib.sha256()
        chunks: list[tuple[int, int]] = []
        count = 0
        offset = 0

        def put(data: bytes) -> None:
            nonlocal offset
            handle.write(data)
            hasher.update(data)
            offset += len(data)

        put(b"[")
        taken = iter(entries)
        while batch := list(itertools.islice(taken, cls.CHUNK)):
            piece = orjson.dumps(batch)[1:-1]  # a PlannedEpisode encodes as its ``to_dict``
            if chunks:
                put(b",")
            chunks.append((offset, len(piece)))
            put(piece)
            count += len(batch)
        put(b"]")
        handle.flush()
        return cls(handle, chunks, count, hasher.hexdigest())

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[PlannedEpisode]:
        fd = self._handle.fileno()
        for offset, length in self._chunks:
            yield from map(PlannedEpisode.from_dict, orjson.loads(b"[" + _pread(fd, length, offset) + b"]"))

    def data(self) -> bytes:
        """The whole ``plan.json``, in memory (for a card written before plans had a file
        of their own, whose ``card.json`` held the plan anyway)."""
        return _pread(self._handle.fileno(), os.fstat(self._handle.fileno()).st_size, 0)

    def fileno(self) -> int:
        return self._handle.fileno()

    def close(self) -> None:
        self._handle.close()


def _pread(fd: int, length: int, offset: int) -> bytes:
    parts = []
    while length > 0:
        part = os.pread(fd, length, offset)
        if not part:
            raise OSError(f"the plan's file ended {length} bytes early")
        parts.append(part)
        length -= len(part)
        offset += len(part)
    return b"".join(parts)
