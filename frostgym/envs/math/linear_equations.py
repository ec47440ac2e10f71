"""Linear equations in one unknown with the unknown on both sides; rational solutions."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from frostgym.core.tasks import Draft, ProceduralSource, require_int
from frostgym.envs.math.fraction_arithmetic import format_fraction


@dataclass(frozen=True)
class LinearConfig:
    """The largest coefficient of the unknown and the largest constant, in absolute value."""

    max_coefficient: int = 12
    max_constant: int = 40

    def __post_init__(self) -> None:
        require_int("max_coefficient", self.max_coefficient, low=1, high=1000)
        require_int("max_constant", self.max_constant, low=0, high=10**6)


def _linear(a: int, b: int, var: str) -> str:
    """``a*var + b`` written the way a textbook would."""
    head = {1: var, -1: f"-{var}"}.get(a, f"{a}{var}")
    if b == 0:
        return head
    return f"{head} {'+' if b > 0 else '-'} {abs(b)}"


class LinearEquationSource(ProceduralSource):
    """Solve ``p(ax + b) = cx + d`` for the unknown; the answer may be a fraction."""

    name = "linear_equations"
    version = "1"
    difficulty = "hard"
    tags = ("algebra", "equations")
    config_type = LinearConfig
    config: LinearConfig

    def generate(self, rng: random.Random) -> Draft:
        c = self.config
        var = rng.choice("xyznk")

        def coef() -> int:
            return rng.choice([i for i in range(-c.max_coefficient, c.max_coefficient + 1) if i != 0])

        p, a, cc = rng.randint(2, 6), coef(), coef()
        b, d = rng.randint(-c.max_constant, c.max_constant), rng.randint(-c.max_constant, c.max_constant)
        if p * a == cc:
            raise ValueError("no unique solution")  # rejected by the source, next draw is used
        solution = Fraction(d - p * b, p * a - cc)
        lhs = f"{p}({_linear(a, b, var)})"
        rhs = _linear(cc, d, var)
        steps = [
            f"Expand: {_linear(p * a, p * b, var)} = {rhs}",
            f"Collect terms: {p * a - cc}{var} = {d - p * b}",
            f"Divide: {var} = {format_fraction(solution)}",
        ]
        return Draft(
            prompt=(
                f"Solve for {var}: {lhs} = {rhs}. Give the value of {var} as an integer or a fraction in lowest terms."
            ),
            answer=format_fraction(solution),
            solution="\n".join(steps),
        )
