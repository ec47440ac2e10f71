"""Arithmetic on fractions, answered as a reduced fraction."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from frostgym.core.tasks import Draft, ProceduralSource, require_int


@dataclass(frozen=True)
class FractionConfig:
    """How long a computation gets (its terms) and how large a term's denominator is."""

    min_terms: int = 2
    max_terms: int = 4
    max_denominator: int = 12

    def __post_init__(self) -> None:
        require_int("min_terms", self.min_terms, low=2, high=12)
        require_int("max_terms", self.max_terms, low=self.min_terms, high=12)
        require_int("max_denominator", self.max_denominator, low=2, high=1000)


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

    def _term(self, rng: random.Random) -> Fraction:
        while True:  # a bounded number of tries in practice; every draw is seeded
            den = rng.randint(2, self.config.max_denominator)
            value = Fraction(rng.randint(1, 2 * den), den)
            if value.denominator != 1:
                return value

    def generate(self, rng: random.Random) -> Draft:
        terms = [self._term(rng) for _ in range(rng.randint(self.config.min_terms, self.config.max_terms))]
        value = terms[0]
        shown = [f"({format_fraction(terms[0])})"]
        steps = []
        for term in terms[1:]:
            op = rng.choice("+-*/")
            new = {"+": value + term, "-": value - term, "*": value * term, "/": value / term}[op]
            steps.append(f"({format_fraction(value)}) {op} ({format_fraction(term)}) = {format_fraction(new)}")
            shown.append(f"{op} ({format_fraction(term)})")
            value = new
        expr = " ".join(shown)
        return Draft(
            prompt=(
                f"Compute {expr}, working strictly from left to right. "
                "Give the result as a fraction in lowest terms (or an integer)."
            ),
            answer=format_fraction(value),
            solution="\n".join(steps),
        )
