"""BFCL's AST rules for single-turn tool calls, implemented here (bfcl_eval's checker
imports API clients, and its quirks should be ours to decide on).

A reply is correct when its calls match the gold calls exactly in the BFCL sense:

- **names**: as the function docs spell them (dotted names included); the dots-to-
  underscores form that OpenAI-style APIs force is accepted when it names no other function;
- **arguments**: every required one present, none outside the docs *and* the gold (an
  argument the gold does not list is unexpected even if the docs have it), every gold
  argument present unless its allowed values include ``""`` (may be omitted);
- **types** per the schema: Python types (``bool`` is not an ``int``; an ``int`` is taken
  where a ``float`` is expected, at any depth); a value of the gold's own type is taken as
  a *variable* reference (BFCL's rule for gold values such as a variable name where the
  schema wants a number) and then compared exactly; Java and JavaScript values may be
  native JSON values or source text (``"new int[]{1, 2}"``, ``"123L"``, ``"true"``),
  which is converted by the declared type as BFCL does, and stays text when it does not
  parse (so it then fails the type check);
- **values**: one of the allowed values; strings (also inside lists and at the top level
  of dicts) compared after BFCL's ``standardize_string`` (no spaces or ``,./-_*^``,
  lower case, ``'`` read as ``"``); dicts key by key against each allowed dict; lists of
  dicts element by element;
- **counts**: simple categories take one call, ``multiple`` one call to the right one of
  several functions, ``parallel*`` the gold's number of calls in any order (a maximum
  matching, where BFCL's checker matches greedily and can miss an assignment that exists);
- **irrelevance**: correct only when the reply calls nothing.

A reply with any call that cannot be read is ``malformed_call``, never partly graded, and a
reply over ``frostgym.tools.calls.MAX_CALL_TEXT`` characters is ``too_long``, graded without
being read. Calls reach the checks only within the parser's bounds (``frostgym.tools.calls``).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast

from frostgym.core.grade import Grade
from frostgym.core.hashing import canonical_json
from frostgym.tools.calls import MAX_CALL_TEXT, ParsedReply, ToolCall, parse_reply

GRADER_NAME = "tool_ast"
#: 1.1: details.answer_key for maj@k. 1.2: too_long over MAX_CALL_TEXT characters; call
#: arguments past the parser's bounds (depth, 64-bit integers, finite numbers, JSON types)
#: and calls past MAX_CALLS_PER_REPLY are malformed_call.
GRADER_VERSION = "1.2.0"
#: Every label this grader gives.
LABELS: tuple[str, ...] = (
    "too_long",
    "no_call",
    "wrong_count",
    "wrong_function",
    "missing_param",
    "unexpected_param",
    "wrong_type",
    "wrong_value",
    "malformed_call",
    "called_when_irrelevant",
)


@dataclass(frozen=True)
class ToolGraderConfig:
    weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({"correctness": 0.9, "tool_format": 0.1})
    )
    required: tuple[str, ...] = ("correctness", "tool_format")


DEFAULT_CONFIG = ToolGraderConfig()


@dataclass(frozen=True)
class Mismatch:
    """Why a call (or a reply) does not match: one of ``LABELS`` and a sentence."""

    label: str
    reason: str


@dataclass(frozen=True)
class CheckResult:
    """The verdict before it becomes a ``Grade``: ``mismatch`` is ``None`` when correct."""

    mismatch: Mismatch | None
    matched: int
    expected: int

    @property
    def valid(self) -> bool:
        return self.mismatch is None


# -- types ----------------------------------------------------------------------------------

_PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": str,
}
_JAVA_TYPES: dict[str, type] = {
    "byte": int,
    "short": int,
    "integer": int,
    "long": int,
    "float": float,
    "double": float,
    "boolean": bool,
    "char": str,
    "String": str,
    "any": str,
    "Array": list,
    "ArrayList": list,
    "HashMap": dict,
}
_JS_TYPES: dict[str, type] = {
    "String": str,
    "integer": int,
    "float": float,
    "Bigint": int,
    "Boolean": bool,
    "dict": dict,
    "array": list,
    "any": str,
}
_TYPES = {"python": _PYTHON_TYPES, "java": _JAVA_TYPES, "javascript": _JS_TYPES}
#: Declared types whose items are type-checked too (one level, as BFCL does).
_NESTED = {"python": ("array", "tuple"), "java": ("Array", "ArrayList"), "javascript": ("array",)}

_STANDARDIZE = str.maketrans("", "", " ,./-_*^")
_SCALARS = (str, int, float)


def standardize(text: str) -> str:
    """BFCL's string normalisation: so "April 1, 2024" equals "april 1 2024"."""
    return text.translate(_STANDARDIZE).lower().replace("'", '"')


def _norm(value: Any) -> Any:
    return standardize(value) if isinstance(value, str) else value


def _gold_type(allowed: Sequence[Any]) -> type | None:
    for value in allowed:
        if value != "":
            return type(value)
    return None


def _type_name(kind: type | None) -> str:
    return kind.__name__ if kind is not None else "any"


# -- Java / JavaScript source text -------------------------------------------------------------

_INT = re.compile(r"-?\d+")
_JAVA_FLOAT = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[fF]")
_JAVA_DOUBLE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_JAVA_LONG = re.compile(r"-?\d+[lL]")
_JAVA_ARRAY = re.compile(r"new\s+\w+\s*\[\]\s*\{(.*?)\}", re.DOTALL)
_JAVA_ASLIST = re.compile(r"new\s+ArrayList<\w*>\(\s*Arrays\.asList\((.+?)\)\s*\)", re.DOTALL)
_JAVA_ADDS = re.compile(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", re.DOTALL)
_JAVA_EMPTY_LIST = re.compile(r"new\s+ArrayList<\w*>\(\)")
_JAVA_MAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", re.DOTALL)
_JAVA_PUT = re.compile(r"put\(\"(.*?)\",\s*(.*?)\)")
_JAVA_EMPTY_MAP = re.compile(r"new\s+HashMap<.*?>\s*\(\)")
_JS_FLOAT = re.compile(r"-?\d+(?:\.\d+)?")
_JS_BIGINT = re.compile(r"-?\d+n")


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def _java_any(text: str) -> Any:
    """A Java literal of unknown type (an element of an untyped collection)."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    if _JAVA_LONG.fullmatch(text):
        return int(text[:-1])
    if _JAVA_FLOAT.fullmatch(text):
        return float(text[:-1])
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def _java_elements(body: str, item: str | None, separator: str = ",") -> list[Any]:
    parts = [p.strip() for p in body.split(separator) if p.strip()]
    if item in ("String", "char"):
        return [_unquote(p) for p in parts]
    return [java_value(p, item) if item and item != "any" else _java_any(p) for p in parts]


def java_value(text: str, kind: str, item: str | None = None) -> Any:
    """Java source text read as the declared ``kind``; unreadable text stays text."""
    text = text.strip() if kind not in ("String", "any", "char") else text
    if kind in ("byte", "short", "integer"):
        return int(text) if _INT.fullmatch(text) else text
    if kind == "long":
        return int(text[:-1]) if _JAVA_LONG.fullmatch(text) else text
    if kind == "float":
        return float(text[:-1]) if _JAVA_FLOAT.fullmatch(text) else text
    if kind == "double":
        return float(text) if _JAVA_DOUBLE.fullmatch(text) else text
    if kind == "boolean":
        return text == "true" if text in ("true", "false") else text
    if kind == "Array":
        match = _JAVA_ARRAY.search(text)
        return _java_elements(match.group(1), item) if match else text
    if kind == "ArrayList":
        match = _JAVA_ASLIST.search(text)
        if match:
            return _java_elements(match.group(1), item)
        match = _JAVA_ADDS.search(text)
        if match:
            return _java_elements(",".join(re.findall(r"add\((.+?)\)", match.group(1))), item)
        return [] if _JAVA_EMPTY_LIST.search(text) else text
    if kind == "HashMap":
        match = _JAVA_MAP.search(text)
        if match:
            return {key: _java_any(value) for key, value in _JAVA_PUT.findall(match.group(1))}
        return {} if _JAVA_EMPTY_MAP.search(text) else text
    return text


def _js_collection(text: str, kind: type) -> Any:
    """A JavaScript array or object literal: JSON first, then Python-style literals
    (single quotes, ``true``/``false``/``null``); unreadable text stays text."""
    stripped = text.strip()
    if stripped.startswith("new Array(") and stripped.endswith(")"):
        stripped = "[" + stripped[len("new Array(") : -1] + "]"
    try:
        value = json.loads(stripped)
    except ValueError:
        pythonic = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", stripped)))
        try:
            value = ast.literal_eval(pythonic)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return text
    if isinstance(value, tuple):
        value = list(value)
    return value if isinstance(value, kind) else text


def js_value(text: str, kind: str, item: str | None = None) -> Any:
    """JavaScript source text read as the declared ``kind``; unreadable text stays text."""
    stripped = text.strip()
    if kind == "String":
        return _unquote(text)
    if kind == "integer":
        return int(stripped) if _INT.fullmatch(stripped) else text
    if kind == "float":
        return float(stripped) if _JS_FLOAT.fullmatch(stripped) else text
    if kind == "Bigint":
        return int(stripped[:-1]) if _JS_BIGINT.fullmatch(stripped) else text
    if kind == "Boolean":
        return stripped == "true" if stripped in ("true", "false") else text
    if kind == "dict":
        return _js_collection(text, dict)
    if kind == "array":
        value = _js_collection(text, list)
        if isinstance(value, list) and item in ("String", "float", "integer", "Bigint", "Boolean"):
            return [js_value(v, item) if isinstance(v, str) and item != "String" else v for v in value]
        return value
    return text


# -- one argument ---------------------------------------------------------------------------------


def _item_ok(value: Any, item: type, option: Sequence[Any]) -> bool:
    if type(value) is item or (item is float and type(value) is int):
        return True
    hint = _gold_type(option)
    return hint is not None and type(value) is hint


def _type_mismatch(
    param: str, value: Any, allowed: Sequence[Any], expected: type, item: type | None
) -> tuple[Mismatch | None, bool]:
    """``(mismatch, is_variable)`` for ``value`` against the declared type."""
    hint = _gold_type(allowed)
    if type(value) is expected:
        variable = hint is not None and hint is not expected
        if item is None or not value or not allowed:
            return None, variable
        items = cast("list[Any]", value)
        for option in allowed:
            if not isinstance(option, list) or all(_item_ok(v, item, option) for v in items):
                return None, variable
        return Mismatch("wrong_type", f"{param!r}: the items of {value!r} are not all {_type_name(item)}"), variable
    if hint is not None and type(value) is hint:
        return None, True
    got = type(value).__name__
    return Mismatch("wrong_type", f"{param!r} must be {_type_name(expected)}, got {got} {value!r}"), False


def _dict_against(param: str, value: Mapping[str, Any], option: Mapping[str, Any]) -> Mismatch | None:
    for key, item in value.items():
        if key not in option:
            return Mismatch("unexpected_param", f"{param!r} has an unexpected key {key!r}")
        # A gold dict value should be a list of allowed values; a few are the bare value.
        choices = option[key] if isinstance(option[key], list) else [option[key]]
        if _norm(item) not in [_norm(a) for a in choices]:
            return Mismatch("wrong_value", f"{param!r}[{key!r}] = {item!r} is not one of {option[key]!r}")
    for key, allowed in option.items():
        if key not in value and (not isinstance(allowed, list) or "" not in allowed):
            return Mismatch("missing_param", f"{param!r} is missing the key {key!r}")
    return None


def _dict_mismatch(param: str, value: Mapping[str, Any], allowed: Sequence[Any]) -> Mismatch | None:
    last = Mismatch("wrong_value", f"{param!r} = {value!r} matches no allowed dict")
    for option in allowed:
        if isinstance(option, Mapping):
            problem = _dict_against(param, value, option)
            if problem is None:
                return None
            last = problem
    return last


def _dict_list_mismatch(param: str, value: Sequence[Any], allowed: Sequence[Any]) -> Mismatch | None:
    last = Mismatch("wrong_value", f"{param!r} has {len(value)} dicts, which no allowed list has")
    for option in allowed:
        items = [] if option == "" else option
        if not isinstance(items, list) or len(items) != len(value):
            continue
        problem = None
        for element, gold in zip(value, items, strict=True):
            if not isinstance(element, Mapping) or not isinstance(gold, Mapping):
                problem = Mismatch("wrong_value", f"{param!r}: {element!r} is not a dict like {gold!r}")
            else:
                problem = _dict_against(param, element, gold)
            if problem is not None:
                break
        if problem is None:
            return None
        last = problem
    return last


def _list_mismatch(param: str, value: Sequence[Any], allowed: Sequence[Any]) -> Mismatch | None:
    normal = [_norm(v) for v in value]
    if not allowed and not normal:
        return None  # BFCL's data writes no allowed value where it means the empty array
    for option in allowed:
        items = [] if option == "" else option
        if isinstance(items, list) and normal == [_norm(v) for v in items]:
            return None
    return Mismatch("wrong_value", f"{param!r} = {value!r} is not one of {list(allowed)!r}")


def check_argument(
    param: str, value: Any, schema: Mapping[str, Any], allowed: Sequence[Any], language: str
) -> Mismatch | None:
    """One argument's type and value against its schema and its allowed values."""
    table = _TYPES.get(language, _PYTHON_TYPES)
    declared = str(schema.get("type", "any"))
    expected = table.get(declared)
    if language == "python" and expected in _SCALARS and type(value) is expected and value in allowed:
        return None  # the common case, an exact allowed scalar: nothing else to check
    nested = declared in _NESTED.get(language, ())
    item_declared = str(schema.get("items", {}).get("type", "")) if nested else ""
    # Items declared "any" take any value (BFCL would demand strings, failing its own gold).
    item = table.get(item_declared) if nested and item_declared != "any" else None
    if language == "java" and isinstance(value, str) and expected is not None:
        value = java_value(value, declared, item_declared or None)
    elif language == "javascript" and isinstance(value, str) and expected is not None:
        value = js_value(value, declared, item_declared or None)
    if isinstance(value, tuple):
        value = list(value)
    if expected is float and type(value) is int:
        value = float(value)
    if expected is None:  # a type no table knows: only the value can be checked
        return None if value in allowed else Mismatch("wrong_value", f"{param!r} = {value!r} is not allowed")
    problem, variable = _type_mismatch(param, value, allowed, expected, item)
    if problem is not None:
        return problem
    if not variable:
        if expected is dict:
            return _dict_mismatch(param, value, allowed)
        if expected is list and item is dict:
            return _dict_list_mismatch(param, value, allowed)
        if expected is str:
            target = standardize(value)
            ok = any(isinstance(a, str) and standardize(a) == target for a in allowed)
            return None if ok else Mismatch("wrong_value", f"{param!r} = {value!r} is not one of {list(allowed)!r}")
        if expected is list:
            return _list_mismatch(param, value, allowed)
    if value in allowed:
        return None
    return Mismatch("wrong_value", f"{param!r} = {value!r} is not one of {list(allowed)!r}")


# -- one call ----------------------------------------------------------------------------------------


def name_matches(called: str, expected: str, offered: Sequence[str]) -> bool:
    """The docs' name, or its dots-to-underscores form when no offered function has that name."""
    if called == expected:
        return True
    return "." in expected and called == expected.replace(".", "_") and called not in offered


def check_call(
    call: ToolCall,
    function: Mapping[str, Any],
    expected: Mapping[str, Sequence[Any]],
    language: str,
    offered: Sequence[str] = (),
) -> Mismatch | None:
    """One call against one gold call (``expected``: parameter -> allowed values) and the
    doc of the function the gold calls."""
    name = str(function.get("name", ""))
    if not name_matches(call.name, name, offered):
        return Mismatch("wrong_function", f"called {call.name!r}, expected {name!r}")
    parameters = function.get("parameters", {})
    properties: Mapping[str, Any] = parameters.get("properties", {})
    for param in parameters.get("required", []):
        if param not in call.arguments:
            return Mismatch("missing_param", f"{name}: the required argument {param!r} is missing")
    for param, value in call.arguments.items():
        if param not in properties or param not in expected:
            return Mismatch("unexpected_param", f"{name}: unexpected argument {param!r}")
        problem = check_argument(param, value, properties[param], expected[param], language)
        if problem is not None:
            return Mismatch(problem.label, f"{name}: {problem.reason}")
    for param, allowed in expected.items():
        if param not in call.arguments and "" not in allowed:
            return Mismatch("missing_param", f"{name}: the argument {param!r} is missing")
    return None


def _max_matching(ok: list[list[bool]]) -> list[int | None]:
    """For each gold call (row), the reply call matched to it in a maximum matching."""
    owner: dict[int, int] = {}

    def augment(row: int, seen: set[int]) -> bool:
        for col, fits in enumerate(ok[row]):
            if fits and col not in seen:
                seen.add(col)
                if col not in owner or augment(owner[col], seen):
                    owner[col] = row
                    return True
        return False

    for row in range(len(ok)):
        augment(row, set())
    matched: list[int | None] = [None] * len(ok)
    for col, row in owner.items():
        matched[row] = col
    return matched


def check_calls(
    calls: Sequence[ToolCall],
    functions: Sequence[Mapping[str, Any]],
    possible_answer: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]] | None,
    category: str,
    language: str = "python",
) -> CheckResult:
    """Readable calls against the gold calls of one task (``None``: call nothing)."""
    if possible_answer is None:
        if calls:
            names = ", ".join(c.name for c in calls)
            return CheckResult(
                Mismatch("called_when_irrelevant", f"no function fits, but the reply called {names}"), 0, 0
            )
        return CheckResult(None, 0, 0)
    expected = len(possible_answer)
    if not calls:
        return CheckResult(Mismatch("no_call", "the reply calls no function"), 0, expected)
    if len(calls) != expected:
        return CheckResult(Mismatch("wrong_count", f"{len(calls)} calls, expected {expected}"), 0, expected)
    offered = [str(f.get("name", "")) for f in functions]
    docs = {str(f.get("name", "")): f for f in functions}
    gold = [next(iter(answer.items())) for answer in possible_answer]
    if "parallel" not in category:  # simple and multiple: the one call against the one gold call
        name, params = gold[0]
        problem = check_call(calls[0], docs.get(name, {"name": name}), params, language, offered)
        return CheckResult(problem, int(problem is None), 1)
    # Greedy first (enough for nearly every reply); the full matrix and a maximum matching
    # only when greedy leaves a gold call unmatched.
    taken: set[int] = set()
    for name, params in gold:
        doc = docs.get(name, {"name": name})
        col = next(
            (
                c
                for c in range(len(calls))
                if c not in taken and check_call(calls[c], doc, params, language, offered) is None
            ),
            None,
        )
        if col is None:
            break
        taken.add(col)
    else:
        return CheckResult(None, expected, expected)
    problems = [
        [check_call(call, docs.get(name, {"name": name}), params, language, offered) for call in calls]
        for name, params in gold
    ]
    matching = _max_matching([[p is None for p in row] for row in problems])
    matched = sum(m is not None for m in matching)
    if matched == expected:
        return CheckResult(None, matched, expected)
    row = matching.index(None)
    free = [col for col in range(len(calls)) if col not in matching]
    candidates = [problems[row][col] for col in free]
    best = next((p for p in candidates if p is not None and p.label != "wrong_function"), None)
    best = best or next((p for p in candidates if p is not None), None)
    reason = f"no call matches gold call {row} ({gold[row][0]})" + (f": {best.reason}" if best else "")
    return CheckResult(Mismatch(best.label if best else "wrong_value", reason), matched, expected)


# -- the grade -----------------------------------------------------------------------------------------


def grade_tool_calls(
    parsed: ParsedReply,
    functions: Sequence[Mapping[str, Any]],
    possible_answer: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]] | None,
    category: str,
    language: str = "python",
    config: ToolGraderConfig = DEFAULT_CONFIG,
) -> Grade:
    """Grade a parsed reply: ``correctness`` (all calls match), ``tool_format`` (every
    attempted call was readable) and ``calls_matched`` (the share of gold calls matched)."""
    details: dict[str, Any] = {
        "category": category,
        "syntax": parsed.syntax,
        "calls": len(parsed.calls),
        "expected_calls": len(possible_answer or ()),
    }
    if parsed.too_long:
        reason = f"the reply is over {MAX_CALL_TEXT:,} characters and was not read"
        details.update({"status": "too_long", "reason": reason, "answer_key": None})
        return Grade.weighted(
            components={"correctness": 0.0, "tool_format": 0.0, "calls_matched": 0.0},
            weights=config.weights,
            required=config.required,
            grader=GRADER_NAME,
            grader_version=GRADER_VERSION,
            label="too_long",
            details=details,
        )
    if parsed.problems:
        reasons = [p.to_dict() for p in parsed.problems]
        mismatch = Mismatch("malformed_call", "; ".join(p.message for p in parsed.problems)[:500])
        result = CheckResult(mismatch, 0, len(possible_answer or ()))
        details["problems"] = reasons
    else:
        result = check_calls(parsed.calls, functions, possible_answer, category, language)
    fraction = result.matched / result.expected if result.expected else float(result.valid and not parsed.problems)
    components = {
        "correctness": float(result.valid),
        "tool_format": 0.0 if parsed.problems else 1.0,
        "calls_matched": fraction if not parsed.problems else 0.0,
    }
    label = None if result.mismatch is None else result.mismatch.label
    details.update({"status": label or "match", "reason": None if result.mismatch is None else result.mismatch.reason})
    details["answer_key"] = None if parsed.problems else answer_key(parsed.calls)
    return Grade.weighted(
        components=components,
        weights=config.weights,
        required=config.required,
        grader=GRADER_NAME,
        grader_version=GRADER_VERSION,
        label=label,
        details=details,
    )


def answer_key(calls: Sequence[ToolCall]) -> str:
    """What maj@k votes with: the calls as canonical JSON, in a fixed order (parallel calls
    match in any order, so two replies that differ only in order vote alike)."""
    return canonical_json(sorted(canonical_json([call.name, plain(call.arguments)]) for call in calls))


def grade_tool_reply(
    reply: str,
    functions: Sequence[Mapping[str, Any]],
    possible_answer: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]] | None,
    category: str,
    language: str = "python",
    config: ToolGraderConfig = DEFAULT_CONFIG,
) -> Grade:
    """Parse ``reply`` with the shared tool-call parser, then ``grade_tool_calls``."""
    return grade_tool_calls(parse_reply(reply), functions, possible_answer, category, language, config)


def plain(value: Any) -> Any:
    """``value`` as strict JSON data: python-syntax calls can hold tuples, sets, bytes,
    complex numbers or non-finite floats, which records must still be able to write."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=repr)
    return repr(value)
