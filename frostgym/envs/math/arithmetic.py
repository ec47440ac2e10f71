"""Integer arithmetic: one expression to evaluate, from ``3 + 4`` to six operands with
parentheses and exact division, in five levels."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from frostgym.core.tasks import Draft, Level, ProceduralSource, added, require_int

OPERATORS = "+-*/"


@dataclass(frozen=True)
class ArithmeticConfig:
    """How big an expression gets: its operand count, the range of an operand, the
    operators it may use (in ``+-*/`` order; ``/`` only where it divides exactly), and
    whether it nests in parentheses (a random tree) or is written flat, evaluated with
    the usual precedence."""

    min_operands: int = 3
    max_operands: int = 5
    max_operand: int = 99
    min_operand: int = added(2)
    operators: str = added(OPERATORS)
    parentheses: bool = added(True)

    def __post_init__(self) -> None:
        require_int("min_operands", self.min_operands, low=2, high=12)
        require_int("max_operands", self.max_operands, low=self.min_operands, high=12)
        require_int("max_operand", self.max_operand, low=2, high=10**6)
        require_int("min_operand", self.min_operand, low=0, high=self.max_operand)
        if (
            not isinstance(self.operators, str)
            or not self.operators
            or self.operators != "".join(op for op in OPERATORS if op in self.operators)
        ):
            raise ValueError(f"operators must be some of '{OPERATORS}', in that order, got {self.operators!r}")
        if not isinstance(self.parentheses, bool):
            raise ValueError(f"parentheses must be true or false, got {self.parentheses!r}")


@dataclass(frozen=True)
class _Node:
    text: str
    value: Fraction


def _choices(operators: str, left: Fraction, right: Fraction) -> list[str]:
    """The operators that may join ``left`` and ``right``: ``/`` only where it is exact."""
    ops = [op for op in "+-*" if op in operators]
    if "/" in operators and right != 0 and (left / right).denominator == 1:
        ops.append("/")
    if not ops:
        raise ValueError("no operator fits")  # only '/' allowed and it is not exact: next draw
    return ops


def _apply(op: str, left: Fraction, right: Fraction, steps: list[str]) -> Fraction:
    value = {"+": left + right, "-": left - right, "*": left * right, "/": left / right if right else Fraction(0)}[op]
    steps.append(f"{left} {op} {right} = {value}")
    return value


def _nested(rng: random.Random, values: list[int], operators: str, steps: list[str]) -> tuple[str, Fraction]:
    """Combine a random adjacent pair until one node is left: a random tree shape."""
    nodes = [_Node(str(v), Fraction(v)) for v in values]
    while len(nodes) > 1:
        i = rng.randrange(len(nodes) - 1)
        left, right = nodes[i], nodes[i + 1]
        op = rng.choice(_choices(operators, left.value, right.value))
        value = _apply(op, left.value, right.value, steps)
        nodes[i : i + 2] = [_Node(f"({left.text} {op} {right.text})", value)]
    return nodes[0].text[1:-1], nodes[0].value  # the outermost parentheses dropped


def _flat(rng: random.Random, values: list[int], operators: str, steps: list[str]) -> tuple[str, Fraction]:
    """``a op b op c …`` evaluated with the usual precedence: ``*`` and ``/`` first, then
    ``+`` and ``-``, each left to right."""
    ops: list[str] = []
    term = Fraction(values[0])  # the running value of the current product
    for value in values[1:]:
        op = rng.choice(_choices(operators, term, Fraction(value)))
        ops.append(op)
        term = term * value if op == "*" else term / value if op == "/" else Fraction(value)
    terms, signs = [Fraction(values[0])], []
    for op, value in zip(ops, values[1:], strict=True):
        if op in "*/":
            terms[-1] = _apply(op, terms[-1], Fraction(value), steps)
        else:
            signs.append(op)
            terms.append(Fraction(value))
    total = terms[0]
    for op, term in zip(signs, terms[1:], strict=True):
        total = _apply(op, total, term, steps)
    return " ".join([str(values[0]), *(f"{op} {v}" for op, v in zip(ops, values[1:], strict=True))]), total


class ArithmeticSource(ProceduralSource):
    """Evaluate an integer expression with +, -, * and exact division."""

    name = "arithmetic"
    version = "1"
    difficulty = "easy"
    tags = ("arithmetic", "multi_step")
    config_type = ArithmeticConfig
    config: ArithmeticConfig
    levels = MappingProxyType(
        {
            1: Level(
                "two single-digit operands, + and -",
                ArithmeticConfig(
                    min_operands=2, max_operands=2, max_operand=9, min_operand=0, operators="+-", parentheses=False
                ),
                # Only 200 such expressions exist: every one of them that hashes into a split.
                sizes=MappingProxyType({"train": None, "dev": 21, "test": 18, "private": 22}),
            ),
            2: Level(
                "three operands up to 20, + and -, left to right",
                ArithmeticConfig(
                    min_operands=3, max_operands=3, max_operand=20, min_operand=1, operators="+-", parentheses=False
                ),
            ),
            3: Level(
                "three or four operands up to 50, + - and *, usual precedence, no parentheses",
                ArithmeticConfig(min_operands=3, max_operands=4, max_operand=50, operators="+-*", parentheses=False),
            ),
            4: Level("three to five operands up to 99, + - * and exact /, parentheses", ArithmeticConfig()),
            5: Level(
                "four to six operands up to 999, + - * and exact /, parentheses",
                ArithmeticConfig(min_operands=4, max_operands=6, max_operand=999),
            ),
        }
    )
    default_level = 4

    def generate(self, rng: random.Random) -> Draft:
        c = self.config
        values = [rng.randint(c.min_operand, c.max_operand) for _ in range(rng.randint(c.min_operands, c.max_operands))]
        steps: list[str] = []
        expr, value = (_nested if c.parentheses else _flat)(rng, values, c.operators, steps)
        return Draft(
            prompt=f"Calculate the value of the expression {expr}. Give the result as your final answer.",
            answer=str(value),
            solution="\n".join(steps),
        )
