"""Tool calls as actions: the schema an env offers and the one call it accepts per turn.

Envs that take tool calls turn them into the equivalent tagged text, so the history and
the grader see one form; this module is the one place that reads and checks the call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from frostgym.core.errors import InvalidActionError


def function_tools(argument: str, argument_description: str, tools: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """OpenAI-style function schemas for tools that each take one string ``argument``."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {argument: {"type": "string", "description": argument_description}},
                    "required": [argument],
                },
            },
        }
        for name, description in tools
    ]


def single_tool_call(
    action: Mapping[str, Any], env_name: str, offered: Sequence[str], argument: str
) -> tuple[str, str]:
    """``(name, argument value)`` of the one call in ``action["tool_calls"]``.

    ``InvalidActionError`` for anything else: several calls, an unknown tool, arguments
    that are not a JSON object, or a missing or non-string ``argument``.
    """
    calls = action["tool_calls"]
    if not isinstance(calls, list) or len(calls) != 1:
        count = len(calls) if isinstance(calls, list) else "no list of"
        raise InvalidActionError(f"{env_name} takes exactly one tool call per turn, got {count} calls")
    call = calls[0]
    name = call.get("name") if isinstance(call, dict) else None
    arguments = call.get("arguments") if isinstance(call, dict) else None
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise InvalidActionError(f"tool call arguments are not valid JSON: {error}") from error
    if name not in offered or not isinstance(arguments, dict):
        listing = " and ".join(f"{tool}({argument})" for tool in offered)
        raise InvalidActionError(f"unknown tool call {name!r}: {env_name} offers {listing}")
    value = arguments.get(argument)
    if not isinstance(value, str):
        raise InvalidActionError(f"{name} needs a {argument!r} string argument")
    return str(name), value
