"""Multi-step integer arithmetic: one expression, three to five operands."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from frostgym.core.tasks import Draft, ProceduralSource, require_int


@dataclass(frozen=True)
class ArithmeticConfig:
    """How big an expression gets: its operand count and largest operand (operands start at 2)."""

    min_operands: int = 3
    max_operands: int = 5
    max_operand: int = 99

    def __post_init__(self) -> None:
        require_int("min_operands", self.min_operands, low=2, high=12)
        require_int("max_operands", self.max_operands, low=self.min_operands, high=12)
        require_int("max_operand", self.max_operand, low=2, high=10**6)


@dataclass(frozen=True)
class _Node:
    text: str
    value: Fraction


def _combine(rng: random.Random, left: _Node, right: _Node, steps: list[str]) -> _Node:
    ops = ["+", "-", "*"]
    if right.value != 0 and (left.value / right.value).denominator == 1:
        ops.append("/")
    op = rng.choice(ops)
    value = {
        "+": left.value + right.value,
        "-": left.value - right.value,
        "*": left.value * right.value,
        "/": left.value / right.value if right.value else Fraction(0),
    }[op]
    steps.append(f"{left.value} {op} {right.value} = {value}")
    return _Node(f"({left.text} {op} {right.text})", value)


class ArithmeticSource(ProceduralSource):
    """Evaluate an integer expression with +, -, * and exact division."""

    name = "arithmetic"
    version = "1"
    difficulty = "easy"
    tags = ("arithmetic", "multi_step")
    config_type = ArithmeticConfig
    config: ArithmeticConfig

    def generate(self, rng: random.Random) -> Draft:
        c = self.config
        nodes = [
            _Node(str(v), Fraction(v))
            for v in (rng.randint(2, c.max_operand) for _ in range(rng.randint(c.min_operands, c.max_operands)))
        ]
        steps: list[str] = []
        while len(nodes) > 1:  # combine a random adjacent pair: a random tree shape
            i = rng.randrange(len(nodes) - 1)
            nodes[i : i + 2] = [_combine(rng, nodes[i], nodes[i + 1], steps)]
        expr = nodes[0].text[1:-1]  # drop the outermost parentheses
        return Draft(
            prompt=f"Calculate the value of the expression {expr}. Give the result as your final answer.",
            answer=str(nodes[0].value),
            solution="\n".join(steps),
        )
