"""The episode record types: a completed episode, a dropped one, the one shape of a drop,
and the head of either that accounting and score views read.

Envs do not build records (their ``info`` must stay free of timings to be frozen); the
runner does, adding what only it can see: agent traces, seeds it handed out and
wall-clock times. Replay, regrade and the card's views read the same records back, each
through one decoding function here that checks what its readers rely on (the rules are in
``record_problem`` and ``head_problem``, nowhere else) and builds the typed record.

Field order is part of how records are read back fast, not of what they mean: a record's
head (the fields ``RecordHead`` holds) comes first on its JSON line, and ``episode_id``
right after it, so ``head_from_line`` decodes the head alone without the trajectory.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

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
#: The most characters of a drop's one-line error that are kept.
DROP_ERROR_CHARS = 500

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
DROP_CLASSES: tuple[DropClass, ...] = get_args(DropClass)
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
#: Where an episode failed: building its env, resetting, the agent's call, the env's step,
#: grading, or the runner's own decision (skipped, cancelled, unwritable).
Stage = Literal["env", "reset", "agent", "step", "grade", "runner"]
STAGES: tuple[Stage, ...] = get_args(Stage)


@dataclass(frozen=True)
class Drop:
    """Why one episode was not scored normally: its class, the stage it failed at, and a
    one-line error. The one shape of a drop wherever it is declared (an env's ``Reply``, an
    agent's reply, a frostgym exception's ``drop_class``, the runner's own decisions) or
    recorded (``DropRecord``, a step's ``info["drop"]``).

    ``error`` is kept to its first line and ``DROP_ERROR_CHARS`` characters (the class's
    name when that leaves nothing). Raises ``ValueError`` for a class not in
    ``DROP_CLASSES`` or a stage not in ``STAGES``.
    """

    drop_class: DropClass
    stage: Stage
    error: str

    def __post_init__(self) -> None:
        if self.drop_class not in DROP_CLASSES:
            raise ValueError(f"unknown drop class {self.drop_class!r}; one of {list(DROP_CLASSES)}")
        if self.stage not in STAGES:
            raise ValueError(f"unknown drop stage {self.stage!r}; one of {list(STAGES)}")
        line = (self.error.splitlines() or [""])[0][:DROP_ERROR_CHARS] or self.drop_class
        if line != self.error:
            object.__setattr__(self, "error", line)

    @property
    def counted_as(self) -> CountedAs:
        """How the ``errors_as_failures`` views count it (``COUNTED_AS``)."""
        return COUNTED_AS[self.drop_class]

    def to_json(self) -> dict[str, str]:
        """As a step's ``info["drop"]`` carries it (and a drop record spells it)."""
        return {"drop_class": self.drop_class, "stage": self.stage, "error": self.error}

    @classmethod
    def from_json(cls, data: Any) -> Drop:
        """The drop ``to_json`` wrote. Raises ``ValueError`` naming what is wrong."""
        if problem := _drop_problem(data):
            raise ValueError(problem)
        return cls(data["drop_class"], data["stage"], data["error"])


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

    @property
    def action_is_whole(self) -> bool:
        """Whether ``action`` is the action the agent sent, so replay can play it (it is
        not when the card kept only a prefix of an over-long one)."""
        return self.action_stored is None or "chars" not in self.action_stored


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


@dataclass(kw_only=True)
class EpisodeRecord:
    """A completed episode: the full trajectory and its grade. The fields up to ``grade``
    are its head (``RecordHead``), written first on its line; keep them first."""

    plan_id: str
    env_id: str
    task_id: str
    sample: int
    difficulty: str | None
    tags: list[str]
    reward: float = 0.0
    grade: dict[str, Any] | None = None
    episode_id: str
    split: str
    seed: int  # the seed passed to env.reset
    seed_derivation: list[str | int]  # the derive_seed parts that gave ``seed``
    env_version: str
    fixture_sha256: str
    task_sha256: str
    attempts: int = 1
    started_at: float = 0.0  # unix time
    wall_seconds: float = 0.0
    observation: Observation  # at reset
    steps: list[StepRecord] = field(default_factory=list)

    def head(self) -> RecordHead:
        return RecordHead(
            self.plan_id, self.env_id, self.task_id, self.sample, self.difficulty, self.tags, self.reward, self.grade
        )

    @classmethod
    def from_json(cls, data: Any) -> EpisodeRecord:
        """The record one line of ``episodes.jsonl`` holds (``orjson.loads`` of it). Raises
        ``ValueError`` naming what makes it not an episode record (``record_problem``)."""
        if problem := record_problem(data, "episode"):
            raise ValueError(problem)
        plain = {name: data[name] for name in _EPISODE_PLAIN_FIELDS}
        record = cls(**plain, steps=[_step(step) for step in data["steps"]])
        ending = record.steps[-1] if record.steps else None
        if ending is not None and ending.grade is None and (ending.terminated or ending.truncated):
            ending.grade = record.grade  # stored once, on the episode (``encode``)
        return record

    def encode(self, dumps: Callable[[Any], bytes]) -> bytes:
        """This record as a line of ``episodes.jsonl``, encoded by ``dumps``, in the form a
        card stores it (``frostgym.card/3``), which ``from_json`` reads back to this record:
        the step that ended the episode holds no grade when its grade is the episode's own
        (the runner makes them one object): ``grade`` holds it.

        Why: it was stored twice, an eighth of a math record. A /3 delta may also say
        ``"echo": "assistant"`` for a first new message that repeated the step's action
        (``from_json`` reads it); cards are no longer written that way, because finding and
        restoring those steps cost the run's thread 1.6 us a record, most of what encoding
        one costs, for a tenth fewer bytes, which cost a thread of their own far less.
        The step is restored before this returns, whatever ``dumps`` raises."""
        ending = self.steps[-1] if self.steps else None
        if ending is None or ending.grade is None or ending.grade is not self.grade:
            return dumps(self)
        ending.grade = None
        try:
            return dumps(self)
        finally:
            ending.grade = self.grade


@dataclass(kw_only=True)
class DropRecord:
    """An episode that was not scored normally, with what is known of it: its ``drop``
    (class, stage, error), the partial trajectory, and how views count it. On disk
    (``to_json``) the drop's fields are spelled out after the head, as ``drop_class``,
    ``counted_as``, ``stage`` and ``error``."""

    plan_id: str
    env_id: str
    task_id: str
    sample: int
    difficulty: str | None
    tags: list[str]
    drop: Drop
    episode_id: str | None = None  # None when the episode never reset
    seed: int
    seed_derivation: list[str | int]
    traceback: str | None = None
    attempts: int = 1
    earlier_errors: list[str] = field(default_factory=list)  # one line per failed earlier attempt
    observation: Observation = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    started_at: float = 0.0
    wall_seconds: float = 0.0

    @property
    def counted_as(self) -> CountedAs:
        return self.drop.counted_as

    def head(self) -> RecordHead:
        return RecordHead(
            self.plan_id, self.env_id, self.task_id, self.sample, self.difficulty, self.tags, 0.0, None, self.drop
        )

    def to_json(self) -> dict[str, Any]:
        """The line ``drops.jsonl`` holds for it (steps stay dataclasses: orjson writes them)."""
        return {
            "plan_id": self.plan_id,
            "env_id": self.env_id,
            "task_id": self.task_id,
            "sample": self.sample,
            "difficulty": self.difficulty,
            "tags": self.tags,
            "drop_class": self.drop.drop_class,
            "counted_as": self.drop.counted_as,
            "stage": self.drop.stage,
            "error": self.drop.error,
            "episode_id": self.episode_id,
            "seed": self.seed,
            "seed_derivation": self.seed_derivation,
            "traceback": self.traceback,
            "attempts": self.attempts,
            "earlier_errors": self.earlier_errors,
            "observation": self.observation,
            "steps": self.steps,
            "started_at": self.started_at,
            "wall_seconds": self.wall_seconds,
        }

    @classmethod
    def from_json(cls, data: Any) -> DropRecord:
        """The record one line of ``drops.jsonl`` holds (``orjson.loads`` of it). Raises
        ``ValueError`` naming what makes it not a drop record (``record_problem``)."""
        if problem := record_problem(data, "drop"):
            raise ValueError(problem)
        plain = {name: data[name] for name in _DROP_PLAIN_FIELDS}
        drop = Drop(data["drop_class"], data["stage"], data["error"])
        return cls(**plain, drop=drop, steps=[_step(step) for step in data["steps"]])


#: The record fields a line holds as they are (read back by name, in one place each).
_EPISODE_PLAIN_FIELDS = tuple(name for name in EpisodeRecord.__dataclass_fields__ if name != "steps")
_DROP_PLAIN_FIELDS = tuple(name for name in DropRecord.__dataclass_fields__ if name not in ("drop", "steps"))


def _step(data: dict[str, Any]) -> StepRecord:
    """A step of a record ``record_problem`` has passed."""
    delta = data["observation"]
    return StepRecord(
        turn=data["turn"],
        agent_seed=data["agent_seed"],
        action=data["action"],
        agent=data["agent"],
        tool_calls=data["tool_calls"],
        tool_results=data["tool_results"],
        grade=data["grade"],
        reward=data["reward"],
        terminated=data["terminated"],
        truncated=data["truncated"],
        info=data["info"],
        observation=ObservationDelta(
            delta["keep"],
            [{"role": delta["echo"], "content": data["action"]}, *delta["new"]] if "echo" in delta else delta["new"],
        ),
        agent_seconds=data["agent_seconds"],
        env_seconds=data["env_seconds"],
        action_stored=data.get("action_stored"),
    )


Record = EpisodeRecord | DropRecord
RecordKind = Literal["episode", "drop"]


@dataclass(slots=True)
class RecordHead:
    """What accounting and the score views read of a record: which planned episode it is,
    the slices it falls in, and how it scored (``reward`` and ``grade`` of a completed
    episode; ``drop`` of a dropped one, which has reward 0 and no grade).

    A head is read, never changed (not frozen only because a frozen dataclass costs eight
    times as much to build, and a card's read-back builds one per line); ``tags`` and
    ``grade`` are the record's own objects, shared rather than copied.
    """

    plan_id: str
    env_id: str
    task_id: str
    sample: int
    difficulty: str | None
    tags: Sequence[str]
    reward: float = 0.0
    grade: Mapping[str, Any] | None = None
    drop: Drop | None = None

    @classmethod
    def from_json(cls, data: Any, kind: RecordKind) -> RecordHead:
        """The head of a record (``orjson.loads`` of a line, or only its first fields).
        Raises ``ValueError`` naming what makes it not the head of a ``kind`` record
        (``head_problem``)."""
        if problem := head_problem(data, kind):
            raise ValueError(problem)
        if kind == "episode":
            return cls(
                data["plan_id"],
                data["env_id"],
                data["task_id"],
                data["sample"],
                data["difficulty"],
                data["tags"],
                data["reward"],
                data["grade"],
            )
        drop = Drop(data["drop_class"], data["stage"], data["error"])
        return cls(
            data["plan_id"],
            data["env_id"],
            data["task_id"],
            data["sample"],
            data["difficulty"],
            data["tags"],
            drop=drop,
        )


#: Where a record's head ends on its line: ``episode_id`` is the first field after it.
_HEAD_END = b',"episode_id":'


def head_from_line(line: bytes, kind: RecordKind) -> RecordHead:
    """The head of the record on one JSON line of a card, decoding only the line's first
    fields when it is laid out as records are written (head first), else the whole line.
    Raises ``ValueError`` (``orjson.JSONDecodeError`` is one) for a line that is not JSON
    or not a ``kind`` record's head.

    The cut is safe on any line: ``,"episode_id":`` outside a string is a key, and when it
    is not the line's own top-level key, the prefix closed with one ``}`` is not JSON, so
    the whole line is decoded instead; a prefix that decodes is exactly the top-level fields
    before it."""
    end = line.find(_HEAD_END)
    if end > 0:
        try:
            return RecordHead.from_json(orjson.loads(line[:end] + b"}"), kind)
        except ValueError:
            pass  # not cut at the top level, or not laid out head first: read it whole
    return RecordHead.from_json(orjson.loads(line), kind)


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
    planned: PlannedIdentity, drop: Drop, *, traceback: str | None = None, attempts: int = 1, **known: Any
) -> DropRecord:
    """The drop of ``planned``: its identity, the drop, and whatever else is known of it
    (``DropRecord``'s other fields by name)."""
    return DropRecord(
        plan_id=planned.plan_id,
        env_id=planned.env_id,
        task_id=planned.task_id,
        sample=planned.sample,
        difficulty=planned.difficulty,
        tags=list(planned.tags),
        seed=planned.seed,
        seed_derivation=list(planned.seed_derivation),
        drop=drop,
        traceback=traceback,
        attempts=attempts,
        **known,
    )


# -- the rules records read back must meet ---------------------------------------------------
_HEAD_KEYS = frozenset(("plan_id", "env_id", "task_id", "sample", "difficulty", "tags"))
_SCORE_KEYS = _HEAD_KEYS | {"reward", "grade"}
_DROP_HEAD_KEYS = _HEAD_KEYS | {"drop_class", "counted_as", "stage", "error"}
_STEP_KEYS = frozenset(
    {"turn", "agent_seed", "action", "agent", "tool_calls", "tool_results", "grade", "reward", "terminated"}
    | {"truncated", "info", "observation", "agent_seconds", "env_seconds"}
)
_GRADE_KEYS = frozenset(("score", "components", "weights", "required", "grader", "grader_version", "label"))
_BODY_KEYS = frozenset(("episode_id", "seed", "seed_derivation", "attempts", "observation", "steps"))
_BODY_KEYS |= {"started_at", "wall_seconds"}
_EPISODE_KEYS = _SCORE_KEYS | _BODY_KEYS | {"split", "env_version", "fixture_sha256", "task_sha256"}
_DROP_KEYS = _DROP_HEAD_KEYS | _BODY_KEYS | {"traceback", "earlier_errors"}
_NUMBER = (int, float)
# The same as sets of exact types, for the fast paths (``bool`` is not an ``int`` here).
_NUMBERS: frozenset[type] = frozenset({int, float})
_TEXT: frozenset[type] = frozenset({str})
_TEXT_OR_NULL: frozenset[type] = frozenset({str, type(None)})


def head_problem(data: Any, kind: RecordKind) -> str | None:
    """What makes ``data`` not the head of an episode or drop record (``RecordHead``), in
    words; None when it is one. These are the rules accounting and the views rely on: names
    are strings, ``sample`` an integer >= 0, ``tags`` strings, an episode's ``reward`` a
    finite number and its grade a grade (required components present, components numbers,
    ``details.answer_key`` a string or null), a drop's class and stage known and its
    ``counted_as`` the one its class implies."""
    if _plainly_a_head(data, kind):
        return None
    name = "an episode record" if kind == "episode" else "a drop record"
    if not isinstance(data, dict):
        return f"not {name} but a JSON {_json_type(data)}"
    if missing := (_SCORE_KEYS if kind == "episode" else _DROP_HEAD_KEYS) - data.keys():
        return f"not {name}: no {', '.join(repr(k) for k in sorted(missing)[:4])}"
    for key in ("plan_id", "env_id", "task_id"):
        if not isinstance(data[key], str):
            return f"{key!r} is a JSON {_json_type(data[key])}, not a string"
    if type(data["sample"]) is not int or data["sample"] < 0:
        return f"'sample' must be an integer >= 0, not {data['sample']!r}"
    if data["difficulty"] is not None and not isinstance(data["difficulty"], str):
        return f"'difficulty' must be a string or null, not {data['difficulty']!r}"
    tags = data["tags"]
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        return f"'tags' must be an array of strings, not {_short(tags)}"
    if kind == "drop":
        problem = _drop_problem(data)
        if problem is None and data["counted_as"] != (implied := COUNTED_AS[data["drop_class"]]):
            return (
                f"'counted_as' is {_short(data['counted_as'])}, but a {data['drop_class']} drop counts as {implied!r}"
            )
        return problem
    reward = data["reward"]
    if isinstance(reward, bool) or not isinstance(reward, _NUMBER) or not math.isfinite(reward):
        return f"'reward' must be a finite number, not {_short(reward)}"
    return _grade_problem(data["grade"], "grade")


def record_problem(data: Any, kind: RecordKind) -> str | None:
    """What makes ``data`` (one JSON line read back from a card) not an episode or drop
    record as the runner writes it, in words; None when it is one. Checks the head
    (``head_problem``), that every field is there, and the steps replay and resume read, so a
    hand-edited or foreign line is named on reading instead of surfacing later as a
    ``KeyError``."""
    if _plainly_a_record(data, kind):
        return None
    if problem := head_problem(data, kind):
        return problem
    name = "an episode record" if kind == "episode" else "a drop record"
    if missing := (_EPISODE_KEYS if kind == "episode" else _DROP_KEYS) - data.keys():
        return f"not {name}: no {', '.join(repr(k) for k in sorted(missing)[:4])}"
    if not isinstance(data["observation"], list):
        return f"'observation' is a JSON {_json_type(data['observation'])}, not an array"
    if not isinstance(data["steps"], list):
        return f"'steps' is a JSON {_json_type(data['steps'])}, not an array"
    for number, step in enumerate(data["steps"]):
        if not isinstance(step, dict):
            return f"step {number} is a JSON {_json_type(step)}, not an object"
        if missing := _STEP_KEYS - step.keys():
            return f"step {number} has no {', '.join(repr(k) for k in sorted(missing)[:4])}"
        if not isinstance(step["turn"], int) or not isinstance(step["info"], dict):
            return f"step {number}: 'turn' must be an integer and 'info' an object"
        if not _plain_delta(step):
            return (
                f"step {number}: 'observation' must be an object with 'keep' (an integer) and 'new' (an array), "
                "and 'echo' only as \"assistant\" after a text action"
            )
        if problem := _grade_problem(step["grade"], f"step {number} grade"):
            return problem
    return None


def _plainly_a_head(data: Any, kind: RecordKind) -> bool:
    """The common case in a few C-level checks (a card's whole read-back pays for this
    once per line); anything unusual gets the full walk, which names the problem."""
    if type(data) is not dict:
        return False
    if kind == "episode":
        if not data.keys() >= _SCORE_KEYS:
            return False
        reward = data["reward"]
        if not ((type(reward) is float and math.isfinite(reward)) or type(reward) is int):
            return False
        grade = data["grade"]
        if grade is not None and not _plain_grade(grade):
            return False
    elif not (
        data.keys() >= _DROP_HEAD_KEYS
        and data["drop_class"] in DROP_CLASSES
        and data["stage"] in STAGES
        and type(data["error"]) is str
        and data["counted_as"] == COUNTED_AS[data["drop_class"]]
    ):
        return False
    sample = data["sample"]
    tags = data["tags"]
    return (
        type(data["plan_id"]) is str
        and type(data["env_id"]) is str
        and type(data["task_id"]) is str
        and type(sample) is int
        and sample >= 0
        and type(data["difficulty"]) in _TEXT_OR_NULL
        and type(tags) is list
        and set(map(type, tags)) <= _TEXT
    )


def _plainly_a_record(data: Any, kind: RecordKind) -> bool:
    if not _plainly_a_head(data, kind) or not data.keys() >= (_EPISODE_KEYS if kind == "episode" else _DROP_KEYS):
        return False
    steps = data["steps"]
    return (
        type(data["observation"]) is list
        and type(steps) is list
        and all(type(step) is dict and step.keys() >= _STEP_KEYS and type(step["turn"]) is int for step in steps)
        and all(type(step["info"]) is dict and _plain_delta(step) for step in steps)
        and all(step["grade"] is None or _plain_grade(step["grade"]) for step in steps)
    )


def _plain_delta(step: Mapping[str, Any]) -> bool:
    """A step's observation delta: ``keep`` and ``new``, and an ``echo`` only of a text action."""
    delta = step["observation"]
    return (
        type(delta) is dict
        and type(delta.get("keep")) is int
        and type(delta.get("new")) is list
        and ("echo" not in delta or (delta["echo"] == "assistant" and type(step["action"]) is str))
    )


def _plain_grade(grade: Any) -> bool:
    if type(grade) is not dict or not grade.keys() >= _GRADE_KEYS:
        return False
    components = grade["components"]
    required = grade["required"]
    details = grade.get("details")
    return (
        type(components) is dict
        and set(map(type, components.values())) <= _NUMBERS
        and type(required) is list
        and set(map(type, required)) <= _TEXT
        and components.keys() >= set(required)
        and type(grade["score"]) in _NUMBERS
        and type(grade["grader"]) is str
        and type(grade["grader_version"]) is str
        and (details is None or (type(details) is dict and type(details.get("answer_key")) in _TEXT_OR_NULL))
    )


def _grade_problem(grade: Any, where: str) -> str | None:
    if grade is None or _plain_grade(grade):
        return None
    if not isinstance(grade, dict):
        return f"{where} is a JSON {_json_type(grade)}, not an object"
    if missing := _GRADE_KEYS - grade.keys():
        return f"{where} has no {', '.join(repr(k) for k in sorted(missing)[:4])}"
    components, required = grade["components"], grade["required"]
    if not isinstance(components, dict) or not isinstance(required, list):
        return f"{where}: 'components' must be an object and 'required' an array"
    for name, value in components.items():
        if isinstance(value, bool) or not isinstance(value, _NUMBER):
            return f"{where}: component {name!r} is {_short(value)}, not a number"
    for name in required:
        if not isinstance(name, str) or name not in components:
            return f"{where}: required component {_short(name)} is not among its components"
    score = grade["score"]
    if isinstance(score, bool) or not isinstance(score, _NUMBER):
        return f"{where}: 'score' is {_short(score)}, not a number"
    for key in ("grader", "grader_version"):
        if not isinstance(grade[key], str):
            return f"{where}: {key!r} is a JSON {_json_type(grade[key])}, not a string"
    details = grade.get("details")
    if details is not None and not isinstance(details, dict):
        return f"{where}: 'details' is a JSON {_json_type(details)}, not an object"
    answer_key = (details or {}).get("answer_key")
    if answer_key is not None and not isinstance(answer_key, str):
        return f"{where}: 'details.answer_key' must be a string or null, not {_short(answer_key)}"
    return None


def _drop_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return f"a drop is a JSON object, not a JSON {_json_type(data)}"
    if data.get("drop_class") not in DROP_CLASSES:
        return f"unknown drop class {_short(data.get('drop_class'))}"
    if data.get("stage") not in STAGES:
        return f"unknown drop stage {_short(data.get('stage'))}"
    if not isinstance(data.get("error"), str):
        return f"a drop's 'error' must be a string, not {_short(data.get('error'))}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def decode_record(data: Any, kind: RecordKind) -> EpisodeRecord | DropRecord:
    """The ``kind`` record that ``data`` (one decoded JSON line) holds: ``EpisodeRecord.from_json``
    or ``DropRecord.from_json``, which raise ``ValueError`` naming what is wrong."""
    return EpisodeRecord.from_json(data) if kind == "episode" else DropRecord.from_json(data)
