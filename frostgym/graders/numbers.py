"""Turning one answer string into one exact number, or saying precisely why not.

Only ASCII digits count: Python's ``float`` and ``re``'s ``\\d`` accept any Unicode
decimal digit, which lets look-alike digits slip through graders built on them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

MAX_NUMBER_CHARS = 64

_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d{1,3})?|[-+]?\.\d+"
_PLAIN = re.compile(rf"(?:{_NUMBER})", re.ASCII)
_FRACTION = re.compile(r"([-+]?)(\d+)\s*/\s*(\d+)", re.ASCII)
_MIXED = re.compile(r"([-+]?)(\d+)\s+(\d+)\s*/\s*(\d+)", re.ASCII)
_LATEX_FRAC = re.compile(r"([-+]?)\\[dt]?frac\s*\{\s*([-+]?\d+)\s*\}\s*\{\s*(\d+)\s*\}", re.ASCII)
_LATEX_FRAC_SHORT = re.compile(r"([-+]?)\\[dt]?frac(\d)(\d)", re.ASCII)
_ANY_DIGIT = re.compile(r"\d", re.ASCII)
_ASCII_NUMBER_TOKEN = re.compile(r"\d+(?:\.\d+)?", re.ASCII)

_CURRENCY = "$€£¥₹"
_WRAPPERS = (("$$", "$$"), ("\\(", "\\)"), ("\\[", "\\]"), ("$", "$"))
_LEADING_LABEL = re.compile(
    r"^(?:(?:the\s+)?(?:final\s+)?answer\s*(?:is|:|=)?|[a-z]\s*=|result\s*(?:is|:|=)|total\s*(?:is|:|=))\s*",
    re.IGNORECASE | re.ASCII,
)
_TEXT_MACRO = re.compile(r"\\(?:text|mathrm|textbf|mbox|operatorname)\s*\{([^{}]*)\}")
_UNIT_TAIL = re.compile(r"^(.*?\d)\s*(?:[%°]|\s[A-Za-z][A-Za-z .'/-]*)\s*$", re.ASCII)
#: A number spelled out ("seven", "twenty", "half"): text holding one names a value, so
#: words that lead into an answer must not hold one ("seven, or 5 + 3 = 8").
NUMBER_WORD = re.compile(
    r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
    r"|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred"
    r"|thousand|million|billion|dozen|half|twice|double|triple)s?\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ParsedNumber:
    value: Fraction
    text: str


@dataclass(frozen=True)
class NotANumber:
    """Why a string is not a single number: ``empty``, ``non_ascii_digits``,
    ``too_long``, ``multiple_values`` or ``not_numeric``."""

    reason: str


def has_non_ascii_digits(text: str) -> bool:
    """True if ``text`` holds a digit character other than 0-9 (Arabic-Indic, fullwidth,
    mathematical bold, superscripts, ...)."""
    if text.isascii():
        return False
    return any(not ch.isascii() and unicodedata.category(ch) in ("Nd", "No") for ch in text)


def strip_decoration(text: str) -> str:
    """Remove what surrounds a number without changing it: math delimiters, \\boxed,
    currency, a leading "answer is" or "x =", \\text units, a trailing period."""
    s = text.strip()
    for _ in range(4):  # wrappers can nest: $\boxed{18}$
        before = s
        for left, right in _WRAPPERS:
            if len(s) > len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : -len(right)].strip()
        if s.startswith(("\\boxed{", "\\fbox{")) and s.endswith("}"):
            s = s[s.index("{") + 1 : -1].strip()
        s = _LEADING_LABEL.sub("", s).strip()
        s = s.rstrip(".").strip()
        if s == before:
            break
    s = _TEXT_MACRO.sub(lambda m: " " + m.group(1), s).strip()
    s = s.replace("\\!", "").replace("\\,", "").replace("{,}", ",").replace("\\%", "%")
    s = s.lstrip(_CURRENCY).strip()
    if s.startswith(("-", "+")) and len(s) > 1 and s[1] in _CURRENCY:
        s = s[0] + s[2:].strip()
    unit = _UNIT_TAIL.match(s)
    if unit:
        s = unit.group(1)
    return s.strip()


def parse_number(text: str) -> ParsedNumber | NotANumber:
    """Exactly one number in ``text`` (integer, decimal, thousands-grouped, fraction,
    mixed number, \\frac) after decoration is stripped; anything else is ``NotANumber``."""
    if has_non_ascii_digits(text):
        return NotANumber("non_ascii_digits")
    s = strip_decoration(text)
    if not s:
        return NotANumber("empty")
    if len(s) > MAX_NUMBER_CHARS:  # a long text naming several numbers is a list, not a long number
        return NotANumber("multiple_values" if _several_numbers(s) else "too_long")
    if _PLAIN.fullmatch(s):
        return ParsedNumber(Fraction(s.replace(",", "")), s)
    for pattern in (_LATEX_FRAC, _LATEX_FRAC_SHORT, _FRACTION):
        m = pattern.fullmatch(s)
        if m:
            sign, num, den = m.groups()
            if int(den) == 0:
                return NotANumber("not_numeric")
            value = Fraction(int(num), int(den))
            return ParsedNumber(-value if sign == "-" else value, s)
    m = _MIXED.fullmatch(s)
    if m:
        sign, whole, num, den = m.groups()
        if int(den) == 0:
            return NotANumber("not_numeric")
        value = int(whole) + Fraction(int(num), int(den))
        return ParsedNumber(-value if sign == "-" else value, s)
    if _several_numbers(s):
        return NotANumber("multiple_values")
    if not _ANY_DIGIT.search(s) and "\\" not in s:
        return NotANumber("empty")
    return NotANumber("not_numeric")


def _several_numbers(s: str) -> bool:
    return not s.startswith("\\") and len(_ASCII_NUMBER_TOKEN.findall(s)) > 1
