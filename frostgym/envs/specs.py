"""Env specs: an env id with keyword arguments of its own, spelled ``ID[key=value,...]``.

Why: one run may play several envs, each at its own level or turn limit
(``frostgym/Arithmetic-v0[level=1],frostgym/SQL-v0[level=2,max_turns=3]``). Every command
that takes ``--env`` parses it here, so the spelling is the same everywhere, and a card
records the arguments per env (``env_options`` in its plan identity), so a resume, a replay
or a comparison treats another level as another plan.

A value is read as a JSON scalar (``1``, ``0.5``, ``true``, ``null``, ``"a b"``) where it is
one, else kept as the string written; values hold no ``,``, ``[`` or ``]``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from frostgym.core.errors import EnvSpecError


@dataclass(frozen=True)
class EnvSpec:
    """One env of a run: its registered id and the keyword arguments it is made with."""

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        if not self.kwargs:
            return self.env_id
        inner = ",".join(f"{key}={_spell(value)}" for key, value in self.kwargs.items())
        return f"{self.env_id}[{inner}]"


def _spell(value: Any) -> str:
    return value if isinstance(value, str) and _value(value) == value else json.dumps(value)


def parse_env_specs(text: str) -> list[EnvSpec]:
    """The specs of ``text``: env ids separated by commas, each optionally followed by
    ``[key=value,...]``. Raises ``EnvSpecError`` for an empty list, an unbalanced bracket,
    an argument without ``=`` or a key given twice. Ids are not checked here."""
    specs: list[EnvSpec] = []
    for part in _split_top_level(text):
        part = part.strip()
        if not part:
            continue
        if "[" not in part and "]" not in part:
            specs.append(EnvSpec(part))
            continue
        env_id, bracket, rest = part.partition("[")
        if not bracket or not rest.endswith("]") or "[" in rest[:-1] or "]" in rest[:-1] or not env_id.strip():
            raise EnvSpecError(f"env spec {part!r} is not ID or ID[key=value,...]")
        specs.append(EnvSpec(env_id.strip(), _arguments(part, rest[:-1])))
    if not specs:
        raise EnvSpecError(f"no env id in {text!r}")
    return specs


def parse_one_env_spec(text: str) -> EnvSpec:
    """The one spec of ``text``, for a command that takes one env. Raises ``EnvSpecError``
    as ``parse_env_specs`` does, and for more than one spec."""
    specs = parse_env_specs(text)
    if len(specs) != 1:
        raise EnvSpecError(f"--env takes one env here, got {len(specs)}: {text!r}")
    return specs[0]


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise EnvSpecError(f"unbalanced ']' in env specs {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise EnvSpecError(f"unbalanced '[' in env specs {text!r}")
    parts.append(text[start:])
    return parts


def _arguments(spec: str, inner: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for item in inner.split(","):
        if not item.strip():
            continue
        key, equals, raw = item.partition("=")
        key = key.strip()
        if not equals or not key.isidentifier():
            raise EnvSpecError(f"env spec {spec!r}: {item.strip()!r} is not key=value")
        if key in kwargs:
            raise EnvSpecError(f"env spec {spec!r} gives {key!r} twice")
        value = _value(raw.strip())
        if isinstance(value, float) and not math.isfinite(value):
            raise EnvSpecError(f"env spec {spec!r}: {key}={raw.strip()} is not a finite number")
        kwargs[key] = value
    return kwargs


def _value(raw: str) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if value is None or isinstance(value, str | int | float | bool) else raw


def env_options(specs: Sequence[EnvSpec]) -> dict[str, dict[str, Any]]:
    """The per-env arguments of ``specs`` as a card records them (``env_options``): only
    the envs that have some. Raises ``EnvSpecError`` for an id given twice."""
    seen: set[str] = set()
    for spec in specs:
        if spec.env_id in seen:
            raise EnvSpecError(f"{spec.env_id} is given twice; one run plays each env id once")
        seen.add(spec.env_id)
    return {spec.env_id: dict(spec.kwargs) for spec in specs if spec.kwargs}


def env_kwargs_for(
    env_id: str, env_kwargs: Mapping[str, Any], options: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """The keyword arguments ``env_id`` is made with: those of every env (``env_kwargs``),
    then its own (``options[env_id]``), which win."""
    return {**env_kwargs, **options.get(env_id, {})}
