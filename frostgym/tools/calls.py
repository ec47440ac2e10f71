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
``CallProblem`` naming what is wrong, never dropped silently, and every readable call up to
``MAX_CALLS_PER_REPLY`` is kept: the env decides what to do with them.

Bounds, the same for all three syntaxes and all in this module, so that graders, tool
worlds and records never see more (a reply is untrusted model output):

- a reply over ``MAX_CALL_TEXT`` characters is not read at all (``ParsedReply.too_long``,
  found in constant time): envs grade it ``too_long``. A structured action is bounded by
  its text form, whose rendering stops once past the bound;
- at most ``MAX_CALLS_PER_REPLY`` calls are read from one reply; the rest are one
  ``CallProblem`` that counts them, so no reply makes more tool responses than that;
- a function name has at most ``MAX_NAME_CHARS`` characters;
- an argument value nests at most ``MAX_ARGUMENT_DEPTH`` levels of containers, holds at
  most ``MAX_CALL_TEXT`` values, and its integers are in the signed 64-bit range (what JSON
  records carry). Past a bound it is a ``CallProblem``, in every syntax;
- values are JSON data (objects with string keys, lists, strings, finite numbers, booleans,
  null) in the JSON syntaxes; NaN and Infinity, which Python's ``json`` reads, are a
  ``CallProblem``. Python call syntax also takes the other python literals (tuples, sets,
  bytes, complex numbers, non-finite floats, non-string keys), as BFCL does; envs record
  them as plain data. A structured action holding what no JSON text can (a cycle, bytes, a
  set, a non-string key, any other object) raises ``InvalidActionError``: no policy that
  decodes JSON emits it.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any, Literal

from frostgym.core.errors import InvalidActionError
from frostgym.core.tags import outside_reasoning

Syntax = Literal["hermes", "python", "none"]

_TAG = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:python|py|tool_code)?[ \t]*\n(.*?)```", re.DOTALL)
#: Text that looks like an attempt at python call syntax (name, dots, open paren at the start).
_CALL_START = re.compile(r"^\s*\[?\s*[A-Za-z_][\w.]*\(")
#: A reply longer than this many characters is not read for calls (``too_long``); so every
#: call in it is shorter too. The SQL grader reads replies up to the same length.
MAX_CALL_TEXT = 100_000
#: At most this many calls are read from one reply (BFCL's longest gold turn has 34).
MAX_CALLS_PER_REPLY = 64
#: One argument value nests at most this many lists/objects (BFCL's gold needs 5; orjson,
#: which writes the records holding the calls, stops at 254 levels for a whole record).
MAX_ARGUMENT_DEPTH = 32
#: A function name has at most this many characters (OpenAI's API allows 64).
MAX_NAME_CHARS = 256
#: Integers in arguments are signed 64-bit, what JSON records (orjson) carry.
_INT_RANGE = range(-(2**63), 2**63)


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
    #: The reply is over ``MAX_CALL_TEXT`` characters and was not read (no calls, no problems).
    too_long: bool = False
    #: Calls past ``MAX_CALLS_PER_REPLY`` that were not read (one of ``problems`` names them).
    unread: int = 0

    @property
    def attempted(self) -> int:
        return len(self.calls) + len(self.problems)

    @property
    def written(self) -> int:
        """How many calls the reply wrote, read or not."""
        return self.attempted + self.unread - 1 if self.unread else self.attempted


def parse_reply(text: str) -> ParsedReply:
    """All tool calls in ``text`` and everything wrong with the ones that cannot be read.
    A reply over ``MAX_CALL_TEXT`` characters is not looked at (``too_long``)."""
    if len(text) > MAX_CALL_TEXT:
        return ParsedReply("", (), (), "none", too_long=True)
    visible = outside_reasoning(text)
    if "<tool_call>" in visible:
        return _parse_hermes(visible)
    return _parse_python(visible)


# -- hermes ---------------------------------------------------------------------------


def _too_many(unread: int) -> CallProblem:
    return CallProblem(
        MAX_CALLS_PER_REPLY,
        f"{unread} more {'call was' if unread == 1 else 'calls were'} not read: "
        f"at most {MAX_CALLS_PER_REPLY} calls are read from one reply",
    )


def _parse_hermes(text: str) -> ParsedReply:
    calls: list[ToolCall] = []
    problems: list[CallProblem] = []
    unread = 0
    matches = _TAG.finditer(text)
    for position, match in enumerate(matches):
        if position == MAX_CALLS_PER_REPLY:
            unread = 1 + sum(1 for _ in matches)
            problems.append(_too_many(unread))
            break
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
    return ParsedReply(content, tuple(calls), tuple(problems), "hermes", unread=unread)


def _call_from_json(body: str, position: int) -> ToolCall | CallProblem:
    try:
        data = json.loads(body)
    except RecursionError:
        return CallProblem(position, f"the call is nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    except ValueError as error:
        return CallProblem(position, f"the call is not valid JSON ({error})")
    return call_from_mapping(data, position)


def call_from_mapping(data: Any, position: int = 0) -> ToolCall | CallProblem:
    """A call from ``{"name", "arguments"}`` data (or OpenAI's ``{"function": {...}}``), its
    arguments checked against the bounds above and copied (so later changes to ``data`` do
    not reach the call)."""
    try:
        return _read_call(data, position)
    except _NotData as error:
        return CallProblem(position, str(error))


def _read_call(data: Any, position: int) -> ToolCall | CallProblem:
    """``call_from_mapping``, except that a value no JSON text can hold raises ``_NotData``."""
    if isinstance(data, Mapping) and isinstance(data.get("function"), Mapping):
        data = data["function"]
    if not isinstance(data, Mapping):
        return CallProblem(position, f"a call must be a JSON object, got {type(data).__name__}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        return CallProblem(position, 'the call has no "name" string')
    if len(name) > MAX_NAME_CHARS:
        return CallProblem(position, f"the function name is over {MAX_NAME_CHARS} characters")
    name = name.strip()
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        if len(arguments) > MAX_CALL_TEXT:
            return CallProblem(position, f"the arguments of {name!r} are over {MAX_CALL_TEXT:,} characters")
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except RecursionError:
            return CallProblem(position, f"the arguments of {name!r} nest deeper than {MAX_ARGUMENT_DEPTH} levels")
        except ValueError as error:
            return CallProblem(position, f"the arguments of {name!r} are not valid JSON ({error})")
    if not isinstance(arguments, Mapping):
        return CallProblem(position, f"the arguments of {name!r} must be a JSON object")
    return _bounded_call(name, arguments, position)


# -- the bounds on arguments ----------------------------------------------------------------


class _OutOfBounds(Exception):
    """An argument value past a bound: a ``CallProblem`` in every syntax."""


class _NotData(Exception):
    """A value that no JSON text can hold: only a structured action can carry one."""


def _shown(key: str) -> str:
    return repr(key) if len(key) <= 60 else repr(key[:60]) + "…"


#: Python literals that are no JSON value: taken as leaves in python call syntax.
_PYTHON_LEAVES = (bytes, complex, EllipsisType)


class _Walk:
    """One walk over argument values that copies them as JSON data within the bounds
    (``python``: python literals too, see the module docstring).

    ``strict`` (reading a call) raises ``_OutOfBounds`` at the first bound broken. Otherwise
    (rendering a structured action's unreadable call as text) values past a bound are cut so
    that the text still breaks the bound when it is read back: containers deeper than
    ``max_depth`` become empty ones (still too deep), integers out of range become the first
    integer past the range, and copying stops after ``MAX_CALL_TEXT`` values (the text is
    then too long). Either way ``_NotData`` is raised for what JSON cannot hold, and the
    walk's cost is bounded: at most ``MAX_CALL_TEXT`` values, ``max_depth`` levels.
    """

    def __init__(self, *, strict: bool, max_depth: int = MAX_ARGUMENT_DEPTH, python: bool = False) -> None:
        self.strict = strict
        self.python = python
        self.max_depth = max_depth
        self.budget = MAX_CALL_TEXT
        self.path: set[int] = set()  # ids of the containers being copied: a cycle comes back to one

    def copy(self, value: Any, depth: int, where: str) -> Any:
        self.budget -= 1
        if self.budget < 0 and self.strict:
            raise _OutOfBounds(f"the arguments hold more than {MAX_CALL_TEXT:,} values")
        if value is None or isinstance(value, (str, bool)):
            return value
        if isinstance(value, int):
            if value in _INT_RANGE:
                return value
            if self.strict:
                raise _OutOfBounds(f"{where} holds an integer outside the signed 64-bit range")
            return _INT_RANGE.stop if value > 0 else _INT_RANGE.start - 1
        if isinstance(value, float):
            if math.isfinite(value) or self.python or not self.strict:
                return value
            raise _OutOfBounds(f"{where} holds {value!r}, which is not a JSON number")
        if self.python and isinstance(value, _PYTHON_LEAVES):
            return value
        python_set = self.python and isinstance(value, (set, frozenset))
        if not isinstance(value, (Mapping, list, tuple)) and not python_set:
            raise _NotData(f"{where} holds a {type(value).__name__} value, which is not JSON data")
        if depth > self.max_depth:
            if self.strict:
                raise _OutOfBounds(f"{where} is nested deeper than {MAX_ARGUMENT_DEPTH} levels")
            return {} if isinstance(value, Mapping) else []
        if id(value) in self.path:
            raise _NotData(f"{where} contains itself")
        self.path.add(id(value))
        try:
            if isinstance(value, Mapping):
                out: dict[Any, Any] = {}
                for key, item in value.items():
                    if not isinstance(key, str):
                        if not self.python:
                            raise _NotData(f"{where} has a key of type {type(key).__name__}; JSON keys are strings")
                        key = self.copy(key, depth + 1, where)
                    if self.budget < 0:
                        break
                    out[key] = self.copy(item, depth + 1, where)
                return out
            items = []
            for item in value:
                if self.budget < 0:
                    break
                items.append(self.copy(item, depth + 1, where))
            if python_set:
                return frozenset(items) if isinstance(value, frozenset) else set(items)
            return tuple(items) if self.strict and isinstance(value, tuple) else items
        finally:
            self.path.discard(id(value))


def _bounded_call(
    name: str, arguments: Mapping[Any, Any], position: int, *, python: bool = False
) -> ToolCall | CallProblem:
    """The call with its arguments copied as bounded JSON data (python literals too, for
    python call syntax), or the first bound broken (``_NotData``, with the function named,
    for what JSON cannot hold)."""
    walk = _Walk(strict=True, python=python)
    checked: dict[str, Any] = {}
    try:
        for key, value in arguments.items():
            if not isinstance(key, str):
                return CallProblem(position, f"the argument names of {name!r} must be strings")
            checked[key] = walk.copy(value, 1, f"argument {_shown(key)}")
    except _OutOfBounds as error:
        return CallProblem(position, f"{name}: {error}")
    except _NotData as error:
        raise _NotData(f"{name}: {error}") from None
    return ToolCall(name, checked)


# -- python syntax ----------------------------------------------------------------------


def _parse_python(text: str) -> ParsedReply:
    fenced = _FENCE.findall(text)
    candidates = [block for block in fenced if _CALL_START.match(block)] or [text]
    source = candidates[-1].strip()
    if not _CALL_START.match(source):
        return ParsedReply(text.strip(), (), (), "none")
    content = text.replace(candidates[-1], "").replace("```python", "").replace("```", "").strip()
    try:
        nodes = _call_nodes(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        message = error.msg if isinstance(error, SyntaxError) else str(error)
        problem = CallProblem(0, f"the calls are not valid python call syntax ({message})")
        return ParsedReply(content, (), (problem,), "python")
    calls: list[ToolCall] = []
    problems: list[CallProblem] = []
    for position, node in enumerate(nodes[:MAX_CALLS_PER_REPLY]):
        call = _call_from_node(node, position)
        if isinstance(call, CallProblem):
            problems.append(call)
        else:
            calls.append(call)
    unread = max(len(nodes) - MAX_CALLS_PER_REPLY, 0)
    if unread:
        problems.append(_too_many(unread))
    return ParsedReply(content, tuple(calls), tuple(problems), "python", unread=unread)


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
    if len(name) > MAX_NAME_CHARS:
        return CallProblem(position, f"the function name is over {MAX_NAME_CHARS} characters")
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
    try:
        return _bounded_call(name, arguments, position, python=True)
    except _NotData as error:  # literal_eval gives only python literals; kept for safety
        return CallProblem(position, str(error))


# -- structured actions and canonical text ---------------------------------------------------


def as_json_data(value: Any) -> Any:
    """``value`` as strict JSON data, for records: the python literals a python-syntax call
    can hold become JSON (tuples lists, sets sorted lists, non-string keys, bytes, complex
    numbers and non-finite floats their ``repr``); JSON data comes back equal."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): as_json_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json_data(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((as_json_data(v) for v in value), key=repr)
    return repr(value)


def render_calls(calls: tuple[ToolCall, ...] | list[ToolCall], content: str = "") -> str:
    """Canonical reply text for ``calls``: Hermes tags, one per line, after ``content``."""
    lines = [content.strip()] if content.strip() else []
    lines += [
        f"<tool_call>{json.dumps(call.to_dict(), ensure_ascii=False, sort_keys=True)}</tool_call>" for call in calls
    ]
    return "\n".join(lines)


def structured_to_text(action: Mapping[str, Any]) -> str:
    """The text form of a ``{"content", "tool_calls"}`` action. Entries that are not
    readable calls are kept as tagged JSON, so the parser reports them; a value past a bound
    is cut so that the text still breaks it (see ``_Walk``). Rendering stops once the text is
    over ``MAX_CALL_TEXT`` characters: it is then too long to be read whatever follows.

    ``InvalidActionError`` when an entry holds what no JSON text can (a cycle, bytes, a
    non-string key, any other object): no policy that decodes JSON sends that.
    """
    content = action.get("content")
    parts = [content.strip()] if isinstance(content, str) and content.strip() else []
    size = len(parts[0]) if parts else 0
    calls = action.get("tool_calls") or []
    if not isinstance(calls, list):
        calls = [calls]
    for position, entry in enumerate(calls):
        if size > MAX_CALL_TEXT:
            break
        try:
            call = _read_call(entry, position)
            if isinstance(call, ToolCall):
                block = render_calls([call])
            else:  # the entry and its call object and arguments (3 levels) then the bound
                kept = _Walk(strict=False, max_depth=MAX_ARGUMENT_DEPTH + 3).copy(entry, 0, "the call")
                block = f"<tool_call>{json.dumps(kept, ensure_ascii=False, sort_keys=True)}</tool_call>"
        except _NotData as error:
            raise InvalidActionError(f"tool call {position} of the action is not JSON data: {error}") from None
        parts.append(block)
        size += len(block) + 1
    return "\n".join(parts)
