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


def message(role: Role, content: str) -> Message:
    return {"role": role, "content": content}


def copy_messages(messages: list[Message]) -> Observation:
    """A fresh list of fresh dicts: callers may mutate what an env returns."""
    return [dict(m) for m in messages]  # type: ignore[misc]
