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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from frostgym.core.grade import Grade, GraderSpec
from frostgym.tools.calls import MAX_CALL_TEXT, ParsedReply, ToolCall, as_json_data, parse_reply

GRADER = GraderSpec(
    name="tool_ast",
    version="1.2.0",  # what each version changed: CHANGELOG.md
    labels=(
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
    ),
    weights={"correctness": 0.9, "tool_format": 0.1},
    required=("correctness", "tool_format"),
)


@dataclass(frozen=True)
class ToolGraderConfig:
    weights: Mapping[str, float] = field(default_factory=lambda: GRADER.weights)
    required: tuple[str, ...] = GRADER.required


DEFAULT_CONFIG = ToolGraderConfig()


@dataclass(frozen=True)
class Mismatch:
    """Why a call (or a reply) does not match: one of ``GRADER.labels`` and a sentence."""

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
#
# The checks below build no reason on their way: a failure is a ``_Miss`` (a label, and a
# template and its values for the sentence), and only the one a verdict reports is written out.
# A parallel reply that greedy matching cannot place is checked against every gold call,
# and most of those checks fail.


class _Miss:
    """A ``Mismatch`` whose reason is written only when asked for."""

    __slots__ = ("args", "label", "template")

    def __init__(self, label: str, template: str, *args: Any) -> None:
        self.label = label
        self.template = template
        self.args = args

    def explain(self) -> str:
        """The reason: ``template`` filled in with ``args``."""
        return self.template.format(*self.args)

    __str__ = explain

    def mismatch(self) -> Mismatch:
        return Mismatch(self.label, self.explain())


def _mismatch(miss: _Miss | None) -> Mismatch | None:
    return None if miss is None else miss.mismatch()


class _Spec:
    """What a parameter's schema says, read once per function doc and parameter."""

    __slots__ = ("declared", "exact", "expected", "item", "item_declared")

    def __init__(self, schema: Mapping[str, Any], language: str) -> None:
        table = _TYPES.get(language, _PYTHON_TYPES)
        self.declared = str(schema.get("type", "any"))
        self.expected = table.get(self.declared)
        #: An exact allowed scalar of this type needs no other check.
        self.exact = language == "python" and self.expected in _SCALARS
        nested = self.declared in _NESTED.get(language, ())
        self.item_declared = str(schema.get("items", {}).get("type", "")) if nested else ""
        # Items declared "any" take any value (BFCL would demand strings, failing its own gold).
        self.item = table.get(self.item_declared) if nested and self.item_declared != "any" else None


_UNSET: Any = object()


class _Allowed:
    """One gold argument's allowed values and what is derived from them, each derived
    value computed on first use (at the point the checks first need it) and kept."""

    __slots__ = ("_hint", "_lists", "_strings", "values")

    def __init__(self, values: Sequence[Any]) -> None:
        self.values = values
        self._hint: Any = _UNSET
        self._strings: frozenset[str] | None = None
        self._lists: tuple[list[Any] | None, ...] | None = None

    @property
    def hint(self) -> type | None:
        """The gold's own type (``_gold_type``)."""
        if self._hint is _UNSET:
            self._hint = _gold_type(self.values)
        return cast("type | None", self._hint)

    @property
    def strings(self) -> frozenset[str]:
        """The allowed strings, standardized."""
        if self._strings is None:
            self._strings = frozenset(standardize(a) for a in self.values if isinstance(a, str))
        return self._strings

    @property
    def lists(self) -> tuple[list[Any] | None, ...]:
        """Each allowed list with its strings standardized (``""``: the empty list; not a list: ``None``)."""
        if self._lists is None:
            options = ([] if option == "" else option for option in self.values)
            self._lists = tuple([_norm(v) for v in o] if isinstance(o, list) else None for o in options)
        return self._lists


def _items_ok(items: Sequence[Any], item: type, option: Sequence[Any]) -> bool:
    """Every item of ``items`` is of the declared item type (an ``int`` for a ``float``)
    or of the allowed list's own type."""
    hint: Any = _UNSET
    for value in items:
        if type(value) is item or (item is float and type(value) is int):
            continue
        if hint is _UNSET:
            hint = _gold_type(option)
        if hint is None or type(value) is not hint:
            return False
    return True


def _type_mismatch(
    param: str, value: Any, allowed: _Allowed, expected: type, item: type | None
) -> tuple[_Miss | None, bool]:
    """``(mismatch, is_variable)`` for ``value`` against the declared type."""
    hint = allowed.hint
    if type(value) is expected:
        variable = hint is not None and hint is not expected
        if item is None or not value or not allowed.values:
            return None, variable
        items = cast("list[Any]", value)
        for option in allowed.values:
            if not isinstance(option, list) or _items_ok(items, item, option):
                return None, variable
        return _Miss("wrong_type", "{!r}: the items of {!r} are not all {}", param, value, _type_name(item)), variable
    if hint is not None and type(value) is hint:
        return None, True
    got = type(value).__name__
    return _Miss("wrong_type", "{!r} must be {}, got {} {!r}", param, _type_name(expected), got, value), False


def _dict_against(param: str, value: Mapping[str, Any], option: Mapping[str, Any]) -> _Miss | None:
    for key, item in value.items():
        if key not in option:
            return _Miss("unexpected_param", "{!r} has an unexpected key {!r}", param, key)
        # A gold dict value should be a list of allowed values; a few are the bare value.
        choices = option[key] if isinstance(option[key], list) else [option[key]]
        if _norm(item) not in [_norm(a) for a in choices]:
            return _Miss("wrong_value", "{!r}[{!r}] = {!r} is not one of {!r}", param, key, item, option[key])
    for key, allowed in option.items():
        if key not in value and (not isinstance(allowed, list) or "" not in allowed):
            return _Miss("missing_param", "{!r} is missing the key {!r}", param, key)
    return None


def _dict_mismatch(param: str, value: Mapping[str, Any], allowed: Sequence[Any]) -> _Miss | None:
    last = _Miss("wrong_value", "{!r} = {!r} matches no allowed dict", param, value)
    for option in allowed:
        if isinstance(option, Mapping):
            problem = _dict_against(param, value, option)
            if problem is None:
                return None
            last = problem
    return last


def _dict_list_mismatch(param: str, value: Sequence[Any], allowed: Sequence[Any]) -> _Miss | None:
    last = _Miss("wrong_value", "{!r} has {} dicts, which no allowed list has", param, len(value))
    for option in allowed:
        items = [] if option == "" else option
        if not isinstance(items, list) or len(items) != len(value):
            continue
        problem = None
        for element, gold in zip(value, items, strict=True):
            if not isinstance(element, Mapping) or not isinstance(gold, Mapping):
                problem = _Miss("wrong_value", "{!r}: {!r} is not a dict like {!r}", param, element, gold)
            else:
                problem = _dict_against(param, element, gold)
            if problem is not None:
                break
        if problem is None:
            return None
        last = problem
    return last


def _not_allowed(param: str, value: Any, allowed: Sequence[Any]) -> _Miss:
    shown = allowed if type(allowed) is list else list(allowed)
    return _Miss("wrong_value", "{!r} = {!r} is not one of {!r}", param, value, shown)


def _list_mismatch(param: str, value: Sequence[Any], allowed: _Allowed) -> _Miss | None:
    normal = [_norm(v) for v in value]
    if not allowed.values and not normal:
        return None  # BFCL's data writes no allowed value where it means the empty array
    if normal in allowed.lists:
        return None
    return _not_allowed(param, value, allowed.values)


def _check_argument(param: str, value: Any, spec: _Spec, allowed: _Allowed, language: str) -> _Miss | None:
    expected = spec.expected
    if spec.exact and type(value) is expected and value in allowed.values:
        return None  # the common case, an exact allowed scalar: nothing else to check
    item_declared = spec.item_declared
    if language == "java" and isinstance(value, str) and expected is not None:
        value = java_value(value, spec.declared, item_declared or None)
    elif language == "javascript" and isinstance(value, str) and expected is not None:
        value = js_value(value, spec.declared, item_declared or None)
    if isinstance(value, tuple):
        value = list(value)
    if expected is float and type(value) is int:
        value = float(value)
    values = allowed.values
    if expected is None:  # a type no table knows: only the value can be checked
        if value in values:
            return None
        return _Miss("wrong_value", "{!r} = {!r} is not allowed", param, value)
    item = spec.item
    problem, variable = _type_mismatch(param, value, allowed, expected, item)
    if problem is not None:
        return problem
    if not variable:
        if expected is dict:
            return _dict_mismatch(param, value, values)
        if expected is list and item is dict:
            return _dict_list_mismatch(param, value, values)
        if expected is str:
            return None if standardize(value) in allowed.strings else _not_allowed(param, value, values)
        if expected is list:
            return _list_mismatch(param, value, allowed)
    if value in values:
        return None
    return _not_allowed(param, value, values)


def check_argument(
    param: str, value: Any, schema: Mapping[str, Any], allowed: Sequence[Any], language: str
) -> Mismatch | None:
    """One argument's type and value against its schema and its allowed values."""
    return _mismatch(_check_argument(param, value, _Spec(schema, language), _Allowed(allowed), language))


# -- one call ----------------------------------------------------------------------------------------


def name_matches(called: str, expected: str, offered: Sequence[str]) -> bool:
    """The docs' name, or its dots-to-underscores form when no offered function has that name."""
    if called == expected:
        return True
    return "." in expected and called == expected.replace(".", "_") and called not in offered


class _Doc:
    """One function doc: its name at once; its parameters when a call to that name is first
    checked; each parameter's ``_Spec`` when an argument for it is first checked."""

    __slots__ = ("_params", "function", "name", "specs", "underscored")

    def __init__(self, function: Mapping[str, Any]) -> None:
        self.function = function
        self.name = str(function.get("name", ""))
        #: The dots-to-underscores form of a dotted name.
        self.underscored = self.name.replace(".", "_") if "." in self.name else None
        self.specs: dict[str, _Spec] = {}
        self._params: tuple[Mapping[str, Any], Any] | None = None

    def params(self) -> tuple[Mapping[str, Any], Any]:
        """``(properties, required)``."""
        if self._params is None:
            parameters = self.function.get("parameters", {})
            self._params = (parameters.get("properties", {}), parameters.get("required", []))
        return self._params


class _GoldCall:
    """One gold call: the doc of the function it calls, its arguments' allowed values, and
    their ``_Allowed`` made on first use."""

    __slots__ = ("allowed", "doc", "expected", "name")

    def __init__(self, name: str, doc: _Doc, expected: Mapping[str, Sequence[Any]]) -> None:
        self.name = name
        self.doc = doc
        self.expected = expected
        self.allowed: dict[str, _Allowed] = {}


def _check_call(call: ToolCall, gold: _GoldCall, language: str, offered: Sequence[str]) -> _Miss | None:
    doc = gold.doc
    name = doc.name
    called = call.name
    if called != name and (doc.underscored is None or called != doc.underscored or called in offered):
        return _Miss("wrong_function", "called {!r}, expected {!r}", called, name)
    properties, required = doc.params()
    arguments = call.arguments
    for param in required:
        if param not in arguments:
            return _Miss("missing_param", "{}: the required argument {!r} is missing", name, param)
    expected = gold.expected
    specs = doc.specs
    allowed = gold.allowed
    for param, value in arguments.items():
        if param not in properties or param not in expected:
            return _Miss("unexpected_param", "{}: unexpected argument {!r}", name, param)
        spec = specs.get(param)
        if spec is None:
            spec = specs[param] = _Spec(properties[param], language)
        values = allowed.get(param)
        if values is None:
            values = allowed[param] = _Allowed(expected[param])
        problem = _check_argument(param, value, spec, values, language)
        if problem is not None:
            return _Miss(problem.label, "{}: {}", name, problem)
    for param, options in expected.items():
        if param not in arguments and "" not in options:
            return _Miss("missing_param", "{}: the argument {!r} is missing", name, param)
    return None


def check_call(
    call: ToolCall,
    function: Mapping[str, Any],
    expected: Mapping[str, Sequence[Any]],
    language: str,
    offered: Sequence[str] = (),
) -> Mismatch | None:
    """One call against one gold call (``expected``: parameter -> allowed values) and the
    doc of the function the gold calls."""
    return _mismatch(_check_call(call, _GoldCall("", _Doc(function), expected), language, offered))


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


class _Task:
    """What one task's function docs and gold calls give every reply: the offered names
    and each gold call, with what the checks derive from them kept as they derive it."""

    __slots__ = ("functions", "gold", "offered", "possible_answer")

    def __init__(
        self, functions: Sequence[Mapping[str, Any]], possible_answer: Sequence[Mapping[str, Mapping[str, Any]]]
    ) -> None:
        self.functions = functions
        self.possible_answer = possible_answer
        self.offered = [str(f.get("name", "")) for f in functions]
        docs = {str(f.get("name", "")): _Doc(f) for f in functions}
        gold = [next(iter(answer.items())) for answer in possible_answer]
        self.gold = [_GoldCall(name, docs.get(name) or _Doc({"name": name}), params) for name, params in gold]


#: The last tasks graded, by the identity of their function docs and gold calls (held here,
#: so an identity is not reused while its entry lives) and the language. Task data is read,
#: never changed, so what was derived from it stays true.
_TASKS: dict[tuple[int, int, str], _Task] = {}
_TASKS_KEPT = 8192


def _task(
    functions: Sequence[Mapping[str, Any]],
    possible_answer: Sequence[Mapping[str, Mapping[str, Any]]],
    language: str,
) -> _Task:
    key = (id(functions), id(possible_answer), language)
    task = _TASKS.get(key)
    if task is None or task.functions is not functions or task.possible_answer is not possible_answer:
        task = _Task(functions, possible_answer)
        if len(_TASKS) >= _TASKS_KEPT:
            _TASKS.clear()
        _TASKS[key] = task
    return task


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
    task = _task(functions, possible_answer, language)
    offered = task.offered
    gold = task.gold
    if "parallel" not in category:  # simple and multiple: the one call against the one gold call
        miss = _check_call(calls[0], gold[0], language, offered)
        return CheckResult(_mismatch(miss), int(miss is None), 1)
    # Greedy first (enough for nearly every reply); the full matrix and a maximum matching
    # only when greedy leaves a gold call unmatched. Each check is made once.
    width = len(calls)
    problems: list[list[_Miss | None]] = [[_UNSET] * width for _ in gold]
    taken: set[int] = set()
    for row, call_gold in enumerate(gold):
        cells = problems[row]
        for col in range(width):
            if col not in taken:
                cells[col] = _check_call(calls[col], call_gold, language, offered)
                if cells[col] is None:
                    taken.add(col)
                    break
        else:
            break
    else:
        return CheckResult(None, expected, expected)
    for call_gold, cells in zip(gold, problems, strict=True):
        for col in range(width):
            if cells[col] is _UNSET:
                cells[col] = _check_call(calls[col], call_gold, language, offered)
    matching = _max_matching([[p is None for p in cells] for cells in problems])
    matched = sum(m is not None for m in matching)
    if matched == expected:
        return CheckResult(None, matched, expected)
    row = matching.index(None)
    free = [col for col in range(width) if col not in matching]
    candidates = [problems[row][col] for col in free]
    best = next((p for p in candidates if p is not None and p.label != "wrong_function"), None)
    best = best or next((p for p in candidates if p is not None), None)
    reason = f"no call matches gold call {row} ({gold[row].name})" + (f": {best.explain()}" if best else "")
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
            GRADER,
            components={"correctness": 0.0, "tool_format": 0.0, "calls_matched": 0.0},
            label="too_long",
            details=details,
            weights=config.weights,
            required=config.required,
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
        GRADER, components=components, label=label, details=details, weights=config.weights, required=config.required
    )


#: ``canonical_json``'s text from one encoder made once: ``json.dumps`` with options builds
#: a new encoder on every call, and the key encodes every call of every reply graded.
_canonical_json = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def answer_key(calls: Sequence[ToolCall]) -> str:
    """What maj@k votes with: the calls as canonical JSON, in a fixed order (parallel calls
    match in any order, so two replies that differ only in order vote alike)."""
    return _canonical_json(sorted(_canonical_json([call.name, as_json_data(call.arguments)]) for call in calls))


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
