"""Reading an equation chain (``5 + 2 = 7``) as the one value it states.

Asked "What is 5 + 2?", small models answer ``5 + 2 = 7``. Read as an expression that is
three numbers; read as a statement it says 7. The rule:

- A chain is two or more sides joined by ``=`` (or "equals", "is", "is equal to"). It
  states the value of its last side, which must be a number: ``5 + 2 = 7`` states 7,
  and so does ``the final answer is 120 - 39 = 81`` (81). A chain whose sides disagree
  states its last value all the same (``4 + 5 = 10`` states 10: wrong, not unreadable);
  ``Chain.holds`` says whether every side has that value.
- A side that is a number names a value; a chain naming two values (``18 = 19``,
  ``9 = 4 + 5 = 10``) states none (``multiple_values``). A chain ending in a computation
  (``12 + 6 = 6 + 12``) states none either: the caller reads it as before.
- Every side is arithmetic: numbers, each optionally followed by unit words
  (``4 boxes * 6 cookies``); ``+ - * /``, the Unicode signs for times, divide and
  minus, the middle dot, ``\\times \\cdot \\div``, ``x`` between two numbers;
  parentheses or braces; ``\\frac{}{}``. Anything else (a variable, ``or``, a comma
  list, ``^``, ``%``, ``?``) and the text is not a chain.
- Words may lead into the chain ("So,", "Jack has") when they hold no digit and no
  number word; unit words after it are dropped as ``strip_decoration`` drops them. A
  lone number after words ("Tom has 7 apples") is not a chain: words before a number
  can qualify it ("at least 7", "not 7"), while an equation asserts its value.

Sides are evaluated exactly (``Fraction``) by a recursive-descent parser over an
allow-list of tokens, never ``eval``; a text over ``MAX_CHAIN_CHARS`` (200) characters or
nested deeper than 16 is not read, so the work per candidate is bounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from frostgym.graders.numbers import NUMBER_WORD, NotANumber, ParsedNumber, parse_number, strip_decoration

MAX_CHAIN_CHARS = 200
_MAX_DEPTH = 16

_LEAD_IN = re.compile(r"(?:[A-Za-z']+[,:]?\s+)*", re.ASCII)
_MATH_START = re.compile(r"[\d({.$\\]|[-+\u2212][\d(]", re.ASCII)
_EQUALS = re.compile(r"\s*(?:==?|\bequals\b|\bis\s+equal\s+to\b|\bis\b)\s*", re.IGNORECASE | re.ASCII)
_TIMES_X = re.compile(r"(?<=\d) x (?=\d)", re.ASCII)
_IGNORED = re.compile(r"\\left\b|\\right\b|\\[()]|\\\$|\$", re.ASCII)
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:\s+[A-Za-z]{2,}(?![A-Za-z]))*"
    r"|(?P<op>[-+*/\u00d7\u00f7\u00b7\u2212]|\\times|\\cdot|\\div)"
    r"|(?P<frac>\\[dt]?frac)"
    r"|(?P<open>[({])|(?P<close>[)}]))",
    re.ASCII,
)
_CLOSING = {"(": ")", "{": "}"}
_ADDITIVE = {"+", "-", "\u2212"}
_TIMES = {"*", "\u00d7", "\u00b7", "\\times", "\\cdot"}  # the other non-additive operators divide

_Token = tuple[str, str]  # (kind, text)


@dataclass(frozen=True)
class Chain:
    """What an equation chain states: its last side's ``value``; ``holds`` when every
    side has that value (``5 + 2 = 7``), not when they disagree (``4 + 5 = 10``)."""

    value: Fraction
    holds: bool


class _Unreadable(Exception):
    """A side that is not arithmetic this module reads (never leaves the module)."""


def read_chain(text: str) -> Chain | NotANumber | None:
    """The value the equation chain in ``text`` states (see the module docstring):
    a ``Chain``; ``NotANumber("multiple_values")`` when its number sides name two values;
    ``None`` when ``text`` is not an equation chain of arithmetic at all."""
    if len(text) > MAX_CHAIN_CHARS:
        return None
    s = strip_decoration(text)
    lead = _LEAD_IN.match(s)
    body = s[lead.end() if lead else 0 :]
    if (lead and NUMBER_WORD.search(lead.group(0))) or not _MATH_START.match(body):
        return None
    sides = _EQUALS.split(_IGNORED.sub(" ", body))
    if len(sides) < 2 or not all(side.strip() for side in sides):
        return None
    last = parse_number(sides[-1])
    if not isinstance(last, ParsedNumber):
        return None
    holds = True
    for side in sides[:-1]:
        named = parse_number(side)
        if isinstance(named, ParsedNumber):
            if named.value != last.value:
                return NotANumber("multiple_values")
            continue
        try:
            value = _evaluate(side)
        except _Unreadable:
            return None
        holds = holds and value == last.value
    return Chain(last.value, holds)


def _evaluate(expression: str) -> Fraction:
    """The exact value of one arithmetic side (the grammar in the module docstring);
    ``_Unreadable`` for anything else, division by zero included."""
    tokens = _tokenize(_TIMES_X.sub(" * ", expression))
    value, pos = _sum(tokens, 0, 0)
    if pos != len(tokens):
        raise _Unreadable
    return value


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _Unreadable
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


def _peek(tokens: list[_Token], pos: int) -> _Token:
    return tokens[pos] if pos < len(tokens) else ("end", "")


def _sum(tokens: list[_Token], pos: int, depth: int) -> tuple[Fraction, int]:
    value, pos = _product(tokens, pos, depth)
    while (tok := _peek(tokens, pos))[0] == "op" and tok[1] in _ADDITIVE:
        right, pos = _product(tokens, pos + 1, depth)
        value = value + right if tok[1] == "+" else value - right
    return value, pos


def _product(tokens: list[_Token], pos: int, depth: int) -> tuple[Fraction, int]:
    value, pos = _signed(tokens, pos, depth)
    while (tok := _peek(tokens, pos))[0] == "op" and tok[1] not in _ADDITIVE:
        right, pos = _signed(tokens, pos + 1, depth)
        if tok[1] in _TIMES:
            value *= right
        elif right == 0:
            raise _Unreadable
        else:
            value /= right
    return value, pos


def _signed(tokens: list[_Token], pos: int, depth: int) -> tuple[Fraction, int]:
    if depth > _MAX_DEPTH:
        raise _Unreadable
    kind, text = _peek(tokens, pos)
    if kind == "op" and text in _ADDITIVE:
        value, pos = _signed(tokens, pos + 1, depth + 1)
        return (value if text == "+" else -value), pos
    return _atom(tokens, pos, depth)


def _atom(tokens: list[_Token], pos: int, depth: int) -> tuple[Fraction, int]:
    kind, text = _peek(tokens, pos)
    if kind == "num":
        return Fraction(text.replace(",", "")), pos + 1
    if kind == "open":
        return _group(tokens, pos, depth)
    if kind == "frac":
        numerator, pos = _group(tokens, pos + 1, depth, brace=True)
        denominator, pos = _group(tokens, pos, depth, brace=True)
        if denominator == 0:
            raise _Unreadable
        return numerator / denominator, pos
    raise _Unreadable


def _group(tokens: list[_Token], pos: int, depth: int, *, brace: bool = False) -> tuple[Fraction, int]:
    kind, opening = _peek(tokens, pos)
    if kind != "open" or (brace and opening != "{"):
        raise _Unreadable
    value, pos = _sum(tokens, pos + 1, depth + 1)
    if _peek(tokens, pos) != ("close", _CLOSING[opening]):
        raise _Unreadable
    return value, pos + 1
