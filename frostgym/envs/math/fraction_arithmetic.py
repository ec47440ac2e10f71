"""Arithmetic on fractions, answered as a reduced fraction."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from frostgym.core.tasks import Draft, ProceduralSource


@dataclass(frozen=True)
class FractionConfig:
    min_terms: int = 2
    max_terms: int = 4
    max_denominator: int = 12


def format_fraction(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


class FractionArithmeticSource(ProceduralSource):
    """Add, subtract, multiply and divide proper and improper fractions, left to right."""

    name = "fraction_arithmetic"
    version = "1"
    difficulty = "medium"
    tags = ("fractions", "multi_step")

    def __init__(self, config: FractionConfig | None = None) -> None:
        super().__init__()
        self.config = config or FractionConfig()

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
