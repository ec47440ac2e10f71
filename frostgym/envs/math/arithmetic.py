"""Integer arithmetic: one expression to evaluate, from ``3 + 4`` to six operands with
parentheses and exact division, in five levels.

A task's twin (``ArithmeticSource.twin_draft``) is the same expression (its operators, and
its parentheses or their absence) with new operands drawn from the config's range, and an
answer of the same sign (``frostgym.envs.math.twins``): a divisor is drawn among those that
divide exactly, as the generator allows ``/`` only there.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from frostgym.core.tasks import Draft, Level, ProceduralSource, Task, added, require_int
from frostgym.envs.math.twins import check_sign

OPERATORS = "+-*/"
PROMPT = "Calculate the value of the expression {}. Give the result as your final answer."
_OPERATOR_OF: dict[type[ast.operator], str] = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


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
    return _flat_value(values, ops, steps)


def _flat_value(values: list[int], ops: list[str], steps: list[str]) -> tuple[str, Fraction]:
    """The text and value of ``values`` joined by ``ops``, with the usual precedence."""
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

    twin_rule = "1"

    def generate(self, rng: random.Random) -> Draft:
        c = self.config
        values = [rng.randint(c.min_operand, c.max_operand) for _ in range(rng.randint(c.min_operands, c.max_operands))]
        steps: list[str] = []
        expr, value = (_nested if c.parentheses else _flat)(rng, values, c.operators, steps)
        return _draft(expr, value, steps)

    def twin_draft(self, original: Task, rng: random.Random) -> Draft:
        """``original``'s expression with new operands: the same operators in the same
        places, nested in the same parentheses (or written flat, as the config writes it),
        and an answer of the same sign."""
        expr = original.prompt.removeprefix(PROMPT.split("{}")[0]).removesuffix(PROMPT.split("{}")[1])
        steps: list[str] = []
        if not self.config.parentheses:
            ops = expr.split(" ")[1::2]
            value, values = self._operand(rng), []
            values.append(value)
            term = Fraction(value)  # the running product, as ``_flat`` keeps it
            for op in ops:
                value = self._divisor(rng, term) if op == "/" else self._operand(rng)
                values.append(value)
                term = term * value if op == "*" else term / value if op == "/" else Fraction(value)
            text, result = _flat_value(values, ops, steps)
        else:
            text, result = self._twin_node(ast.parse(expr, mode="eval").body, rng, steps)
            text = text[1:-1] if text.startswith("(") else text
        check_sign(str(result), original.answer)
        return _draft(text, result, steps)

    def _twin_node(self, node: ast.expr, rng: random.Random, steps: list[str]) -> tuple[str, Fraction]:
        """A node of a nested expression with new operands, as ``_nested`` writes it."""
        if isinstance(node, ast.Constant):
            value = self._operand(rng)
            return str(value), Fraction(value)
        if not isinstance(node, ast.BinOp) or type(node.op) not in _OPERATOR_OF:
            raise ValueError(f"not an expression this generator writes: {ast.dump(node)}")
        op = _OPERATOR_OF[type(node.op)]
        left_text, left = self._twin_node(node.left, rng, steps)
        if op == "/" and isinstance(node.right, ast.Constant):
            divisor = self._divisor(rng, left)
            right_text, right = str(divisor), Fraction(divisor)
        else:
            right_text, right = self._twin_node(node.right, rng, steps)
        if op == "/" and (right == 0 or (left / right).denominator != 1):
            raise ValueError("inexact division")  # rejected: the next draw is used
        return f"({left_text} {op} {right_text})", _apply(op, left, right, steps)

    def _operand(self, rng: random.Random) -> int:
        return rng.randint(self.config.min_operand, self.config.max_operand)

    def _divisor(self, rng: random.Random, dividend: Fraction) -> int:
        """An operand that divides ``dividend`` exactly (any non-zero one divides 0)."""
        low, high = max(self.config.min_operand, 1), self.config.max_operand
        if dividend.denominator != 1:
            raise ValueError("a fraction is divided by no operand exactly")
        fits = [v for v in range(low, high + 1) if dividend.numerator % v == 0]
        if not fits:
            raise ValueError(f"no operand divides {dividend}")
        return rng.choice(fits)


def _draft(expr: str, value: Fraction, steps: list[str]) -> Draft:
    return Draft(prompt=PROMPT.format(expr), answer=str(value), solution="\n".join(steps))
