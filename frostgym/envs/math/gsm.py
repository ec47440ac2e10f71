"""GSM-style word problems from reasoning-gym's ``gsm_symbolic`` templates.

reasoning-gym seeds item ``i`` with ``Random(seed + i)``, so nearby dataset seeds share
items. We call its vetted template functions directly with our own derived RNG
instead, and keep only its list of templates known to be correct. reasoning-gym's own
config has one knob, ``difficulty``, and supports only its default (1.0); ours narrows
the templates drawn from.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class GSMConfig:
    """``templates``: the reasoning-gym template numbers to draw from (a subset of its
    vetted ones), or None for all of them."""

    templates: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.templates is None:
            return
        ok = _templates()[0]
        if not self.templates or len(set(self.templates)) != len(self.templates):
            raise ValueError(f"templates must be distinct template numbers, got {self.templates!r}")
        unknown = [t for t in self.templates if isinstance(t, bool) or t not in ok]
        if unknown:
            raise ValueError(f"templates {unknown} are not among reasoning-gym's vetted ones: {list(ok)}")


class GSMSymbolicSource(ProceduralSource):
    """Grade-school word problems (GSM8K templates with resampled names and numbers)."""

    name = "gsm_symbolic"
    version = "1"
    distributions = ("reasoning-gym",)
    difficulty = "medium"
    tags = ("word_problem", "multi_step")
    config_type = GSMConfig
    config: GSMConfig

    def generate(self, rng: random.Random) -> Draft:
        ok, templates = _templates()
        template = rng.choice(self.config.templates or ok)
        example = templates[template](rng, 1.0)
        cot = str(example["metadata"]["answer_cot"])
        solution = cot.rsplit("####", 1)[0].strip()
        return Draft(
            prompt=str(example["question"]) + SUFFIX,
            answer=str(example["answer"]),
            solution=solution,
            metadata={"template": template},
        )
