"""BFCL single-turn categories, read from the installed ``bfcl-eval`` package at run time.

Nothing of BFCL is copied into this repository: the question files and possible answers
are read from the package's ``data/`` folder (found with ``importlib.util.find_spec``,
never by importing ``bfcl_eval``, whose modules pull API clients we do not install). The
fixture lock pins the content hash, so a different bfcl-eval build is refused rather than
silently scored. Every entry is a ``test`` task (the published benchmark), in
``CATEGORIES`` order, file order within each; ``frostgym.envs.tools.tasks`` serves them.

Also here, because the oracle, the tests and the benchmark all need them: the gold calls
(first allowed value of every non-optional argument), the deterministic near-miss calls
used to probe graders, and the Java/JavaScript literal text BFCL's prompt-format models
write for a value (what bfcl_eval's own checker expects for those languages).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from frostgym.core.errors import BFCLNotInstalledError, UnknownTaskError
from frostgym.core.splits import Split
from frostgym.core.tasks import Draft

PACKAGE = "bfcl_eval"
DISTRIBUTION = "bfcl-eval"
#: The version the fixture lock was made with (``frostgym/fixtures/tools/lock.json``).
PINNED_VERSION = "2026.3.23"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}=={PINNED_VERSION}"
SPLIT: Split = "test"

Language = Literal["python", "java", "javascript"]
#: The single-turn categories served, in task-index order.
CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
)
#: Categories whose correct answer is to call no function at all.
IRRELEVANCE: frozenset[str] = frozenset({"irrelevance", "live_irrelevance"})
_DIFFICULTY = {"simple": "easy", "multiple": "medium", "parallel": "medium", "parallel_multiple": "hard"}

#: Entries left out: no call can pass them under BFCL's rules (bfcl_eval's checker fails
#: every model on them), because their gold contradicts their own function doc.
UNSATISFIABLE: Mapping[str, str] = MappingProxyType(
    {
        "live_multiple_862-181-3": "the gold passes 'journey_start_time', which Trains_1_FindTrains does not have",
        "live_multiple_964-207-0": "the gold omits the required 'statement' and passes 'question', which the doc lacks",
    }
)

#: One gold call: ``{function name: {parameter: [allowed values...]}}`` ("" allowed = may be omitted).
PossibleCall = Mapping[str, Mapping[str, Sequence[Any]]]


@dataclass(frozen=True)
class BFCLEntry:
    """One BFCL question: the conversation, the function docs offered, and the gold calls
    (``None`` for irrelevance categories, where the right answer is no call)."""

    id: str
    category: str
    language: Language
    messages: tuple[dict[str, Any], ...]
    functions: tuple[dict[str, Any], ...]
    possible_answer: tuple[dict[str, dict[str, list[Any]]], ...] | None

    @property
    def relevant(self) -> bool:
        return self.possible_answer is not None


def data_dir() -> Path:
    """The installed package's ``data`` folder, or a ``BFCLNotInstalledError`` that says
    how to install it (without its dependencies, which would wreck the environment)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BFCLNotInstalledError(f"the BFCL tasks need the {DISTRIBUTION} package: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not path.is_dir():
        raise BFCLNotInstalledError(f"{DISTRIBUTION} is installed without its data folder ({path}): {INSTALL_HINT}")
    return path


def installed_version() -> str:
    """The installed bfcl-eval version (``PINNED_VERSION`` is the one the lock expects)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise BFCLNotInstalledError(f"the BFCL tasks need the {DISTRIBUTION} package: {INSTALL_HINT}") from None


def language_of(category: str) -> Language:
    return "java" if category.endswith("_java") else "javascript" if category.endswith("_javascript") else "python"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BFCLNotInstalledError(f"missing BFCL data file {path}: {INSTALL_HINT}") from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@cache
def load_category(category: str) -> tuple[BFCLEntry, ...]:
    """Every entry of one served category, in file order (cached per process)."""
    if category not in CATEGORIES:
        raise UnknownTaskError(f"unknown BFCL category {category!r}; served: {', '.join(CATEGORIES)}")
    root = data_dir()
    questions = _read_jsonl(root / f"BFCL_v4_{category}.json")
    answers: list[dict[str, Any]] | None = None
    if category not in IRRELEVANCE:
        answers = _read_jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")
        if [q["id"] for q in questions] != [a["id"] for a in answers]:
            raise RuntimeError(f"BFCL {category}: questions and possible answers are not in the same order")
    entries = []
    for i, question in enumerate(questions):
        if question["id"] in UNSATISFIABLE:
            continue
        gold = tuple(answers[i]["ground_truth"]) if answers is not None else None
        entries.append(
            BFCLEntry(
                id=question["id"],
                category=category,
                language=language_of(category),
                messages=tuple(m for turn in question["question"] for m in turn),
                functions=tuple(question["function"]),
                possible_answer=gold,
            )
        )
    return tuple(entries)


def load_entries(categories: Sequence[str] | None = None) -> tuple[BFCLEntry, ...]:
    """Entries of ``categories`` (all served ones by default), in ``CATEGORIES`` order."""
    chosen = check_categories(categories)
    return tuple(entry for category in chosen for entry in load_category(category))


def check_categories(categories: str | Sequence[str] | None) -> tuple[str, ...]:
    """The served categories named (a name, several, or ``None`` for all), in index order."""
    if categories is None:
        return CATEGORIES
    names = {categories} if isinstance(categories, str) else set(categories)
    unknown = sorted(names - set(CATEGORIES))
    if unknown or not names:
        raise UnknownTaskError(f"unknown BFCL categories {unknown}; served: {', '.join(CATEGORIES)}")
    return tuple(c for c in CATEGORIES if c in names)


# -- gold calls --------------------------------------------------------------------------


def first_allowed(allowed: Sequence[Any]) -> Any:
    """The first allowed value that is not the "may be omitted" marker."""
    for value in allowed:
        if value != "":
            return value
    raise ValueError("only the omitted marker is allowed")


def _pick_nested(value: Any) -> Any:
    """Gold dict values are themselves ``{key: [allowed...]}``; pick one value per key."""
    if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
        return {k: first_allowed(v) for k, v in value.items() if "" not in v}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_pick_nested(v) for v in value]
    return value


def param_schema(function: Mapping[str, Any], param: str) -> Mapping[str, Any]:
    properties: Mapping[str, Any] = function.get("parameters", {}).get("properties", {})
    schema: Mapping[str, Any] = properties.get(param, {})
    return schema


def find_function(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    for function in functions:
        if function.get("name") == name:
            return function
    return None


def gold_calls(entry: BFCLEntry) -> list[tuple[str, dict[str, Any]]]:
    """One correct set of calls: every parameter that may not be omitted, with its first
    allowed value (nested dicts likewise). Empty for irrelevance entries."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for gold in entry.possible_answer or ():
        ((name, params),) = gold.items()
        function = find_function(entry.functions, name) or {}
        required = set(function.get("parameters", {}).get("required", []))
        arguments: dict[str, Any] = {}
        for param, allowed in params.items():
            if "" in allowed and param not in required:
                continue
            nested = param_schema(function, param).get("type") in ("dict", "HashMap", "array", "Array", "ArrayList")
            # A required argument whose only allowed value is "" takes the empty string; an
            # empty allowed list (two live_simple array arguments) the empty array.
            value = first_allowed(allowed) if any(v != "" for v in allowed) else "" if allowed else []
            arguments[param] = _pick_nested(value) if nested else value
        calls.append((name, arguments))
    return calls


# -- Java / JavaScript literals -----------------------------------------------------------------


def java_literal(value: Any, java_type: str, item_type: str | None = None) -> str:
    """``value`` written as the Java source text BFCL's Java prompt expects."""
    if isinstance(value, str) and java_type not in ("Array", "ArrayList", "HashMap"):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if java_type == "long" and isinstance(value, int):
        return f"{value}L"
    if java_type == "float" and isinstance(value, (int, float)):
        return f"{float(value)!r}f"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list) and java_type in ("Array", "ArrayList"):
        # bfcl_eval keeps the quotes of a string in ``new String[]{...}`` (so it would fail
        # ``"a"``) but strips them in an ArrayList: write each the way it reads back.
        quote = java_type == "ArrayList"
        items = ", ".join(_java_item(v, item_type) if quote or not isinstance(v, str) else v for v in value)
        if java_type == "ArrayList":
            return f"new ArrayList<>(Arrays.asList({items}))" if value else "new ArrayList<>()"
        return f"new {_JAVA_ARRAY_TYPE.get(item_type or '', 'Object')}[]{{{items}}}"
    if isinstance(value, dict) and java_type == "HashMap":
        puts = " ".join(f'put("{k}", {_java_item(v, None)});' for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}" if value else "new HashMap<>()"
    return str(value)


_JAVA_ARRAY_TYPE = {"String": "String", "integer": "int", "long": "long", "double": "double", "char": "char"}


def _java_item(value: Any, item_type: str | None) -> str:
    if isinstance(value, str):
        return f"'{value}'" if item_type == "char" else f'"{value}"'
    return java_literal(value, item_type or "any")


def js_literal(value: Any, js_type: str) -> str:
    """``value`` written as the JavaScript source text BFCL's JavaScript prompt expects."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"{value}n" if js_type == "Bigint" else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_js_item(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {_js_item(v)}' for k, v in value.items()) + "}"
    return str(value)


def _js_item(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else js_literal(value, "any")


def as_source_literals(entry: BFCLEntry, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """``calls`` with Java/JavaScript values written as source text (BFCL's form for those
    languages); Python calls unchanged."""
    if entry.language == "python":
        return calls
    out = []
    for name, arguments in calls:
        function = find_function(entry.functions, name) or {}
        converted = {}
        for param, value in arguments.items():
            schema = param_schema(function, param)
            kind = str(schema.get("type", "any"))
            if entry.language == "java":
                item = schema.get("items", {}).get("type")
                converted[param] = java_literal(value, kind, item)
            else:
                converted[param] = js_literal(value, kind)
        out.append((name, converted))
    return out


# -- near misses ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Perturbation:
    """A gold answer changed in one place, and the label a grader must give it (``None``:
    the change keeps the answer right, e.g. calls reordered or a string's case changed)."""

    kind: str
    calls: list[tuple[str, dict[str, Any]]]
    label: str | None


#: The Python type of each declared BFCL type (all three languages), for picking a wrong one.
_DECLARED: Mapping[str, type] = MappingProxyType(
    {
        **dict.fromkeys(("string", "String", "any", "char"), str),
        **dict.fromkeys(("integer", "long", "short", "byte", "Bigint"), int),
        **dict.fromkeys(("float", "double", "number"), float),
        **dict.fromkeys(("boolean", "Boolean"), bool),
        **dict.fromkeys(("array", "tuple", "Array", "ArrayList"), list),
        **dict.fromkeys(("dict", "HashMap", "object"), dict),
    }
)
_WRONG_TYPED: tuple[Any, ...] = (12345, "frostgym", [1], {"frostgym": 1}, True)


def _different_type(value: Any, declared: str) -> Any:
    """A value whose type is neither the declared one nor the gold value's (which BFCL
    accepts as a variable reference); an int counts as a float."""
    taken = {type(value), _DECLARED.get(declared, str)}
    if float in taken:
        taken.add(int)
    return next(v for v in _WRONG_TYPED if type(v) not in taken)


def perturbations(entry: BFCLEntry, rng: random.Random) -> list[Perturbation]:
    """Single-change near misses of ``gold_calls(entry)``, one per kind where the entry
    allows it: drop a required argument, add an unknown one, change a value to one not
    allowed, change a value's type, rename the function, drop or duplicate a call.
    ``rng`` picks which call and argument (deterministic for a seeded ``rng``)."""
    gold = gold_calls(entry)
    if not gold:
        return []
    out: list[Perturbation] = []
    at = rng.randrange(len(gold))
    name, arguments = gold[at]
    function = find_function(entry.functions, name) or {}
    required = [p for p in function.get("parameters", {}).get("required", []) if p in arguments]

    def replaced(new_name: str, new_arguments: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [*gold[:at], (new_name, new_arguments), *gold[at + 1 :]]

    if required:
        dropped = rng.choice(required)
        out.append(
            Perturbation(
                "drop_required", replaced(name, {k: v for k, v in arguments.items() if k != dropped}), "missing_param"
            )
        )
    out.append(Perturbation("unknown_arg", replaced(name, {**arguments, "frostgym_extra": 1}), "unexpected_param"))
    if arguments:
        param = rng.choice(sorted(arguments))
        value = arguments[param]
        bad_value: Any = (
            "frostgym-not-allowed"
            if isinstance(value, str)
            else (not value)
            if isinstance(value, bool)
            else value + 987_654
            if isinstance(value, (int, float))
            else None
        )
        allowed = (entry.possible_answer or [{}])[at].get(name, {}).get(param, [])
        if bad_value is not None and bad_value not in allowed:
            out.append(Perturbation("wrong_value", replaced(name, {**arguments, param: bad_value}), "wrong_value"))
        declared = str(param_schema(function, param).get("type", "any"))
        wrong_typed = _different_type(value, declared)
        out.append(Perturbation("wrong_type", replaced(name, {**arguments, param: wrong_typed}), "wrong_type"))
    out.append(Perturbation("rename_function", replaced(name + "_x", arguments), "wrong_function"))
    # Changes that keep the answer right (label None): graders must still accept them.
    texts = sorted(
        p
        for p, v in arguments.items()
        if isinstance(v, str) and v.strip() and _DECLARED.get(str(param_schema(function, p).get("type"))) is str
    )
    if texts:
        param = rng.choice(texts)
        out.append(Perturbation("string_variant", replaced(name, {**arguments, param: arguments[param].upper()}), None))
    integral = sorted(p for p, v in arguments.items() if type(v) is float and v.is_integer() and abs(v) < 2**53)
    if integral and entry.language == "python":
        param = rng.choice(integral)
        out.append(Perturbation("int_for_float", replaced(name, {**arguments, param: int(arguments[param])}), None))
    if len(gold) > 1:
        out.append(Perturbation("reordered", gold[::-1], None))
    if len(gold) > 1:
        out.append(Perturbation("drop_call", gold[:at] + gold[at + 1 :], "wrong_count"))
    out.append(Perturbation("extra_call", [*gold, gold[at]], "wrong_count"))
    return out


# -- task drafts (the source that serves them: frostgym.envs.tools.tasks) -----------------------


def _prompt(entry: BFCLEntry) -> str:
    return "\n\n".join(f"[{m['role']}] {m['content']}" for m in entry.messages)


def _difficulty(category: str) -> str:
    if category in IRRELEVANCE:
        return "medium"
    kind = category.removeprefix("live_")
    return _DIFFICULTY.get("simple" if kind.startswith("simple") else kind, "medium")


def draft_of(entry: BFCLEntry) -> Draft:
    """One entry as a task draft: its messages as the prompt, the gold calls as the answer,
    everything the env and grader need in the metadata."""
    gold = [{"name": n, "arguments": a} for n, a in gold_calls(entry)]
    return Draft(
        prompt=_prompt(entry),
        answer=json.dumps(gold, sort_keys=True, ensure_ascii=False),
        metadata={
            "bfcl_id": entry.id,
            "category": entry.category,
            "language": entry.language,
            "messages": [dict(m) for m in entry.messages],
            "functions": [dict(f) for f in entry.functions],
            "possible_answer": None if entry.possible_answer is None else [dict(g) for g in entry.possible_answer],
        },
        difficulty=_difficulty(entry.category),
        tags=("tools", "bfcl", entry.category, entry.language),
    )
