"""Linear equations in one unknown: from ``3x - 4 = 11`` to ``p(ax + b) = cx + d`` with
rational solutions, in four levels.

A task's twin (``LinearEquationSource.twin_draft``) is an equation of the same form (the
config fixes whether it has a bracket and the unknown on both sides) in the same unknown,
with new coefficients and constants drawn as the generator draws them, and a solution of
the same sign (``frostgym.envs.math.twins``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from frostgym.core.tasks import Draft, Level, ProceduralSource, Task, added, require_int
from frostgym.envs.math.fraction_arithmetic import format_fraction
from frostgym.envs.math.twins import check_sign


@dataclass(frozen=True)
class LinearConfig:
    """The largest coefficient of the unknown and the largest constant, in absolute value;
    whether the left side is a multiple of a bracket (``p(ax + b)``, p from 2 to 6), whether
    the unknown is on both sides, and whether only integer solutions are drawn."""

    max_coefficient: int = 12
    max_constant: int = 40
    bracket: bool = added(True)
    both_sides: bool = added(True)
    integer_solution: bool = added(False)

    def __post_init__(self) -> None:
        require_int("max_coefficient", self.max_coefficient, low=1, high=1000)
        require_int("max_constant", self.max_constant, low=0, high=10**6)
        for name in ("bracket", "both_sides", "integer_solution"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")


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
    levels = MappingProxyType(
        {
            1: Level(
                "ax + b = d, coefficients up to 5, integer solution",
                LinearConfig(
                    max_coefficient=5, max_constant=20, bracket=False, both_sides=False, integer_solution=True
                ),
            ),
            2: Level(
                "ax + b = cx + d, coefficients up to 9, integer solution",
                LinearConfig(max_coefficient=9, max_constant=30, bracket=False, integer_solution=True),
            ),
            3: Level("p(ax + b) = cx + d, coefficients up to 12, rational solution", LinearConfig()),
            4: Level(
                "p(ax + b) = cx + d, coefficients up to 40, constants up to 200, rational solution",
                LinearConfig(max_coefficient=40, max_constant=200),
            ),
        }
    )
    default_level = 3
    twin_rule = "1"

    def generate(self, rng: random.Random) -> Draft:
        return self._equation(rng, rng.choice("xyznk"))

    def twin_draft(self, original: Task, rng: random.Random) -> Draft:
        """An equation in ``original``'s unknown with new coefficients and constants, and a
        solution of its sign."""
        found = re.match(r"Solve for (\w):", original.prompt)
        if found is None:
            raise ValueError(f"not an equation this generator writes: {original.prompt!r}")
        draft = self._equation(rng, found.group(1))
        check_sign(draft.answer, original.answer)
        return draft

    def _equation(self, rng: random.Random, var: str) -> Draft:
        c = self.config

        def coef() -> int:
            return rng.choice([i for i in range(-c.max_coefficient, c.max_coefficient + 1) if i != 0])

        p = rng.randint(2, 6) if c.bracket else 1
        a = coef()
        cc = coef() if c.both_sides else 0
        b, d = rng.randint(-c.max_constant, c.max_constant), rng.randint(-c.max_constant, c.max_constant)
        if p * a == cc:
            raise ValueError("no unique solution")  # rejected by the source, next draw is used
        if (p, a, b, cc) == (1, 1, 0, 0):
            raise ValueError("already solved")  # "x = 7": likewise
        solution = Fraction(d - p * b, p * a - cc)
        if c.integer_solution and solution.denominator != 1:
            raise ValueError("not an integer solution")  # likewise
        lhs = f"{p}({_linear(a, b, var)})" if c.bracket else _linear(a, b, var)
        rhs = _linear(cc, d, var) if cc else str(d)
        steps = [f"Expand: {_linear(p * a, p * b, var)} = {rhs}"] if c.bracket else []
        steps += [
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
