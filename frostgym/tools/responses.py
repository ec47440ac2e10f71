"""How tool results go back to the agent: one ``<tool_response>`` block per result, in one
user message. One renderer for every tool env, so every env's results read alike and a
change to the format is made once (it changes observations: bump the envs' versions)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

ToolResponse = str | Mapping[str, Any]


def result_content(text: str) -> Any:
    """A tool result's text as a block shows it: the JSON it holds when it is a JSON object
    or array (so the block is one line of JSON, not JSON quoted in a string), else the text."""
    if text[:1] not in ("{", "["):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def tool_response(content: ToolResponse) -> str:
    """One block: a mapping as one line of JSON (non-ASCII kept as it is), text as it is."""
    body = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return f"<tool_response>\n{body}\n</tool_response>"


def tool_responses(contents: Sequence[ToolResponse], note: str) -> str:
    """The message that answers one reply's calls: a block per result, in call order, then
    ``note`` (what the agent has left, say) in parentheses on the last line."""
    return "\n".join(tool_response(content) for content in contents) + f"\n({note})"
