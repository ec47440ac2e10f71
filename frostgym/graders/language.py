"""Language consistency: is the reply written in the task's language (script)?

Models trained with RL drift into mixing scripts mid-reasoning; this component makes
that visible and cheap to penalise. It measures script, not vocabulary.
"""

from __future__ import annotations

#: Code points of the Latin script blocks (Basic Latin through Latin Extended-B, and
#: Latin Extended Additional).
_LATIN_RANGES = ((0x0000, 0x024F), (0x1E00, 0x1EFF))
THRESHOLD = 0.95


def _is_latin(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _LATIN_RANGES)


def latin_letter_share(text: str) -> float:
    """Share of letters that are Latin; 1.0 for text without letters."""
    if text.isascii():
        return 1.0
    letters = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            latin += _is_latin(ch)
    return 1.0 if letters == 0 else latin / letters


def language_score(text: str, language: str = "en") -> float:
    """1.0 when at least 95% of letters are in the language's script, else the share."""
    if language != "en":
        raise ValueError(f"no script rule for language {language!r}")
    share = latin_letter_share(text)
    return 1.0 if share >= THRESHOLD else round(share, 6)
