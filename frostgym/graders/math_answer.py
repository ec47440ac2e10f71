"""The math grader: a pure function of (reply, gold answer) to a ``Grade``.

Components:
- ``correctness`` (required): every stated final answer parses to the same single
  value and that value equals the gold. Exact rational comparison for numbers
  (``1,073`` = ``1073.0``, ``3/4`` = ``0.75`` = ``\\frac{3}{4}``); an equation chain
  states the value of its last side (``5 + 2 = 7`` is 7, ``4 + 5 = 10`` is 10, ``18 =
  19`` is two values: ``frostgym.graders.equations``); ``math-verify`` for symbolic
  LaTeX answers, after the same single-value screen.
- ``format``: ``<think>…</think><answer>…</answer>`` (1.0), answer tags only (0.5).
- ``language``: the reply stays in the task's script.

A reply with no answer marker (no tags, ``\\boxed``, "the answer is", ``####``) is
read, so that correctness does not hinge on the marker (format alone rewards it: such
a reply scores 0.9 at most), but only when it makes one statement of a value: exactly
one of its lines and sentences holds a number, and that statement is a number or an
equation chain (``5 + 2 = 7``, ``So, 5 + 2 = 7.``, ``2 * 7 = 14`` then chatter with no
number). Never read: a list (``1 2 3 4 5 6 7 8 9 10``, ``7, 8``: ``ambiguous_answer``);
several statements with numbers (reasoning, or guesses like ``Maybe 6. Maybe 7.``:
without a marker nothing tells the conclusion from the last guess, so ``no_answer``); a
lone number after words (``Tom has 7 apples.``: words before a number can qualify it,
``at least 7``, ``not 7``; ``unparseable_answer``). Whatever is read is one value, so
no reply passes for two golds. The adversarial suite holds a case for each.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from frostgym.core.grade import Grade, GraderSpec
from frostgym.graders.equations import Chain, read_chain
from frostgym.graders.extraction import extract_answers, strip_tags
from frostgym.graders.language import language_score
from frostgym.graders.numbers import NotANumber, ParsedNumber, parse_number, strip_decoration

GRADER = GraderSpec(
    name="math",
    version="1.2.0",  # what each version changed: CHANGELOG.md
    # every label this grader can give; none means a perfect score
    labels=(
        "too_long",
        "no_answer",
        "ambiguous_answer",
        "non_ascii_digits",
        "unparseable_answer",
        "wrong_answer",
        "format_error",
        "language_mismatch",
    ),
    weights={"correctness": 0.8, "format": 0.1, "language": 0.1},
    required=("correctness",),
)
_REASON_LABEL = {
    "empty": "no_answer",
    "non_ascii_digits": "non_ascii_digits",
    "too_long": "too_long",
    "multiple_values": "ambiguous_answer",
    "not_numeric": "unparseable_answer",
}
_MULTI_VALUE = re.compile(r",|;|\bor\b|\band\b|\\lor|\\land|\\pm|\\mp|\\cup|\\\{|=[^=]*=", re.IGNORECASE)
_SYMBOLIC_MAX_CHARS = 200
#: A word outside LaTeX macros: prose, which math-verify would mine for any number in it
#: ("Is it seventeen? Is it 18?" reads as 18).
_PROSE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")


@dataclass(frozen=True)
class MathGraderConfig:
    weights: Mapping[str, float] = field(default_factory=lambda: GRADER.weights)
    required: tuple[str, ...] = GRADER.required
    #: Replies longer than this are graded ``too_long`` without being read.
    max_reply_chars: int = 200_000
    language: str = "en"
    #: Use math-verify for answers that are not plain numbers (e.g. ``\\sqrt{2}``).
    symbolic: bool = True


DEFAULT_CONFIG = MathGraderConfig()


@dataclass(frozen=True)
class _Verdict:
    correct: bool
    label: str | None
    extracted: str | None
    #: The answer's canonical value (``"3/4"`` for ``0.75``), so that maj@k votes for
    #: values, not spellings; ``None`` when the reply has no single value.
    key: str | None = None
    #: ``"holds"`` or ``"false"`` when the answer was read from equation chains (``4 + 5
    #: = 10`` is false), else ``None``.
    equation: str | None = None


def grade_math(reply: str, gold: str, config: MathGraderConfig = DEFAULT_CONFIG) -> Grade:
    """Grade one reply against the gold answer string."""
    if len(reply) > config.max_reply_chars:
        return _grade({"correctness": 0.0, "format": 0.0, "language": 0.0}, "too_long", None, "none", gold, config)
    extraction = extract_answers(reply)
    verdict = _judge(extraction.candidates, gold, config)
    components = {
        "correctness": 1.0 if verdict.correct else 0.0,
        "format": extraction.format_score,
        "language": language_score(strip_tags(reply), config.language),
    }
    label = verdict.label
    if label is None and components["format"] < 1.0:
        label = "format_error"
    elif label is None and components["language"] < 1.0:
        label = "language_mismatch"
    return _grade(components, label, verdict, extraction.where, gold, config)


def _grade(
    components: dict[str, float],
    label: str | None,
    verdict: _Verdict | None,
    where: str,
    gold: str,
    config: MathGraderConfig,
) -> Grade:
    extracted = None if verdict is None else verdict.extracted
    details: dict[str, Any] = {
        "extracted": None if extracted is None else extracted[:200],
        "answer_key": None if verdict is None else verdict.key,
        "equation": None if verdict is None else verdict.equation,
        "where": where,
        "gold": gold,
    }
    return Grade.weighted(
        GRADER, components=components, label=label, details=details, weights=config.weights, required=config.required
    )


def _judge(candidates: tuple[str, ...], gold: str, config: MathGraderConfig) -> _Verdict:
    if not candidates:
        return _Verdict(False, "no_answer", None)
    gold_parsed = parse_number(gold)
    values: list[Fraction] = []
    symbolic: list[str] = []
    holds: list[bool] = []
    for candidate in candidates:
        parsed, chain_holds = _read(candidate)
        if chain_holds is not None:
            holds.append(chain_holds)
        if isinstance(parsed, ParsedNumber):
            values.append(parsed.value)
            continue
        if parsed.reason == "not_numeric" and config.symbolic and _single_expression(candidate):
            symbolic.append(strip_decoration(candidate))
            continue
        return _Verdict(False, _REASON_LABEL[parsed.reason], candidate)
    shown = candidates[0]
    mixed = bool(values) and bool(symbolic)
    if len(set(values)) > 1 or len(set(symbolic)) > 1 or (mixed and not _all_equal_symbolic(values, symbolic)):
        return _Verdict(False, "ambiguous_answer", shown)
    if values and isinstance(gold_parsed, ParsedNumber):
        ok: bool | None = values[0] == gold_parsed.value
    else:
        ok = _symbolic_equal(gold, symbolic[0] if symbolic else str(values[0]))
    if ok is None:
        return _Verdict(False, "unparseable_answer", shown)
    key = str(values[0]) if values else symbolic[0][:200]
    equation = None if not holds else "holds" if all(holds) else "false"
    return _Verdict(ok, None if ok else "wrong_answer", shown, key, equation)


def _read(candidate: str) -> tuple[ParsedNumber | NotANumber, bool | None]:
    """One candidate's value: a number, or else the value its equation chain states
    (``frostgym.graders.equations``), with whether that chain holds (``None``: no chain)."""
    parsed = parse_number(candidate)
    if isinstance(parsed, NotANumber) and parsed.reason in ("multiple_values", "not_numeric"):
        chain = read_chain(candidate)
        if isinstance(chain, Chain):
            return ParsedNumber(chain.value, candidate), chain.holds
        if chain is not None:
            return chain, None
    return parsed, None


def _single_expression(candidate: str) -> bool:
    s = strip_decoration(candidate)
    return 0 < len(s) <= _SYMBOLIC_MAX_CHARS and not _MULTI_VALUE.search(s) and not _PROSE.search(s)


def _all_equal_symbolic(values: list[Fraction], symbolic: list[str]) -> bool:
    return len(set(values)) == 1 and all(_symbolic_equal(str(values[0]), s) is True for s in symbolic)


def _symbolic_equal(gold: str, answer: str) -> bool | None:
    """math-verify on one expression each; ``None`` when the answer is not a single
    numeric expression at all. Its timeouts use SIGALRM, which only works on the main
    thread; elsewhere the length cap above bounds the work instead."""
    import math_verify  # deferred: sympy is slow to import and most answers are plain numbers
    import sympy

    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        gold_expr = math_verify.parse(f"${gold}$", parsing_timeout=timeout)
        answer_expr = math_verify.parse(f"${answer}$", parsing_timeout=timeout)
    except Exception:
        return None
    if len(answer_expr) != 2 or not isinstance(answer_expr[0], sympy.Expr) or not answer_expr[0].is_number:
        return None
    try:
        return bool(math_verify.verify(gold_expr, answer_expr, timeout_seconds=timeout))
    except Exception:
        return False
