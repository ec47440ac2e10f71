"""Arithmetic on fractions, answered as a reduced fraction: from two proper fractions over
one denominator to six terms with all four operations, in five levels.

A task's twin (``FractionArithmeticSource.twin_draft``) is the same computation (as many
terms, the same operators in the same order) over new terms drawn as the generator draws
them (over one new shared denominator, at the levels that share one), with an answer of
the same sign (``frostgym.envs.math.twins``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from frostgym.core.tasks import Draft, Level, ProceduralSource, Task, added, require_int
from frostgym.envs.math.twins import check_sign

OPERATORS = "+-*/"
#: How a prompt writes the operator between two terms: ``(1/2) + (3/4)``.
_BETWEEN_TERMS = re.compile(r"\) ([-+*/]) \(")


@dataclass(frozen=True)
class FractionConfig:
    """How long a computation gets (its terms), how large a term's denominator is, the
    operators it may use (in ``+-*/`` order), and whether every term is a proper fraction
    over one shared denominator (written as drawn, not reduced)."""

    min_terms: int = 2
    max_terms: int = 4
    max_denominator: int = 12
    operators: str = added(OPERATORS)
    common_denominator: bool = added(False)

    def __post_init__(self) -> None:
        require_int("min_terms", self.min_terms, low=2, high=12)
        require_int("max_terms", self.max_terms, low=self.min_terms, high=12)
        require_int("max_denominator", self.max_denominator, low=2, high=1000)
        if (
            not isinstance(self.operators, str)
            or not self.operators
            or self.operators != "".join(op for op in OPERATORS if op in self.operators)
        ):
            raise ValueError(f"operators must be some of '{OPERATORS}', in that order, got {self.operators!r}")
        if not isinstance(self.common_denominator, bool):
            raise ValueError(f"common_denominator must be true or false, got {self.common_denominator!r}")


def format_fraction(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


class FractionArithmeticSource(ProceduralSource):
    """Add, subtract, multiply and divide proper and improper fractions, left to right."""

    name = "fraction_arithmetic"
    version = "1"
    difficulty = "medium"
    tags = ("fractions", "multi_step")
    config_type = FractionConfig
    config: FractionConfig
    levels = MappingProxyType(
        {
            1: Level(
                "two proper fractions over one denominator up to 12, + and -",
                FractionConfig(min_terms=2, max_terms=2, operators="+-", common_denominator=True),
                # About 1,000 such sums exist, about 100 per eval split: most of them.
                sizes=MappingProxyType({"train": None, "dev": 80, "test": 80, "private": 80}),
            ),
            2: Level(
                "two fractions, denominators up to 10, + and -",
                FractionConfig(min_terms=2, max_terms=2, max_denominator=10, operators="+-"),
                # About 760 such sums exist per eval split: most of them.
                sizes=MappingProxyType({"train": None, "dev": 200, "test": 400, "private": 400}),
            ),
            3: Level(
                "two or three fractions, denominators up to 12, + - and *",
                FractionConfig(min_terms=2, max_terms=3, operators="+-*"),
            ),
            4: Level("two to four fractions, denominators up to 12, + - * and /", FractionConfig()),
            5: Level(
                "four to six fractions, denominators up to 20, + - * and /",
                FractionConfig(min_terms=4, max_terms=6, max_denominator=20),
            ),
        }
    )
    default_level = 4
    twin_rule = "1"

    def _term(self, rng: random.Random) -> Fraction:
        while True:  # a bounded number of tries in practice; every draw is seeded
            den = rng.randint(2, self.config.max_denominator)
            value = Fraction(rng.randint(1, 2 * den), den)
            if value.denominator != 1:
                return value

    def _terms(self, rng: random.Random, count: int) -> list[tuple[Fraction, str]]:
        """``count`` terms, each with how the prompt writes it."""
        if not self.config.common_denominator:
            return [(term, format_fraction(term)) for term in (self._term(rng) for _ in range(count))]
        den = rng.randint(2, self.config.max_denominator)
        numerators = [rng.randint(1, den - 1) for _ in range(count)]
        return [(Fraction(n, den), f"{n}/{den}") for n in numerators]

    def generate(self, rng: random.Random) -> Draft:
        terms = self._terms(rng, rng.randint(self.config.min_terms, self.config.max_terms))
        return _draft(terms, [rng.choice(self.config.operators) for _ in terms[1:]])

    def twin_draft(self, original: Task, rng: random.Random) -> Draft:
        """``original``'s operators, in order, between new terms; an answer of its sign."""
        ops = _BETWEEN_TERMS.findall(original.prompt)
        draft = _draft(self._terms(rng, len(ops) + 1), ops)
        check_sign(draft.answer, original.answer)
        return draft


def _draft(terms: list[tuple[Fraction, str]], ops: list[str]) -> Draft:
    """``terms`` joined by ``ops``, computed from left to right."""
    value = terms[0][0]
    shown = [f"({terms[0][1]})"]
    steps = []
    for (term, text), op in zip(terms[1:], ops, strict=True):
        new = {"+": value + term, "-": value - term, "*": value * term, "/": value / term}[op]
        steps.append(f"({format_fraction(value)}) {op} ({text}) = {format_fraction(new)}")
        shown.append(f"{op} ({text})")
        value = new
    return Draft(
        prompt=(
            f"Compute {' '.join(shown)}, working strictly from left to right. "
            "Give the result as a fraction in lowest terms (or an integer)."
        ),
        answer=format_fraction(value),
        solution="\n".join(steps),
    )
