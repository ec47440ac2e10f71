"""Checking tool-call arguments against a tool's JSON schema before any request is made.

Only the schema subset the HTTP tools use: an object of string / integer / number
properties with ``enum``, ``minimum``/``maximum``, ``required`` and no extra keys. The
result is the canonical argument dict (defaults filled in, integral floats as ints), so
two spellings of one call build the same request and compare equal in grading.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from frostgym.core.errors import ArgumentError

_TYPES = {"string": (str,), "integer": (int,), "number": (int, float)}


def canonical_value(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments with defaults filled in, or ``ArgumentError`` naming what is wrong."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = sorted(set(arguments) - set(properties))
    if extra:
        raise ArgumentError(f"unexpected argument(s) {', '.join(map(repr, extra))}; allowed: {sorted(properties)}")
    missing = [name for name in schema.get("required", ()) if name not in arguments]
    if missing:
        raise ArgumentError(f"missing required argument(s) {', '.join(map(repr, missing))}")
    out: dict[str, Any] = {}
    for name, spec in properties.items():
        if name not in arguments:
            if "default" in spec:
                out[name] = spec["default"]
            continue
        out[name] = _check_value(name, spec, arguments[name])
    return out


def _check_value(name: str, spec: Mapping[str, Any], value: Any) -> Any:
    kind = spec["type"]
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type: 3.0 is a fine integer
    if isinstance(value, bool) or not isinstance(value, _TYPES[kind]):
        raise ArgumentError(f"argument {name!r} must be of type {kind}, got {type(value).__name__}")
    if kind == "integer" or kind == "number":
        if value != value or value in (float("inf"), float("-inf")):
            raise ArgumentError(f"argument {name!r} must be a finite number")
        if "minimum" in spec and value < spec["minimum"]:
            raise ArgumentError(f"argument {name!r} must be >= {spec['minimum']}, got {value}")
        if "maximum" in spec and value > spec["maximum"]:
            raise ArgumentError(f"argument {name!r} must be <= {spec['maximum']}, got {value}")
    if isinstance(value, str) and len(value) > 200:
        raise ArgumentError(f"argument {name!r} is longer than 200 characters")
    if isinstance(value, str) and not _encodable(value):
        raise ArgumentError(f"argument {name!r} is not valid text (lone surrogate)")
    if "enum" in spec and value not in spec["enum"]:
        raise ArgumentError(f"argument {name!r} must be one of {spec['enum']}, got {value!r}")
    return canonical_value(value)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One string per call, the same for every spelling of it (key order, 3.0 vs 3)."""
    args = {k: canonical_value(v) for k, v in arguments.items()}
    return json.dumps([name, args], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
