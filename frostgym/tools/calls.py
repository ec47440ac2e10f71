"""Tool calls in an assistant reply: the one parser every tool-calling env uses.

A reply calls tools in one of three ways, all read into the same ``ToolCall`` list:

- **Hermes / Qwen tags**: ``<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>``,
  any number per reply (``"parameters"`` is accepted for ``"arguments"``, and arguments
  given as a JSON string are decoded).
- **Python call syntax** (BFCL's prompt format): the reply, or a fenced block in it, is
  ``f(a=1)``, ``[f(a=1), g(b="x")]`` or one call per line; dotted names (``math.hypot``)
  are allowed, arguments must be keywords with literal values.
- **A structured action**: ``{"content": "...", "tool_calls": [{"name": ..., "arguments":
  {...}}]}`` (the OpenAI ``{"function": {...}}`` wrapping is accepted too). Envs turn it
  into the equivalent tagged text (``structured_to_text``), so histories and graders see
  one form.

Reasoning (``<think>`` blocks) is never read for calls. A call that cannot be read is a
``CallProblem`` naming what is wrong, never dropped silently, and every readable call is
kept, however many there are: the env decides what to do with them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from frostgym.graders.extraction import outside_reasoning

Syntax = Literal["hermes", "python", "none"]

_TAG = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:python|py|tool_code)?[ \t]*\n(.*?)```", re.DOTALL)
#: Text that looks like an attempt at python call syntax (name, dots, open paren at the start).
_CALL_START = re.compile(r"^\s*\[?\s*[A-Za-z_][\w.]*\(")
MAX_CALL_TEXT = 100_000


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class CallProblem:
    """A call the reply attempted but that cannot be read: ``position`` among the
    attempted calls (0-based), ``message`` what is wrong, in words for the agent."""

    position: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "message": self.message}


@dataclass(frozen=True)
class ParsedReply:
    content: str  # the reply without reasoning and without its calls
    calls: tuple[ToolCall, ...]
    problems: tuple[CallProblem, ...]
    syntax: Syntax

    @property
    def attempted(self) -> int:
        return len(self.calls) + len(self.problems)


def parse_reply(text: str) -> ParsedReply:
    """All tool calls in ``text`` and everything wrong with the ones that cannot be read."""
    visible = outside_reasoning(text)
    if "<tool_call>" in visible:
        return _parse_hermes(visible)
    return _parse_python(visible)


# -- hermes ---------------------------------------------------------------------------


def _parse_hermes(text: str) -> ParsedReply:
    calls: list[ToolCall] = []
    problems: list[CallProblem] = []
    for position, match in enumerate(_TAG.finditer(text)):
        body, closing = match.group(1), match.group(2)
        if not closing:
            problems.append(CallProblem(position, "a <tool_call> block is not closed with </tool_call>"))
            continue
        call = _call_from_json(body.strip(), position)
        if isinstance(call, CallProblem):
            problems.append(call)
        else:
            calls.append(call)
    content = _TAG.sub("", text).strip()
    return ParsedReply(content, tuple(calls), tuple(problems), "hermes")


def _call_from_json(body: str, position: int) -> ToolCall | CallProblem:
    if len(body) > MAX_CALL_TEXT:
        return CallProblem(position, f"the call is over {MAX_CALL_TEXT} characters")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as error:
        return CallProblem(position, f"the call is not valid JSON ({error})")
    return call_from_mapping(data, position)


def call_from_mapping(data: Any, position: int = 0) -> ToolCall | CallProblem:
    """A call from ``{"name", "arguments"}`` data (or OpenAI's ``{"function": {...}}``)."""
    if isinstance(data, Mapping) and isinstance(data.get("function"), Mapping):
        data = data["function"]
    if not isinstance(data, Mapping):
        return CallProblem(position, f"a call must be a JSON object, got {type(data).__name__}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        return CallProblem(position, 'the call has no "name" string')
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as error:
            return CallProblem(position, f"the arguments of {name!r} are not valid JSON ({error})")
    if not isinstance(arguments, Mapping):
        return CallProblem(position, f"the arguments of {name!r} must be a JSON object")
    if not all(isinstance(key, str) for key in arguments):
        return CallProblem(position, f"the argument names of {name!r} must be strings")
    return ToolCall(name.strip(), dict(arguments))


# -- python syntax ----------------------------------------------------------------------


def _parse_python(text: str) -> ParsedReply:
    fenced = _FENCE.findall(text)
    candidates = [block for block in fenced if _CALL_START.match(block)] or [text]
    source = candidates[-1].strip()
    if not _CALL_START.match(source):
        return ParsedReply(text.strip(), (), (), "none")
    content = text.replace(candidates[-1], "").replace("```python", "").replace("```", "").strip()
    if len(source) > MAX_CALL_TEXT:
        return ParsedReply(content, (), (CallProblem(0, f"the calls are over {MAX_CALL_TEXT} characters"),), "python")
    try:
        nodes = _call_nodes(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        message = error.msg if isinstance(error, SyntaxError) else str(error)
        problem = CallProblem(0, f"the calls are not valid python call syntax ({message})")
        return ParsedReply(content, (), (problem,), "python")
    calls: list[ToolCall] = []
    problems: list[CallProblem] = []
    for position, node in enumerate(nodes):
        call = _call_from_node(node, position)
        if isinstance(call, CallProblem):
            problems.append(call)
        else:
            calls.append(call)
    return ParsedReply(content, tuple(calls), tuple(problems), "python")


def _call_nodes(source: str) -> list[ast.expr]:
    """The call expressions: one list/tuple of calls, or one call per line."""
    module = ast.parse(source, mode="exec")
    nodes: list[ast.expr] = []
    for statement in module.body:
        if not isinstance(statement, ast.Expr):
            raise ValueError(f"expected only calls, found a {type(statement).__name__} statement")
        value = statement.value
        nodes.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
    return nodes


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _call_from_node(node: ast.expr, position: int) -> ToolCall | CallProblem:
    if not isinstance(node, ast.Call):
        return CallProblem(position, f"expected a function call, found {ast.unparse(node)[:80]!r}")
    name = _dotted_name(node.func)
    if name is None:
        return CallProblem(position, f"{ast.unparse(node.func)[:80]!r} is not a function name")
    if node.args:
        return CallProblem(position, f"{name}: pass arguments by keyword (name=value), not by position")
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return CallProblem(position, f"{name}: **kwargs cannot be used in a tool call")
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            value = ast.unparse(keyword.value)[:80]
            return CallProblem(position, f"{name}: argument {keyword.arg!r} is not a literal value ({value})")
    return ToolCall(name, arguments)


# -- structured actions and canonical text ---------------------------------------------------


def render_calls(calls: tuple[ToolCall, ...] | list[ToolCall], content: str = "") -> str:
    """Canonical reply text for ``calls``: Hermes tags, one per line, after ``content``."""
    lines = [content.strip()] if content.strip() else []
    lines += [
        f"<tool_call>{json.dumps(call.to_dict(), ensure_ascii=False, sort_keys=True)}</tool_call>" for call in calls
    ]
    return "\n".join(lines)


def structured_to_text(action: Mapping[str, Any]) -> str:
    """The text form of a ``{"content", "tool_calls"}`` action. Entries that are not
    readable calls are kept as tagged raw JSON, so the parser reports them."""
    content = action.get("content")
    parts = [content.strip()] if isinstance(content, str) and content.strip() else []
    calls = action.get("tool_calls") or []
    if not isinstance(calls, list):
        calls = [calls]
    for position, entry in enumerate(calls):
        call = call_from_mapping(entry, position)
        if isinstance(call, ToolCall):
            parts.append(render_calls([call]))
        else:
            try:
                raw = json.dumps(entry, ensure_ascii=False, sort_keys=True, default=repr)
            except (TypeError, ValueError):
                raw = repr(entry)
            parts.append(f"<tool_call>{raw}</tool_call>")
    return "\n".join(parts)
