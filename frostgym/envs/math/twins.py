"""What a math twin keeps of its original's answer besides its structure: its sign.

Why: a twin re-draws its original's values, and with them, by chance, what makes an answer
hard apart from the structure: ``2 - 9`` has a negative answer and ``7 - 2`` does not, and a
small model fails the first kind far more often. A gap between originals and twins should
measure memorisation, not such draws, so the arithmetic, fraction and equation twins keep
the sign of their original's answer (negative, or not). Whether it is whole is not kept: at
the hardest levels too few draws give a whole answer to find one in reasonable time.
"""

from __future__ import annotations

from fractions import Fraction


def check_sign(answer: str, original: str) -> None:
    """Raise ``ValueError`` (a twin draw rejected) unless ``answer`` (an integer or ``p/q``,
    as these generators write it) is negative exactly when ``original`` is."""
    if (Fraction(answer) < 0) != (Fraction(original) < 0):
        raise ValueError(f"answer {answer} has not the sign of {original}")
