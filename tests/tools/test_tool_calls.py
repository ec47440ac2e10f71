"""The shared tool-call parser: every documented syntax, and every malformed call named;
and the other shared pieces of every tool env: call arguments as JSON data, the one
schema builder, the one ``<tool_response>`` renderer."""

from __future__ import annotations

from typing import Any

import pytest

from frostgym.tools.bfcl_multi_turn import function_docs, tools_for
from frostgym.tools.calls import ToolCall, as_json_data, parse_reply, render_calls, structured_to_text
from frostgym.tools.responses import tool_responses
from frostgym.tools.schemas import bfcl_tool, function_tool, function_tools


def test_hermes_blocks_several_per_reply_and_reasoning_ignored() -> None:
    reply = (
        '<think><tool_call>{"name": "leak", "arguments": {}}</tool_call></think>Checking both.\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "parameters": "{\\"city\\": \\"Rome\\"}"}</tool_call>'
    )
    parsed = parse_reply(reply)
    assert parsed.syntax == "hermes" and parsed.problems == ()
    assert parsed.calls == (ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Rome"}))
    assert parsed.content == "Checking both."


def test_python_call_syntax_lists_lines_fences_and_dotted_names() -> None:
    assert parse_reply("[math.hypot(x=4, y=5), f(a=[1, {'b': None}])]").calls == (
        ToolCall("math.hypot", {"x": 4, "y": 5}),
        ToolCall("f", {"a": [1, {"b": None}]}),
    )
    fenced = parse_reply('Here:\n```python\nf(a=1)\ng(b="x")\n```')
    assert fenced.calls == (ToolCall("f", {"a": 1}), ToolCall("g", {"b": "x"})) and fenced.content == "Here:"


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("f(1)", "by keyword"),
        ("f(a=x)", "not a literal"),
        ("f(a=1", "not valid python call syntax"),
        ("f(**kw)", "**kwargs"),
        ("f(a=1)\nx = 2", "expected only calls"),
        ("[f(a=1), 3]", "expected a function call"),
        ("<tool_call>{bad</tool_call>", "not valid JSON"),
        ('<tool_call>{"name": "f"}', "not closed"),
        ('<tool_call>{"arguments": {}}</tool_call>', '"name"'),
        ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ('<tool_call>["f"]</tool_call>', "must be a JSON object"),
    ],
)
def test_malformed_calls_are_named_never_dropped(reply: str, problem: str) -> None:
    parsed = parse_reply(reply)
    assert len(parsed.problems) >= 1 and problem in parsed.problems[0].message, parsed


def test_a_good_call_beside_a_bad_one_keeps_both() -> None:
    parsed = parse_reply('<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{oops</tool_call>')
    assert parsed.calls == (ToolCall("f", {}),) and [p.position for p in parsed.problems] == [1]
    assert parsed.attempted == 2


def test_prose_is_not_a_call() -> None:
    for text in ("The answer is 5.", "Paris (France) is the capital.", ""):
        parsed = parse_reply(text)
        assert parsed.calls == () and parsed.problems == () and parsed.syntax == "none"


def test_structured_actions_become_the_same_text() -> None:
    action = {
        "content": "two calls",
        "tool_calls": [
            {"name": "f", "arguments": '{"a": 1}'},
            {"type": "function", "function": {"name": "g", "arguments": {"b": 2}}},
            {"arguments": {}},
        ],
    }
    parsed = parse_reply(structured_to_text(action))
    assert parsed.calls == (ToolCall("f", {"a": 1}), ToolCall("g", {"b": 2}))
    assert len(parsed.problems) == 1 and parsed.content == "two calls"
    calls = (ToolCall("f", {"a": 1}),)
    assert parse_reply(render_calls(calls, "ok")).calls == calls


def test_python_literals_are_recorded_as_json_data() -> None:
    (call,) = parse_reply("f(a=(1, {2}), b=1e999, c={1: b'x'}, d=1j, e=[None, True, 'é'])").calls
    data = as_json_data(call.arguments)
    assert data == {"a": [1, [2]], "b": "inf", "c": {"1": "b'x'"}, "d": "1j", "e": [None, True, "é"]}
    assert as_json_data(data) == data  # JSON data comes back equal


def test_one_builder_wraps_every_schema() -> None:
    assert function_tool("f", "does f", {"type": "object"}) == {
        "type": "function",
        "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}},
    }
    (run_sql,) = function_tools("sql", "The query.", [("run_sql", "Run it.")])
    assert run_sql["function"]["parameters"] == {
        "type": "object",
        "properties": {"sql": {"type": "string", "description": "The query."}},
        "required": ["sql"],
    }


def test_bfcl_docs_become_json_schema_in_either_language() -> None:
    doc: dict[str, Any] = {
        "name": "Maps.put",
        "description": "Put.",
        "parameters": {
            "type": "dict",
            "properties": {
                "map": {"type": "HashMap", "description": "The map."},
                "keys": {"type": "ArrayList", "items": {"type": "String"}},
                "odd": {"type": "Weird"},
            },
            "required": ["map"],
        },
        "response": {"type": "dict"},
    }
    tool = bfcl_tool(doc, "java")
    parameters = tool["function"]["parameters"]
    assert tool["function"]["name"] == "Maps.put" and "response" not in tool["function"]
    assert parameters["type"] == "object" and parameters["required"] == ["map"]
    assert parameters["properties"]["map"] == {"type": "object", "description": "The map. (Java 8 SDK type HashMap)"}
    assert parameters["properties"]["keys"]["items"] == {"type": "string"}
    assert parameters["properties"]["odd"]["type"] == "string"  # an unknown type name reads as a string
    assert doc["parameters"]["properties"]["map"]["type"] == "HashMap"  # the doc is not changed
    python = bfcl_tool(doc)["function"]["parameters"]["properties"]["map"]
    assert python == {"type": "object", "description": "The map."}
    docs = function_docs("MathAPI")  # multi-turn docs take the same builder
    assert tools_for([str(docs[0]["name"])]) == [bfcl_tool(docs[0])]


def test_one_renderer_answers_every_call() -> None:
    text = tool_responses([{"name": "f", "content": "é"}, "Error: call 2: not JSON"], "1 turn(s) left")
    assert text == (
        '<tool_response>\n{"name": "f", "content": "é"}\n</tool_response>\n'
        "<tool_response>\nError: call 2: not JSON\n</tool_response>\n(1 turn(s) left)"
    )
