"""JSON from outside, read with every number finite.

Why: Python's reader takes ``NaN``, ``Infinity`` and ``-Infinity`` (not standard JSON), and
reads a literal too large for a double, such as ``1e999``, as infinity; a deadline, a limit or
a tool call's argument read that way passes every ``> 0`` check. The server's requests and the
command line's JSON options are read here, so each refuses all of them the same way.
"""

from __future__ import annotations

import json
import math
from typing import Any

from frostgym.core.errors import NonFiniteNumberError


def loads_finite(raw: str | bytes) -> Any:
    """The JSON value of ``raw``. Raises ``NonFiniteNumberError`` (a ``ValueError``) for a
    number that is not finite, and what ``json.loads`` raises for text that is not JSON."""
    return json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)


def _refuse_constant(name: str) -> Any:
    raise NonFiniteNumberError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteNumberError(f"{text[:40]} is not a finite number")
    return value
