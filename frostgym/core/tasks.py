"""Tasks and task sources: where an env's episodes come from.

A ``Task`` is plain frozen data. A ``ProceduralSource`` turns (split, index) into a
task with a private RNG derived by ``derive_seed`` and keeps a split's tasks only if
their content hashes into that split, so splits never share a question. Finite splits
are materialised once per process (and de-duplicated); ``train`` is unbounded.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from frostgym.core.errors import UnknownTaskError
from frostgym.core.hashing import sha256_json
from frostgym.core.seeding import derive_random
from frostgym.core.splits import ALL_SPLITS, DEFAULT_SPLIT_PERCENT, Split, check_split, split_of


@dataclass(frozen=True)
class Task:
    """One frozen problem. ``answer`` is the gold answer in the family's own terms."""

    task_id: str
    source: str
    split: Split
    index: int
    prompt: str
    answer: str
    solution: str = ""
    difficulty: str = "medium"
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The canonical content of the task, the thing its hash covers."""
        return {
            "task_id": self.task_id,
            "source": self.source,
            "split": self.split,
            "index": self.index,
            "prompt": self.prompt,
            "answer": self.answer,
            "solution": self.solution,
            "difficulty": self.difficulty,
            "tags": list(self.tags),
            "metadata": dict(self.metadata),
        }

    @cached_property
    def sha256(self) -> str:
        return sha256_json(self.record())


@dataclass(frozen=True)
class Draft:
    """What a generator returns before the source gives it an id and a split."""

    prompt: str
    answer: str
    solution: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: Per-task overrides of the source's difficulty and tags (hand-written task sets).
    difficulty: str | None = None
    tags: tuple[str, ...] | None = None


def parse_task_id(task_id: str) -> tuple[str, Split, int]:
    """Split ``"source/split/index"`` into its parts, with a readable error."""
    parts = task_id.rsplit("/", 2) if isinstance(task_id, str) else []
    if len(parts) != 3 or not parts[2].isdigit() or parts[1] not in ALL_SPLITS:
        raise UnknownTaskError(f"malformed task id {task_id!r}; expected 'source/split/index'")
    return parts[0], check_split(parts[1]), int(parts[2])


class ProceduralSource(ABC):
    """A seeded generator of tasks with fixed-size eval splits and an unbounded train split."""

    #: Stable identifier; part of every task id and every derived seed.
    name: str
    #: Bump when generated content changes; it is hashed into every task seed.
    version: str
    difficulty: str
    tags: tuple[str, ...] = ()
    sizes: Mapping[Split, int | None] = MappingProxyType({"train": None, "dev": 200, "test": 500, "private": 500})
    #: How content hashes are shared out among the splits.
    split_percent: Mapping[Split, int] = DEFAULT_SPLIT_PERCENT
    #: Give up on a split if this many draws in a row are rejected (guards a broken generator).
    max_rejections: int = 10_000
    #: Installed distributions (PyPI names) the tasks' content is read, generated or replayed
    #: from: another version of one can change an episode. A card's provenance records their
    #: versions (``frostgym.cards.provenance``); this is the only list of them.
    distributions: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._finite: dict[Split, list[Task]] = {}

    @abstractmethod
    def generate(self, rng: random.Random) -> Draft:
        """Make one task from ``rng`` alone (no other randomness, no I/O)."""

    def size(self, split: Split) -> int | None:
        return self.sizes[check_split(split)]

    def task(self, split: Split, index: int) -> Task:
        split = check_split(split)
        size = self.sizes[split]
        if index < 0 or (size is not None and index >= size):
            raise UnknownTaskError(f"{self.name}: index {index} is outside split {split!r} (size {size})")
        if size is None:
            return self._draw_unbounded(split, index)
        return self._finite_split(split)[index]

    def task_by_id(self, task_id: str) -> Task:
        source, split, index = parse_task_id(task_id)
        if source != self.name:
            raise UnknownTaskError(f"task {task_id!r} is not from source {self.name!r}")
        return self.task(split, index)

    def sample(self, split: Split, rng: np.random.Generator) -> Task:
        """The task an episode seeded with ``rng`` gets."""
        size = self.size(split)
        bound = size if size is not None else 2**62
        return self.task(split, int(rng.integers(0, bound, dtype=np.int64)))

    def tasks(self, split: Split) -> Iterator[Task]:
        size = self.size(split)
        if size is None:
            raise ValueError(f"split {split!r} of {self.name} is unbounded; iterate with task()")
        return iter(self._finite_split(split))

    def fingerprint(self, splits: tuple[Split, ...] = ("dev",)) -> str:
        """SHA-256 over the full content of the given finite splits."""
        return sha256_json([[t.record() for t in self.tasks(s)] for s in splits])

    def _make(self, split: Split, index: int, draft: Draft) -> Task:
        return Task(
            task_id=f"{self.name}/{split}/{index}",
            source=self.name,
            split=split,
            index=index,
            prompt=draft.prompt,
            answer=draft.answer,
            solution=draft.solution,
            difficulty=draft.difficulty or self.difficulty,
            tags=self.tags if draft.tags is None else draft.tags,
            metadata=draft.metadata,
        )

    def _owns(self, draft: Draft, split: Split) -> bool:
        return split_of(draft.prompt, salt=self.name, percent=self.split_percent) == split

    def _try_generate(self, *seed_parts: str | int) -> Draft | None:
        try:
            return self.generate(derive_random(self.name, self.version, *seed_parts))
        except (ValueError, ArithmeticError):
            return None  # some seeds make degenerate instances; the next draw is just as frozen

    def _draw_unbounded(self, split: Split, index: int) -> Task:
        for attempt in range(self.max_rejections):
            draft = self._try_generate(split, index, attempt)
            if draft is not None and self._owns(draft, split):
                return self._make(split, index, draft)
        raise RuntimeError(f"{self.name}: no task for {split}/{index} after {self.max_rejections} draws")

    def _finite_split(self, split: Split) -> list[Task]:
        cached = self._finite.get(split)
        if cached is not None:
            return cached
        size = self.sizes[split]
        assert size is not None
        tasks: list[Task] = []
        seen: set[str] = set()
        draw = rejected_in_row = 0
        while len(tasks) < size:
            draft = self._try_generate(split, draw)
            draw += 1
            if draft is None or draft.prompt in seen or not self._owns(draft, split):
                rejected_in_row += 1
                if rejected_in_row > self.max_rejections:
                    raise RuntimeError(f"{self.name}: split {split!r} stalled at {len(tasks)} tasks")
                continue
            rejected_in_row = 0
            seen.add(draft.prompt)
            tasks.append(self._make(split, len(tasks), draft))
        self._finite[split] = tasks
        return tasks
