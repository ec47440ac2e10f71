"""GSM-style word problems from reasoning-gym's ``gsm_symbolic`` templates.

reasoning-gym seeds item ``i`` with ``Random(seed + i)``, so nearby dataset seeds share
items. We call its vetted template functions directly with our own derived RNG
instead, and keep only its list of templates known to be correct.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache
from typing import Any

from frostgym.core.tasks import Draft, ProceduralSource

Template = Callable[[random.Random, float], dict[str, Any]]
SUFFIX = " Give the result as your final answer. Do not include units."


@cache
def _templates() -> tuple[tuple[int, ...], dict[int, Template]]:
    from reasoning_gym.arithmetic.gsm_symbolic.gsm_symbolic import (
        GSMSymbolicDataset,
        GSMSymbolicDatasetConfig,
        tasks_ok,
    )

    dataset = GSMSymbolicDataset(GSMSymbolicDatasetConfig(seed=0, size=1))
    return tuple(tasks_ok), dict(dataset.generators)


class GSMSymbolicSource(ProceduralSource):
    """Grade-school word problems (GSM8K templates with resampled names and numbers)."""

    name = "gsm_symbolic"
    version = "1"
    distributions = ("reasoning-gym",)
    difficulty = "medium"
    tags = ("word_problem", "multi_step")

    def generate(self, rng: random.Random) -> Draft:
        ok, templates = _templates()
        template = rng.choice(ok)
        example = templates[template](rng, 1.0)
        cot = str(example["metadata"]["answer_cot"])
        solution = cot.rsplit("####", 1)[0].strip()
        return Draft(
            prompt=str(example["question"]) + SUFFIX,
            answer=str(example["answer"]),
            solution=solution,
            metadata={"template": template},
        )
