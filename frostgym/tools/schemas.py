"""Tools an env offers: the one builder of their OpenAI-style schemas, and the one call
per turn that the single-call envs accept.

Every schema an agent is offered is built here (``function_tool``): the one-string-argument
tools of SQL and Code (``function_tools``), BFCL's function docs, single- and multi-turn
(``bfcl_tool``: BFCL's type names become JSON Schema's), and the HTTP tools.

For envs whose tools each take one string argument (SQL's ``run_sql``/``submit_sql``,
Code's ``run_tests``/``submit``), envs that take tool calls turn them into the equivalent
tagged text, so the history and the grader see one form. The call itself is read by
``frostgym.tools.calls``; ``single_tool_call`` checks that it is the one call, to an
offered tool, that the env accepts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from frostgym.core.errors import InvalidActionError
from frostgym.tools.calls import CallProblem, call_from_mapping

#: BFCL's language names as its prompts spell them (``bfcl_tool`` notes them in descriptions).
LANGUAGE_NAMES: Mapping[str, str] = MappingProxyType(
    {"python": "Python 3", "java": "Java 8 SDK", "javascript": "JavaScript"}
)
#: BFCL's type names as JSON Schema types (after bfcl_eval's GORILLA_TO_OPENAPI table);
#: a name not here becomes ``string``.
JSON_SCHEMA_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "dict": "object",
        "object": "object",
        "HashMap": "object",
        "Hashtable": "object",
        "float": "number",
        "double": "number",
        "number": "number",
        "integer": "integer",
        "byte": "integer",
        "short": "integer",
        "long": "integer",
        "Bigint": "integer",
        "string": "string",
        "String": "string",
        "char": "string",
        "any": "string",
        "Any": "string",
        "boolean": "boolean",
        "Boolean": "boolean",
        "bool": "boolean",
        "array": "array",
        "Array": "array",
        "ArrayList": "array",
        "tuple": "array",
        "list": "array",
        "Queue": "array",
        "Stack": "array",
    }
)


def function_tool(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """One OpenAI function tool, ``{"type": "function", "function": {"name", "description",
    "parameters"}}``: the wrapping every offered schema has. ``parameters`` (a JSON Schema
    object) is taken as it is, not copied."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def function_tools(argument: str, argument_description: str, tools: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Function tools that each take one string ``argument``, from ``(name, description)`` pairs."""
    return [
        function_tool(
            name,
            description,
            {
                "type": "object",
                "properties": {argument: {"type": "string", "description": argument_description}},
                "required": [argument],
            },
        )
        for name, description in tools
    ]


def json_schema(node: Any) -> Any:
    """A BFCL parameter schema as JSON Schema: a copy with every type name renamed
    (``JSON_SCHEMA_TYPES``), in nested ``properties``, ``items`` and ``additionalProperties`` too."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            out[key] = JSON_SCHEMA_TYPES.get(value, "string")
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: json_schema(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = json_schema(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def bfcl_tool(function: Mapping[str, Any], language: str = "python") -> dict[str, Any]:
    """A BFCL function doc (single- or multi-turn) as a function tool: the parameters as
    JSON Schema (``json_schema``; an ``object`` at the top), any response spec dropped.
    Names keep their dots. Java and JavaScript docs (``language``, a key of
    ``LANGUAGE_NAMES``) say their declared type in each parameter's description, as
    BFCL's prompts do. Raises ``KeyError`` for a doc without a ``name``."""
    parameters = json_schema(function.get("parameters", {}))
    parameters["type"] = "object"
    if language != "python":
        for name, prop in parameters.get("properties", {}).items():
            declared = function["parameters"]["properties"][name].get("type", "any")
            prop["description"] = f"{prop.get('description', '')} ({LANGUAGE_NAMES[language]} type {declared})".strip()
    return function_tool(function["name"], function.get("description", ""), parameters)


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
