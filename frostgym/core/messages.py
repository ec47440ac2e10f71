"""Chat messages: the observation format, OpenAI style, so chat templates apply as is."""

from __future__ import annotations

import re
from typing import Any, Literal, NotRequired, TypedDict

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


class Message(TypedDict):
    role: Role
    content: str
    name: NotRequired[str]
    tool_calls: NotRequired[list[dict[str, Any]]]
    tool_call_id: NotRequired[str]


Observation = list[Message]
#: An action is the assistant's reply as text; tool-calling families also accept a
#: structured ``{"content": ..., "tool_calls": [...]}`` dict.
Action = str | dict[str, Any]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: How deep ``clean_data`` looks; anything deeper is kept as it is. What an env returns never
#: nests that deep (tool-call arguments stop at 32 levels), and orjson, which writes the
#: records, refuses data past 254 levels whatever its strings hold.
CLEAN_DEPTH = 64


def clean_text(value: str | bytes) -> tuple[str, bool]:
    """Text that always encodes to UTF-8, and whether anything had to be replaced.

    Lone surrogates (which ``str`` allows but UTF-8 does not) and undecodable bytes
    become U+FFFD, so a degenerate generation cannot make a record unwritable.
    """
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8"), False
        except UnicodeDecodeError:
            return value.decode("utf-8", errors="replace"), True
    if value.isascii():
        return value, False
    cleaned, count = _LONE_SURROGATE.subn("\ufffd", value)
    return cleaned, count > 0


def clean_data(value: Any) -> tuple[Any, bool]:
    """``value`` with every string in it, dict keys included, made UTF-8-clean by
    ``clean_text``'s rule, and whether anything had to be replaced.

    Strings in dicts, lists and tuples are cleaned; containers are copied only where
    something changed, so clean data comes back as the very same object. A container met
    twice (shared, or part of a cycle) is cleaned once, and the walk stops at
    ``CLEAN_DEPTH`` levels, so it ends on any value, at a cost linear in its size.
    """
    cleaned = _clean(value, 0, {})
    return cleaned, cleaned is not value


def _clean(value: Any, depth: int, memo: dict[int, Any]) -> Any:
    if isinstance(value, str):
        if value.isascii():
            return value
        cleaned, changed = clean_text(value)
        return cleaned if changed else value
    if depth >= CLEAN_DEPTH or not isinstance(value, (dict, list, tuple)):
        return value
    key = id(value)
    if key in memo:  # seen: its clean copy, or (a cycle back to it) the container itself
        return memo[key]
    memo[key] = value
    result: Any
    if isinstance(value, dict):
        pairs = [(_clean(k, depth + 1, memo), _clean(v, depth + 1, memo)) for k, v in value.items()]
        same = all(a is k and b is v for (a, b), (k, v) in zip(pairs, value.items(), strict=True))
        result = value if same else dict(pairs)
    else:
        items = [_clean(item, depth + 1, memo) for item in value]
        same = all(a is b for a, b in zip(items, value, strict=True))
        result = value if same else (items if isinstance(value, list) else tuple(items))
    memo[key] = result
    return result


def message(role: Role, content: str) -> Message:
    return {"role": role, "content": content}


def copy_messages(messages: list[Message]) -> Observation:
    """A fresh list of fresh dicts: callers may mutate what an env returns."""
    return [dict(m) for m in messages]  # type: ignore[misc]
