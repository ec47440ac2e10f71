"""GSM-style word problems from reasoning-gym's ``gsm_symbolic`` templates.

reasoning-gym seeds item ``i`` with ``Random(seed + i)``, so nearby dataset seeds share
items. We call its vetted template functions directly with our own derived RNG
instead, and keep only its list of templates known to be correct. reasoning-gym's own
config has one knob, ``difficulty``, and supports only its default (1.0); ours narrows
the templates drawn from. The levels do so by the length of a template's worked solution:
level 1 draws the two-step templates, each level above adds the next length, and level 4
(the default) draws every template.

A task's twin (``GSMSymbolicSource.twin_draft``) is its template (``metadata["template"]``)
called again with a new RNG: new names and numbers, and the template's own answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

from frostgym.core.tasks import Draft, Level, ProceduralSource, Task

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
    vetted ones, which the source checks), or None for all of them."""

    templates: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.templates is None:
            return
        if (
            not isinstance(self.templates, tuple)
            or not self.templates
            or any(isinstance(t, bool) or not isinstance(t, int) for t in self.templates)
            or len(set(self.templates)) != len(self.templates)
        ):
            raise ValueError(f"templates must be distinct template numbers, got {self.templates!r}")


#: reasoning-gym's vetted templates by the steps of their worked solution (its lines before
#: ``####``, the same for every draw of a template; a test checks both).
TWO_STEPS = (4, 5, 6, 8, 10, 14, 16, 20, 23, 24, 26, 30, 38, 39, 43, 45, 50, 54, 55, 56, 58, 59, 69, 72, 95, 99)
THREE_STEPS = (1, 12, 13, 29, 31, 33, 34, 41, 47, 48, 53, 57, 62, 67, 70, 75, 78, 80, 81, 82, 85, 88, 91, 93)
FOUR_STEPS = (0, 2, 7, 15, 18, 22, 25, 40, 42, 44, 46, 49, 51, 52, 60, 64, 71, 83, 96)


class GSMSymbolicSource(ProceduralSource):
    """Grade-school word problems (GSM8K templates with resampled names and numbers)."""

    name = "gsm_symbolic"
    version = "1"
    distributions = ("reasoning-gym",)
    difficulty = "medium"
    tags = ("word_problem", "multi_step")
    config_type = GSMConfig
    config: GSMConfig
    levels = MappingProxyType(
        {
            1: Level("the 26 templates solved in two steps", GSMConfig(TWO_STEPS)),
            2: Level("the 50 templates solved in up to three steps", GSMConfig(tuple(sorted(TWO_STEPS + THREE_STEPS)))),
            3: Level(
                "the 69 templates solved in up to four steps",
                GSMConfig(tuple(sorted(TWO_STEPS + THREE_STEPS + FOUR_STEPS))),
            ),
            4: Level("all 85 vetted templates, two to fourteen steps", GSMConfig()),
        }
    )
    default_level = 4
    twin_rule = "1"

    def __init__(self, config: object = None) -> None:
        super().__init__(config)
        ok = _templates()[0]
        unknown = [t for t in self.config.templates or () if t not in ok]
        if unknown:
            raise ValueError(f"templates {unknown} are not among reasoning-gym's vetted ones: {list(ok)}")

    def generate(self, rng: random.Random) -> Draft:
        return _from_template(rng.choice(self.config.templates or _templates()[0]), rng)

    def twin_draft(self, original: Task, rng: random.Random) -> Draft:
        """``original``'s template with new values."""
        return _from_template(int(original.metadata["template"]), rng)


def _from_template(template: int, rng: random.Random) -> Draft:
    """A problem of reasoning-gym's ``template``, its values drawn from ``rng``."""
    example = _templates()[1][template](rng, 1.0)
    cot = str(example["metadata"]["answer_cot"])
    solution = cot.rsplit("####", 1)[0].strip()
    return Draft(
        prompt=str(example["question"]) + SUFFIX,
        answer=str(example["answer"]),
        solution=solution,
        metadata={"template": template},
    )
