"""The one episode record type, and its twin for episodes that were not scored.

Envs do not build these (their ``info`` must stay free of timings to be frozen); the
runner does, adding what only it can see: agent traces, seeds it handed out and
wall-clock times. Replay and regrade read the same records back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import orjson

from frostgym.core.messages import Action, Message, Observation, clean_text

#: An action is stored whole in the episode record up to this many characters (its JSON
#: text, for a structured action): the longest reply a well-behaved policy emits
#: (``TextActionSpace.max_chars``). A longer one is stored as its first
#: ``STORED_ACTION_PREFIX`` characters with its length and sha256 (``StepRecord.action_stored``),
#: so a 50 MB reply does not make a 100 MB card; replay and regrade list such an episode as
#: not replayable rather than play a prefix.
STORED_ACTION_CHARS = 1_000_000
#: How much of an over-long action the record keeps: what the env's own history keeps.
STORED_ACTION_PREFIX = 20_000

#: Why an episode was not scored normally. Closed: views and tests rely on the list.
DropClass = Literal[
    "agent_error",  # the policy raised or returned an error instead of an action
    "grader_error",  # the grader raised (our bug, not the agent's)
    "infra_error",  # env construction or an unexpected env exception
    "sandbox_timeout",  # untrusted code hit its time limit
    "sandbox_oom",  # untrusted code hit its memory limit
    "replay_miss",  # a replay agent had no recorded action for this step
    "skipped",  # the runner chose not to run it (e.g. dropped in the card being regraded)
    "cancelled",  # the run was stopped on purpose (``max_drops``) before this episode ran
]
DROP_CLASSES: tuple[DropClass, ...] = (
    "agent_error",
    "grader_error",
    "infra_error",
    "sandbox_timeout",
    "sandbox_oom",
    "replay_miss",
    "skipped",
    "cancelled",
)
CountedAs = Literal["failure", "excluded"]
#: How the ``errors_as_failures`` views count each drop: every error is a failed
#: sample (the pessimistic bound); episodes that never ran are left out. The
#: ``errors_excluded`` views leave every drop out.
COUNTED_AS: dict[DropClass, CountedAs] = {
    name: ("excluded" if name in ("skipped", "cancelled") else "failure") for name in DROP_CLASSES
}
#: Classes worth another attempt from reset: the others are deterministic, so a retry
#: would fail the same way.
RETRYABLE: frozenset[DropClass] = frozenset({"agent_error", "infra_error"})
Stage = Literal["env", "reset", "agent", "step", "grade", "runner"]


@dataclass
class ObservationDelta:
    """The observation after a step as an edit of the one before it: keep the first
    ``keep`` messages, then append ``new``. Conversations grow by appending, so this
    stores each message once instead of the whole history at every step."""

    keep: int
    new: list[Message]

    @staticmethod
    def between(before: Observation, after: Observation) -> ObservationDelta:
        keep = 0
        for old, now in zip(before, after, strict=False):
            if old != now:
                break
            keep += 1
        return ObservationDelta(keep, list(after[keep:]))

    def apply(self, before: Observation) -> Observation:
        return [*before[: self.keep], *self.new]


@dataclass
class StepRecord:
    turn: int
    agent_seed: int  # the sampling seed handed to the agent for this call
    action: Action  # exactly what the agent returned, before any env coercion
    agent: dict[str, Any]  # prompt/completion tokens, finish reason, logprobs, ...
    tool_calls: list[dict[str, Any]]  # as the env parsed them from the action
    tool_results: list[dict[str, Any]]  # what each call returned
    grade: dict[str, Any] | None  # the final grade, or a graded intermediate turn
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]  # the env's info minus the fields above
    observation: ObservationDelta  # the observation after this step
    agent_seconds: float  # this episode's share of the batched agent call
    env_seconds: float
    #: None when ``action`` is exactly what the agent sent; else how it was stored
    #: (``stored_action``): its full length and sha256, and why the record differs.
    action_stored: dict[str, Any] | None = None


def stored_action(action: Action | bytes) -> tuple[Action, dict[str, Any] | None]:
    """``action`` as the episode record keeps it, and a note when that is not the action
    itself (``{"kind": "text" | "structured", ...}``):

    - text no JSON can hold (lone surrogates; bytes that are not UTF-8) is kept as the env
      read it, U+FFFD for each bad character, with ``"sanitized": true`` (replay then expects
      the env's ``action_sanitized``);
    - an action over ``STORED_ACTION_CHARS`` (its JSON text, when structured) keeps its first
      ``STORED_ACTION_PREFIX`` characters, with ``"chars"``, ``"sha256"`` and
      ``"prefix_chars"`` of the whole, so a record's size is bounded.
    """
    kept: Action
    if isinstance(action, (str, bytes)):
        text, sanitized = clean_text(action)
        kind, kept = "text", text
    else:
        text, sanitized = _json_text(action)
        kind = "structured"
        kept = json.loads(text) if sanitized else action
    note: dict[str, Any] = {"kind": kind, "sanitized": True} if sanitized else {}
    if len(text) <= STORED_ACTION_CHARS:
        return kept, note or None
    whole = text.encode("utf-8")
    return text[:STORED_ACTION_PREFIX], {
        "kind": kind,
        **note,
        "chars": len(text),
        "sha256": hashlib.sha256(whole).hexdigest(),
        "prefix_chars": STORED_ACTION_PREFIX,
    }


def _json_text(action: Any) -> tuple[str, bool]:
    """A structured action's JSON text, and whether lone surrogates in it were replaced
    ("" when no JSON can hold it: a cycle, absurd nesting; the card then drops the episode)."""
    try:
        return orjson.dumps(action, option=orjson.OPT_SORT_KEYS).decode("utf-8"), False
    except TypeError:  # lone surrogates, 64-bit overflow, deep nesting: the slow encoder
        try:
            raw = json.dumps(action, ensure_ascii=False, sort_keys=True, default=repr)
        except (TypeError, ValueError, RecursionError):
            return "", False
        return clean_text(raw)


def action_is_whole(step: Mapping[str, Any]) -> bool:
    """Whether a recorded step holds the action the agent sent, so replay can play it."""
    stored = step.get("action_stored")
    return stored is None or "chars" not in stored


#: ``info`` keys that ``FrozenEnv`` keeps constant through an episode: the episode
#: record holds them once, so step records leave them out.
EPISODE_INFO_KEYS = (
    "task_id",
    "episode_id",
    "env_version",
    "fixture_sha256",
    "task_sha256",
    "split",
    "difficulty",
    "tags",
)


def split_step_info(info: dict[str, Any]) -> tuple[dict[str, Any], list[Any], list[Any], dict[str, Any] | None]:
    """(rest of info, tool calls, tool results, grade) from an env's step ``info``: the
    one place that decides which info fields a step record lifts out or leaves out, for
    both the runner and replay."""
    rest = {k: v for k, v in info.items() if k not in EPISODE_INFO_KEYS}
    calls = rest.pop("tool_calls", [])
    results = rest.pop("tool_results", [])
    grade = rest.pop("grade", None)
    turn_grade = rest.pop("turn_grade", None)
    return rest, calls, results, grade if grade is not None else turn_grade


@dataclass
class EpisodeRecord:
    """A completed episode: the full trajectory and its grade."""

    plan_id: str
    episode_id: str
    env_id: str
    task_id: str
    sample: int
    split: str
    difficulty: str | None
    tags: list[str]
    seed: int  # the seed passed to env.reset
    seed_derivation: list[str | int]  # the derive_seed parts that gave ``seed``
    env_version: str
    fixture_sha256: str
    task_sha256: str
    observation: Observation  # at reset
    steps: list[StepRecord] = field(default_factory=list)
    reward: float = 0.0
    grade: dict[str, Any] | None = None
    attempts: int = 1
    started_at: float = 0.0  # unix time
    wall_seconds: float = 0.0


@dataclass
class DropRecord:
    """An episode that was not scored normally, with what is known of it: where it
    failed, why, the partial trajectory, and how views count it."""

    plan_id: str
    env_id: str
    task_id: str
    sample: int
    difficulty: str | None
    tags: list[str]
    seed: int
    seed_derivation: list[str | int]
    drop_class: DropClass
    counted_as: CountedAs
    stage: Stage
    error: str  # one line
    traceback: str | None
    attempts: int
    earlier_errors: list[str] = field(default_factory=list)  # one line per failed earlier attempt
    episode_id: str | None = None  # None when the episode never reset
    observation: Observation = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    started_at: float = 0.0
    wall_seconds: float = 0.0


class PlannedIdentity(Protocol):
    """What names one planned episode: a ``PlannedEpisode``, or a record of one."""

    @property
    def plan_id(self) -> str: ...
    @property
    def env_id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def sample(self) -> int: ...
    @property
    def difficulty(self) -> str | None: ...
    @property
    def tags(self) -> Sequence[str]: ...
    @property
    def seed(self) -> int: ...
    @property
    def seed_derivation(self) -> Sequence[str | int]: ...


def drop_record(
    planned: PlannedIdentity,
    drop_class: DropClass,
    stage: Stage,
    error: str,
    *,
    traceback: str | None = None,
    attempts: int = 1,
    **known: Any,
) -> DropRecord:
    """The drop of ``planned``: its identity, the class, stage and one-line error (cut to
    500 characters; the class names it when empty), and whatever else is known of it."""
    return DropRecord(
        plan_id=planned.plan_id,
        env_id=planned.env_id,
        task_id=planned.task_id,
        sample=planned.sample,
        difficulty=planned.difficulty,
        tags=list(planned.tags),
        seed=planned.seed,
        seed_derivation=list(planned.seed_derivation),
        drop_class=drop_class,
        counted_as=COUNTED_AS[drop_class],
        stage=stage,
        error=error.splitlines()[0][:500] if error else drop_class,
        traceback=traceback,
        attempts=attempts,
        **known,
    )


# -- reading records back --------------------------------------------------------------------
_STEP_KEYS = frozenset(
    {"turn", "agent_seed", "action", "agent", "tool_calls", "tool_results", "grade", "reward", "terminated"}
    | {"truncated", "info", "observation", "agent_seconds", "env_seconds"}
)
_GRADE_KEYS = frozenset(("score", "components", "weights", "required", "grader", "grader_version", "label"))
_COMMON_KEYS = frozenset(("plan_id", "env_id", "task_id", "sample", "difficulty", "tags", "seed", "steps"))
_EPISODE_KEYS = _COMMON_KEYS | {"episode_id", "split", "observation", "reward", "grade", "attempts", "wall_seconds"}
_DROP_KEYS = _COMMON_KEYS | {"drop_class", "counted_as", "stage", "error", "attempts", "observation"}


def record_problem(data: Any, kind: Literal["episode", "drop"]) -> str | None:
    """What makes ``data`` (one JSON line read back from a card) not an episode or drop
    record as the runner writes it, in words; None when it is one. Checks the fields the
    card's readers (views, resume, replay) rely on, so a hand-edited or foreign line is
    named on reading instead of surfacing later as a ``KeyError``."""
    if _plainly_a_record(data, kind):
        return None
    name = "an episode record" if kind == "episode" else "a drop record"
    if not isinstance(data, dict):
        return f"not {name} but a JSON {_json_type(data)}"
    missing = (_EPISODE_KEYS if kind == "episode" else _DROP_KEYS) - data.keys()
    if missing:
        return f"not {name}: no {', '.join(repr(k) for k in sorted(missing)[:4])}"
    for key in ("plan_id", "env_id", "task_id"):
        if not isinstance(data[key], str):
            return f"{key!r} is a JSON {_json_type(data[key])}, not a string"
    if kind == "drop" and data["drop_class"] not in DROP_CLASSES:
        return f"unknown drop class {data['drop_class']!r}"
    if kind == "episode" and (problem := _grade_problem(data["grade"], "grade")):
        return problem
    if not isinstance(data["steps"], list):
        return f"'steps' is a JSON {_json_type(data['steps'])}, not an array"
    for number, step in enumerate(data["steps"]):
        if not isinstance(step, dict):
            return f"step {number} is a JSON {_json_type(step)}, not an object"
        if missing := _STEP_KEYS - step.keys():
            return f"step {number} has no {', '.join(repr(k) for k in sorted(missing)[:4])}"
        if not isinstance(step["turn"], int) or not isinstance(step["info"], dict):
            return f"step {number}: 'turn' must be an integer and 'info' an object"
        if problem := _grade_problem(step["grade"], f"step {number} grade"):
            return problem
    return None


def _plainly_a_record(data: Any, kind: Literal["episode", "drop"]) -> bool:
    """The common case in a few C-level checks (a card's whole read-back pays for this
    once per line); anything unusual gets the full walk, which names the problem."""
    if type(data) is not dict or not data.keys() >= (_EPISODE_KEYS if kind == "episode" else _DROP_KEYS):
        return False
    steps = data["steps"]
    return (
        type(data["plan_id"]) is str
        and type(data["env_id"]) is str
        and type(data["task_id"]) is str
        and type(steps) is list
        and (kind == "drop" or _grade_problem(data["grade"], "") is None)
        and (kind == "episode" or data["drop_class"] in DROP_CLASSES)
        and all(type(step) is dict and step.keys() >= _STEP_KEYS and type(step["turn"]) is int for step in steps)
        and all(type(step["info"]) is dict and _grade_problem(step["grade"], "") is None for step in steps)
    )


def _grade_problem(grade: Any, where: str) -> str | None:
    if grade is None:
        return None
    if not isinstance(grade, dict):
        return f"{where} is a JSON {_json_type(grade)}, not an object"
    if missing := _GRADE_KEYS - grade.keys():
        return f"{where} has no {', '.join(repr(k) for k in sorted(missing)[:4])}"
    if not isinstance(grade["components"], dict) or not isinstance(grade["required"], list):
        return f"{where}: 'components' must be an object and 'required' an array"
    return None


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")
