"""The example family's task sources: one of each kind.

- ``DigitSumSource``, procedural: the sum of a random number's digits, with a config
  (``DigitSumConfig``) settable through ``gym.make(id, task_config=...)``.
- ``RomanSource``, a fixed list: every Roman numeral from 1 to 400, dealt into the four
  splits by a hash of its prompt.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from frostgym.core.splits import Split
from frostgym.core.tasks import Draft, ProceduralSource, TaskListSource, TaskSource, require_int, shared_source


@dataclass(frozen=True)
class DigitSumConfig:
    """How many digits a number has."""

    min_digits: int = 3
    max_digits: int = 9

    def __post_init__(self) -> None:
        require_int("min_digits", self.min_digits, low=2, high=30)
        require_int("max_digits", self.max_digits, low=self.min_digits, high=30)


class DigitSumSource(ProceduralSource):
    """Add up the digits of a number."""

    name = "digit_sum"
    version = "1"
    difficulty = "easy"
    tags = ("arithmetic",)
    sizes = MappingProxyType({"train": None, "dev": 40, "test": 40, "private": 20})
    config_type = DigitSumConfig
    config: DigitSumConfig

    def generate(self, rng: random.Random) -> Draft:
        length = rng.randint(self.config.min_digits, self.config.max_digits)
        digits = [rng.randint(1, 9)] + [rng.randint(0, 9) for _ in range(length - 1)]
        number = "".join(map(str, digits))
        return Draft(
            prompt=f"What is the sum of the digits of {number}? Answer inside <answer></answer>.",
            answer=str(sum(digits)),
            solution=" + ".join(map(str, digits)) + f" = {sum(digits)}",
        )


_NUMERALS = ((100, "C"), (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))


def roman(number: int) -> str:
    out = ""
    for value, letters in _NUMERALS:
        while number >= value:
            out, number = out + letters, number - value
    return out


class RomanSource(TaskListSource):
    """The numbers 1 to 400 as Roman numerals (``CCCC`` for 400: no D here)."""

    name = "roman"
    version = "1"
    difficulty = "easy"
    tags = ("numerals",)
    split_percent = MappingProxyType({"train": 40, "dev": 30, "test": 20, "private": 10})

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        return self.deal_by_content(
            Draft(
                prompt=f"Which number is the Roman numeral {roman(n)}? Answer inside <answer></answer>.",
                answer=str(n),
                solution=f"{roman(n)} = {n}",
            )
            for n in range(1, 401)
        )


SOURCES: dict[str, type[TaskSource]] = {"digit_sum": DigitSumSource, "roman": RomanSource}


def digits_source(name: str, config: object = None) -> TaskSource:
    """The shared source ``name`` with ``config`` (None: the default)."""
    return shared_source(SOURCES[name], config)
