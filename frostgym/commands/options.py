"""Option types every command shares: numbers from the command line are finite.

Why: click's ``FloatRange`` compares a value with its bounds, and every comparison with
NaN is false, so ``--step-timeout nan`` or ``--temperature nan`` passed a ``min=`` bound and
reached a deadline or a sampler. Every float option of every command takes
``parser=finite_float(...)`` instead (a test sweeps them all), so NaN and infinities are
refused at the door, exit code 2, naming the option.
"""

from __future__ import annotations

import math


class FiniteFloat:
    """Reads an option's text as a finite float within ``[min, max]`` (None: unbounded). A
    typer ``parser``: the ``ValueError`` it raises otherwise is click's usage error (exit 2)."""

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        self.min = min
        self.max = max
        self.__name__ = "FLOAT"  # the metavar typer shows in help

    def __call__(self, text: str | float) -> float:
        try:
            number = float(text)
        except (TypeError, ValueError):
            raise ValueError(f"{text!r} is not a number.") from None
        if not math.isfinite(number):
            raise ValueError(f"{text!r} is not a finite number.")
        if self.min is not None and number < self.min:
            raise ValueError(f"{text!r} is below the minimum of {self.min:g}.")
        if self.max is not None and number > self.max:
            raise ValueError(f"{text!r} is above the maximum of {self.max:g}.")
        return number


def finite_float(min: float | None = None, max: float | None = None) -> FiniteFloat:
    """The parser of a float option within ``[min, max]`` (None: unbounded)."""
    return FiniteFloat(min=min, max=max)
