"""BFCL multi-turn episodes, executed against BFCL's own stateful tool classes.

Data (the four ``multi_turn_*`` categories, their gold call sequences and the function
docs) is read at run time from the installed ``bfcl-eval`` package; nothing is copied
into this repository, and the fixture lock pins its content hash.

Execution follows BFCL's checker (``multi_turn_utils`` / ``multi_turn_checker``): each
involved class is instantiated and loaded with ``_load_scenario(initial_config[class],
long_context=...)`` (MathAPI is stateless and never loaded), a call runs as a method call
with keyword arguments, and the comparable state of an instance is its public attributes.
What we do differently, and why:

- **Isolation.** BFCL keeps instances in module globals and lets long-context instances
  alias dicts of ``long_context.py``, so one run can leak into the next. We load each
  ``func_source_code`` module privately (a fresh module object per process, with its own
  deep copies of the long-context constants), and deep-copy every instance after loading,
  so each episode owns all of its state.
- **Determinism.** The classes draw ids from ``random.Random(scenario["random_seed"])``
  held on the instance (no module-level ``random`` anywhere), so a fresh instance replays
  the same ids. Wall-clock reads are frozen in our private module copies only:
  ``TravelAPI.verify_traveler_information`` computes ages from ``datetime.today()`` and
  ``TradingBot`` turns naive datetimes into POSIX timestamps with the machine's time
  zone; both see ``FrozenDatetime`` (today is TradingBot's own ``CURRENT_TIME``,
  2024-09-01 10:30, and naive times are UTC). BFCL's own modules are left untouched.
  ``MathAPI`` sets ``mpmath.mp.dps`` and the decimal precision process-wide; we run it
  inside ``decimal.localcontext()`` and ``mpmath.workdps`` so nothing leaks.
- **Safety.** Only the functions of the involved classes can be called (as in BFCL,
  also one a miss_func entry holds back: BFCL runs every public method, and one gold
  answer, ``multi_turn_miss_func_49``, calls ``tail`` two turns before it is offered);
  argument names are checked against the function doc (value types are left to the
  method, as in BFCL); every exception becomes an error result; precision and
  integer-power arguments that would run for minutes are refused. Results are text
  (strings as returned, anything else sorted-key JSON), so gold and agent results
  compare as BFCL compares them: equal values, equal text.
"""

from __future__ import annotations

import ast
import copy
import decimal
import importlib.util
import inspect
import json
import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from functools import cache
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

from frostgym.core.errors import UnknownTaskError
from frostgym.core.splits import Split
from frostgym.core.tasks import Draft, Task
from frostgym.tools.calls import ToolCall, as_json_data, parse_reply
from frostgym.tools.schemas import bfcl_tool

PACKAGE = "bfcl_eval"
CATEGORIES: tuple[str, ...] = ("base", "miss_func", "miss_param", "long_context")
SPLIT: Split = "test"
SOURCE_NAME = "bfcl_mt"
#: Every multi-turn task's tags, before its category.
TAGS: tuple[str, ...] = ("tools", "multi_turn", "bfcl")
#: The class name -> (module in ``func_source_code``, function doc file), as BFCL maps them.
CLASSES: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
        "MathAPI": ("math_api", "math_api.json"),
        "MessageAPI": ("message_api", "message_api.json"),
        "TwitterAPI": ("posting_api", "posting_api.json"),
        "TicketAPI": ("ticket_api", "ticket_api.json"),
        "TradingBot": ("trading_bot", "trading_bot.json"),
        "TravelAPI": ("travel_booking", "travel_booking.json"),
        "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
    }
)
STATELESS_CLASSES = frozenset({"MathAPI"})
#: What BFCL tells the model at a turn where held-out functions are added (miss_func).
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
#: Bounds that keep one call fast and one result readable.
MAX_RESULT_CHARS = 200_000
MAX_PRECISION = 1_000
MAX_POWER_BITS = 1_000_000
MAX_STATE_DEPTH = 200
_FROZEN_NOW = (2024, 9, 1, 10, 30)  # TradingBot.CURRENT_TIME


# -- data -------------------------------------------------------------------------------


def package_dir() -> Path:
    """The installed ``bfcl_eval`` folder, found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UnknownTaskError(
            "BFCL multi-turn needs the 'bfcl-eval' package (pip install --no-deps bfcl-eval==2026.3.23)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class MultiTurnEntry:
    """One BFCL multi-turn test entry with its gold answer, as plain data.

    ``turns[t]`` is the user messages of turn ``t`` as (role, content) pairs; it is empty
    at a miss_func turn where held-out functions come back (``missed_functions[t]``).
    ``gold[t]`` is the gold python call strings of turn ``t``; an empty turn is one the
    model should decline (miss_param / miss_func), which BFCL does not check.
    """

    bfcl_id: str
    category: str
    number: int
    turns: tuple[tuple[tuple[str, str], ...], ...]
    initial_config: Mapping[str, Any]
    involved_classes: tuple[str, ...]
    path: tuple[str, ...]
    missed_functions: Mapping[int, tuple[str, ...]]
    excluded_functions: tuple[str, ...]
    gold: tuple[tuple[str, ...], ...]

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category

    def held_out(self, turn: int) -> frozenset[str]:
        """Functions not yet offered at ``turn`` (they come back at their turn)."""
        return frozenset(n for t, names in self.missed_functions.items() if t > turn for n in names)

    def offered(self, turn: int) -> tuple[str, ...]:
        """Names of the functions the model can call at ``turn``, in doc order."""
        hidden = self.held_out(turn)
        return tuple(d["name"] for c in self.involved_classes for d in function_docs(c) if d["name"] not in hidden)


@cache
def function_docs(class_name: str) -> tuple[Mapping[str, Any], ...]:
    """BFCL's function docs of one class (its JSON lines), in file order."""
    if class_name not in CLASSES:
        raise UnknownTaskError(f"unknown BFCL class {class_name!r}")
    path = package_dir() / "data" / "multi_turn_func_doc" / CLASSES[class_name][1]
    return tuple(MappingProxyType(d) for d in _read_jsonl(path))


@cache
def _doc_index() -> Mapping[str, tuple[str, Mapping[str, Any]]]:
    """Function name -> (class name, doc); BFCL's names are unique across classes."""
    return MappingProxyType({d["name"]: (c, d) for c in CLASSES for d in function_docs(c)})


@cache
def load_entries(category: str) -> tuple[MultiTurnEntry, ...]:
    """The entries of one category with their gold answers, in file order (cached)."""
    if category not in CATEGORIES:
        raise UnknownTaskError(f"unknown BFCL multi-turn category {category!r}; expected one of {CATEGORIES}")
    data = package_dir() / "data"
    rows = _read_jsonl(data / f"BFCL_v4_multi_turn_{category}.json")
    answers = {
        a["id"]: a["ground_truth"]
        for a in _read_jsonl(data / "possible_answer" / f"BFCL_v4_multi_turn_{category}.json")
    }
    entries = []
    for row in rows:
        gold = answers[row["id"]]
        if len(gold) != len(row["question"]):
            raise ValueError(f"{row['id']}: {len(gold)} gold turns for {len(row['question'])} user turns")
        entries.append(
            MultiTurnEntry(
                bfcl_id=row["id"],
                category=category,
                number=int(row["id"].rsplit("_", 1)[1]),
                turns=tuple(tuple((m["role"], m["content"]) for m in turn) for turn in row["question"]),
                initial_config=row.get("initial_config", {}),
                involved_classes=tuple(row["involved_classes"]),
                path=tuple(row.get("path", ())),
                missed_functions=MappingProxyType(
                    {int(t): tuple(names) for t, names in row.get("missed_function", {}).items()}
                ),
                excluded_functions=tuple(row.get("excluded_function", ())),
                gold=tuple(tuple(turn) for turn in gold),
            )
        )
    return tuple(entries)


@cache
def entry_by_id(bfcl_id: str) -> MultiTurnEntry:
    category = bfcl_id.removeprefix("multi_turn_").rsplit("_", 1)[0]
    for entry in load_entries(category):
        if entry.bfcl_id == bfcl_id:
            return entry
    raise UnknownTaskError(f"no BFCL multi-turn entry {bfcl_id!r}")


def tools_for(names: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """OpenAI function tools (``frostgym.tools.schemas.bfcl_tool``) of the named functions."""
    index = _doc_index()
    return [bfcl_tool(index[name][1]) for name in names]


# -- gold calls ---------------------------------------------------------------------------


@cache
def _parameter_names(name: str) -> tuple[str, ...]:
    """Parameter order of a function, from the class method itself (BFCL's gold uses a
    few positional arguments, e.g. ``sort('final_report.pdf')``)."""
    class_name, _ = _doc_index()[name]
    method = getattr(_class(class_name), name)
    return tuple(p for p in inspect.signature(method).parameters if p != "self")


def _keyword_form(call_text: str) -> str:
    """The gold call with positional arguments named, so the shared parser reads it."""
    node = ast.parse(call_text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.func, ast.Name):
        return call_text
    names = _parameter_names(node.func.id)
    keywords = [ast.keyword(arg=names[i], value=arg) for i, arg in enumerate(node.args)]
    return ast.unparse(ast.Call(func=node.func, args=[], keywords=keywords + list(node.keywords)))


@cache
def gold_calls(bfcl_id: str, turn: int) -> tuple[ToolCall, ...]:
    """The gold calls of one turn, read by the shared parser (a task-data bug raises)."""
    calls: list[ToolCall] = []
    for text in entry_by_id(bfcl_id).gold[turn]:
        parsed = parse_reply(_keyword_form(text))
        if parsed.problems or len(parsed.calls) != 1:
            raise ValueError(f"{bfcl_id} turn {turn}: unreadable gold call {text!r}: {parsed.problems}")
        calls.append(parsed.calls[0])
    return tuple(calls)


# -- private, frozen copies of BFCL's tool modules -----------------------------------------


class FrozenDatetime(datetime):
    """``datetime`` whose clock is TradingBot's ``CURRENT_TIME`` and whose naive times are
    UTC, so results never depend on the day or the machine's time zone."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> FrozenDatetime:
        frozen = cls(*_FROZEN_NOW)
        return frozen if tz is None else frozen.replace(tzinfo=UTC).astimezone(tz)

    @classmethod
    def today(cls) -> FrozenDatetime:
        return cls.now()

    def timestamp(self) -> float:
        if self.tzinfo is None:
            return self.replace(tzinfo=UTC).timestamp()
        return super().timestamp()

    @classmethod
    def fromtimestamp(cls, t: float, tz: tzinfo | None = None) -> FrozenDatetime:
        if tz is not None:
            return super().fromtimestamp(t, tz)
        aware = datetime.fromtimestamp(t, UTC)
        return cls(*aware.timetuple()[:6], aware.microsecond)


_module_lock = threading.Lock()
_modules: dict[str, ModuleType] = {}


def _private_module(module_name: str) -> ModuleType:
    """A fresh copy of one ``func_source_code`` module (not in ``sys.modules``), with its
    own copies of the long-context constants and a frozen clock."""
    with _module_lock:
        module = _modules.get(module_name)
        if module is not None:
            return module
        path = package_dir() / "eval_checker" / "multi_turn_eval" / "func_source_code" / f"{module_name}.py"
        spec = importlib.util.spec_from_file_location(f"frostgym_bfcl_private.{module_name}", path)
        if spec is None or spec.loader is None:
            raise UnknownTaskError(f"cannot load BFCL tool module {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, value in list(vars(module).items()):
            if name.isupper() and isinstance(value, (dict, list)):
                setattr(module, name, copy.deepcopy(value))
        if isinstance(getattr(module, "datetime", None), type):  # `from datetime import datetime`
            setattr(module, "datetime", FrozenDatetime)  # noqa: B010 (a module attribute mypy cannot see)
        current = getattr(module, "CURRENT_TIME", None)
        if isinstance(current, datetime):
            setattr(module, "CURRENT_TIME", FrozenDatetime(*current.timetuple()[:6]))  # noqa: B010
        _modules[module_name] = module
        return module


def _class(class_name: str) -> type:
    cls = getattr(_private_module(CLASSES[class_name][0]), class_name)
    assert isinstance(cls, type)
    return cls


# -- execution --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallOutcome:
    """One executed call: ``text`` is the canonical result (what the response check
    compares), ``ok`` is False for errors (ours or the method's exception)."""

    name: str
    arguments: Mapping[str, Any]
    text: str
    ok: bool

    def shown(self, limit: int) -> str:
        if len(self.text) <= limit:
            return self.text
        return self.text[:limit] + f"\n[frostgym: result truncated from {len(self.text):,} characters]"


def _error(call: ToolCall, message: str) -> CallOutcome:
    return CallOutcome(call.name, as_json_data(call.arguments), f"Error during execution: {message}"[:2_000], False)


def result_text(result: Any) -> str:
    """A method's return value as text, as BFCL records it: strings as they are, other
    values as (sorted-key) JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(public_state(result), ensure_ascii=False, sort_keys=True)


def public_state(value: Any, depth: int = 0, _stack: tuple[int, ...] = ()) -> Any:
    """A tool world's value (an instance's state, a method's result) as JSON-safe data:
    objects become their public attributes (a reference back to an enclosing object
    becomes ``{"__ref__": class}``), tuples and sets lists, anything else its ``repr``.
    Nesting deeper than ``MAX_STATE_DEPTH`` is cut. Call arguments, which hold no
    objects, are made JSON data by ``frostgym.tools.calls.as_json_data`` instead."""
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 10_000:
            return f"<int with {value.bit_length()} bits>"
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > MAX_STATE_DEPTH:
        return "<too deep>"
    if isinstance(value, Mapping):
        return {(k if isinstance(k, str) else repr(k)): public_state(v, depth + 1, _stack) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [public_state(v, depth + 1, _stack) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((public_state(v, depth + 1, _stack) for v in value), key=repr)
    if hasattr(value, "__dict__") and not callable(value):
        if id(value) in _stack:
            return {"__ref__": type(value).__name__}
        inner = (*_stack, id(value))
        attrs = {k: public_state(v, depth + 1, inner) for k, v in vars(value).items() if not k.startswith("_")}
        return {"__class__": type(value).__name__, **attrs}
    return repr(value)


def argument_problem(doc: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with the argument names for the documented function, or ``None``.

    Value types are left to the method, as in BFCL: a few gold calls pass a string where
    the doc says integer, and the method's own behaviour is the reference."""
    params = doc.get("parameters", {})
    properties: Mapping[str, Any] = params.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        takes = ", ".join(sorted(properties)) or "no arguments"
        return f"{doc['name']}() got unexpected argument(s) {', '.join(map(repr, unknown))}; it takes {takes}"
    missing = [name for name in params.get("required", []) if name not in arguments]
    if missing:
        return f"{doc['name']}() is missing required argument(s) {', '.join(map(repr, missing))}"
    return None


def _math_guard(name: str, arguments: Mapping[str, Any]) -> str | None:
    """Refuse MathAPI arguments that would compute for minutes (huge precision, huge powers)."""
    precision = arguments.get("precision")
    if isinstance(precision, int) and precision > MAX_PRECISION:
        return f"precision above {MAX_PRECISION} is not supported"
    if name == "power":
        base, exponent = arguments.get("base"), arguments.get("exponent")
        if (
            isinstance(base, int)
            and isinstance(exponent, int)
            and abs(exponent) * max(1, abs(base).bit_length()) > MAX_POWER_BITS
            and abs(base) > 1
        ):
            return "the result would be too large"
    return None


@contextmanager
def _contained_math() -> Iterator[None]:
    """MathAPI sets the decimal precision and ``mpmath.mp.dps`` globally; keep both local."""
    math_api = _private_module(CLASSES["MathAPI"][0])
    mpmath = math_api.mpmath
    with decimal.localcontext(), mpmath.workdps(mpmath.mp.dps):
        yield


class ToolWorld:
    """The instances of one episode's involved classes: fresh, isolated, deterministic."""

    def __init__(self, entry: MultiTurnEntry) -> None:
        self.entry = entry
        self.instances: dict[str, Any] = {}
        for class_name in entry.involved_classes:
            instance = _class(class_name)()
            if class_name not in STATELESS_CLASSES:
                config = copy.deepcopy(dict(entry.initial_config).get(class_name, {}))
                instance._load_scenario(config, long_context=entry.long_context)
            # Break any aliasing of module-level data (long-context extensions) for good.
            self.instances[class_name] = copy.deepcopy(instance)
        self._owner = {d["name"]: c for c in entry.involved_classes for d in function_docs(c)}

    def execute(self, call: ToolCall, offered: frozenset[str] | None = None) -> CallOutcome:
        """Run one call; every failure is an error result, never an exception."""
        class_name = self._owner.get(call.name)
        if class_name is None or (offered is not None and call.name not in offered):
            return _error(call, f"unknown function {call.name[:100]!r}; call one of the functions you were given")
        doc = _doc_index()[call.name][1]
        problem = argument_problem(doc, call.arguments)
        if problem is None and class_name == "MathAPI":
            problem = _math_guard(call.name, call.arguments)
        if problem is not None:
            return _error(call, problem)
        method = getattr(self.instances[class_name], call.name)
        try:
            arguments = copy.deepcopy(dict(call.arguments))  # the state must not alias the action
            if class_name == "MathAPI":
                with _contained_math():
                    result = method(**arguments)
            else:
                result = method(**arguments)
            text = result_text(result)
        except Exception as error:  # the tool's own bug or a bad value: the agent sees it
            return _error(call, f"{type(error).__name__}: {error}")
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + f"[frostgym: result cut at {MAX_RESULT_CHARS:,} characters]"
        return CallOutcome(call.name, as_json_data(call.arguments), text, True)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return snapshot(self.instances)


def snapshot(instances: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The comparable state: each instance's public attributes as JSON-safe data (BFCL's
    state checker compares exactly these; private ones such as the current directory,
    the RNG or file timestamps are not state)."""
    return {
        name: {k: public_state(v) for k, v in vars(instance).items() if not k.startswith("_")}
        for name, instance in instances.items()
    }


def state_differences(agent: Mapping[str, Mapping[str, Any]], gold: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``Class.attribute`` names whose values differ (compared with ``==``, as BFCL does,
    so 10 equals 10.0)."""
    out: list[str] = []
    for class_name, attrs in gold.items():
        mine = agent.get(class_name, {})
        out.extend(f"{class_name}.{k}" for k, v in attrs.items() if mine.get(k, _MISSING) != v)
    return out


_MISSING = object()


@dataclass(frozen=True)
class GoldTurn:
    """The gold side of one turn: its calls, their results and the state after them."""

    calls: tuple[ToolCall, ...]
    results: tuple[str, ...]
    state: Mapping[str, Any] = field(repr=False)


@cache
def gold_trace(bfcl_id: str) -> tuple[GoldTurn, ...]:
    """Execute the gold calls turn by turn on their own world (cached per entry)."""
    entry = entry_by_id(bfcl_id)
    world = ToolWorld(entry)
    turns = []
    for turn in range(len(entry.turns)):
        calls = gold_calls(bfcl_id, turn)
        results = tuple(world.execute(call).text for call in calls)
        turns.append(GoldTurn(calls, results, MappingProxyType(world.snapshot())))
    return tuple(turns)


# -- task drafts (the source that serves them: frostgym.envs.tools.tasks) -----------------


def task_id_of(entry: MultiTurnEntry) -> str:
    """``bfcl_mt/<category>/test/<n>``: BFCL's category and number, then the split, so the
    id reads as ``source/split/index`` to everything else."""
    return f"{SOURCE_NAME}/{entry.category}/{SPLIT}/{entry.number}"


def draft_of(entry: MultiTurnEntry) -> Draft:
    """One entry as a task draft: its first user message as the prompt, the gold calls of
    every turn as the answer, what the env replays in the metadata."""
    first = next((content for turn in entry.turns for _, content in turn), "")
    return Draft(
        prompt=first,
        answer=json.dumps([list(turn) for turn in entry.gold], ensure_ascii=False),
        metadata={
            "bfcl_id": entry.bfcl_id,
            "category": entry.category,
            "turns": [[{"role": r, "content": c} for r, c in turn] for turn in entry.turns],
            "involved_classes": list(entry.involved_classes),
            "initial_config": entry.initial_config,
            "missed_function": {str(t): list(n) for t, n in entry.missed_functions.items()},
            "excluded_function": list(entry.excluded_functions),
        },
        difficulty="hard" if entry.long_context or len(entry.turns) > 5 else "medium",
        tags=(*TAGS, entry.category),
    )


def entry_for(task: Task) -> MultiTurnEntry:
    return entry_by_id(str(task.metadata["bfcl_id"]))


__all__ = [
    "CATEGORIES",
    "CallOutcome",
    "FrozenDatetime",
    "GoldTurn",
    "MultiTurnEntry",
    "ToolWorld",
    "draft_of",
    "entry_by_id",
    "entry_for",
    "function_docs",
    "gold_calls",
    "gold_trace",
    "load_entries",
    "package_dir",
    "public_state",
    "snapshot",
    "state_differences",
    "tools_for",
]
