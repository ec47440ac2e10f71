"""Tools an env offers: their OpenAI-style schemas, and the one call per turn it accepts.

For envs whose tools each take one string argument (SQL's ``run_sql``/``submit_sql``,
Code's ``run_tests``/``submit``). Envs that take tool calls turn them into the equivalent
tagged text, so the history and the grader see one form. The call itself is read by
``frostgym.tools.calls``; this module checks that it is the one call, to an offered tool,
that the env accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frostgym.core.errors import InvalidActionError
from frostgym.tools.calls import CallProblem, call_from_mapping


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

    The call itself is read by ``call_from_mapping``, as in every tool env (so OpenAI's
    ``{"function": {...}}`` wrapping works here too). ``InvalidActionError`` for anything
    else: several calls, an unreadable call, an unknown tool, or a missing or non-string
    ``argument``.
    """
    calls = action["tool_calls"]
    if not isinstance(calls, list) or len(calls) != 1:
        count = len(calls) if isinstance(calls, list) else "no list of"
        raise InvalidActionError(f"{env_name} takes exactly one tool call per turn, got {count} calls")
    call = call_from_mapping(calls[0])
    if isinstance(call, CallProblem):
        raise InvalidActionError(f"{env_name}: {call.message}")
    if call.name not in offered:
        listing = " and ".join(f"{tool}({argument})" for tool in offered)
        raise InvalidActionError(f"unknown tool call {call.name!r}: {env_name} offers {listing}")
    value = call.arguments.get(argument)
    if not isinstance(value, str):
        raise InvalidActionError(f"{call.name} needs a {argument!r} string argument")
    return call.name, value
