"""The episode record types, declared once: a completed episode, a dropped one, the one
shape of a drop, and the head of either that accounting and score views read.

Envs do not build records (their ``info`` must stay free of timings to be frozen); the
runner does, adding what only it can see: agent traces, seeds it handed out and
wall-clock times. Replay, regrade, compare, the report and the card's views read the same
records back. Each record is a ``msgspec.Struct``: the declaration below is the validation
a card's reader runs on decoding (types, closed vocabularies, bounds, and the cross-field
rules in each ``__post_init__``), and ``frostgym.cards.schema`` derives the published JSON
Schema from it, so the three cannot drift apart.

Field order is part of how records are read back fast, not of what they mean: a record's
head (``EpisodeHead`` or ``DropHead``) comes first on its JSON line, and ``episode_id``
right after it, so ``head_from_line`` decodes the head alone without the trajectory.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, NotRequired, Protocol, TypedDict, TypeVar, get_args

import msgspec
import orjson

from frostgym.core.grade import GradeRecord
from frostgym.core.messages import Action, Message, Observation, clean_text
from frostgym.core.seeding import SEED_BITS
from frostgym.core.splits import Split

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


# -- field types: what each field may hold, as the declaration, the decoder and the schema see it
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Seed = Annotated[int, msgspec.Meta(ge=0, le=2**SEED_BITS - 1, description="a derived seed: 63 bits, so it fits int64")]
SeedDerivation = Annotated[
    list[str | NonNegative],
    msgspec.Meta(min_length=1, description="the frostgym.core.seeding.derive_seed parts that gave the seed"),
]
Seconds = Annotated[float, msgspec.Meta(ge=0.0)]
UnixTime = Annotated[float, msgspec.Meta(ge=0.0, description="seconds since the epoch")]
Sha256 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
Name = Annotated[str, msgspec.Meta(min_length=1)]
OneLine = Annotated[str, msgspec.Meta(pattern="^[^\\n\\r]*$", description="one line")]


class ObservationDelta(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True):
    """The observation after a step as an edit of the one before it: keep the first
    ``keep`` messages, then append ``new``. Conversations grow by appending, so this
    stores each message once instead of the whole history at every step."""

    keep: NonNegative
    new: list[Message]
    #: Read in frostgym.card/3 lines, never written: the step's action, said by this role,
    #: comes before ``new`` (stored once, in ``action``); ``StepRecord`` restores it.
    echo: Literal["assistant"] | None = None

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


#: The largest token id a record holds: int32's, so a trainer's id tensor takes it as is.
MAX_TOKEN_ID = 2**31 - 1
TokenId = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKEN_ID)]
#: Where a token trace's logprobs come from: ``"sampling"``, the distribution the sampler drew
#: each token from (temperature and top-p applied); ``"model"``, the model's own distribution
#: at temperature 1 (greedy decoding, whose sampling distribution is a point mass); ``"server"``,
#: as a model server reported them (vLLM: the raw model's by default, ``--logprobs-mode``).
LogprobsOf = Literal["sampling", "model", "server"]


class TokenTrace(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What the model saw and produced at one step, as token ids: what a trainer trains on,
    so that it never re-tokenises text (a chat template that rewrites earlier turns, or a
    completion that re-tokenises differently, is a silent off-policy bug).

    ``prompt_ids`` are exactly what the model was fed (no padding); ``completion_ids``
    exactly what it generated, through its end-of-sequence token when it generated one;
    ``logprobs`` one per completion token (``logprobs_of`` says of which distribution; an
    entry is None where the server gave no number). Any part the agent could not give is
    None. The loss mask follows and is not stored: completion tokens are the policy's, prompt
    tokens are not.

    ``prefix_mismatch`` is set by the runner as it records the step (``following``): whether
    this turn's prompt does not start with the previous turn's prompt and completion, i.e.
    the chat template rewrote an earlier turn or the completion re-tokenised differently;
    None on an episode's first step and wherever either turn lacks the ids. It is stored, not
    left to each reader, so any tool reading the card (jq, another language) sees the flag,
    and decoding checks that it agrees with the ids (``EpisodeRecord``)."""

    prompt_ids: list[TokenId] | None = None
    completion_ids: list[TokenId] | None = None
    logprobs: list[float | None] | None = None
    logprobs_of: LogprobsOf | None = None
    prefix_mismatch: bool | None = None

    def __post_init__(self) -> None:
        ids, logprobs = self.completion_ids, self.logprobs
        if ids is not None and logprobs is not None and len(ids) != len(logprobs):
            raise ValueError(f"{len(logprobs)} logprobs for {len(ids)} completion tokens")
        if logprobs is None and self.logprobs_of is not None:
            raise ValueError("'logprobs_of' without logprobs")

    def following(self, previous: TokenTrace | None) -> TokenTrace:
        """This trace with ``prefix_mismatch`` set against ``previous``, the trace of the step
        before it in the same episode (None on its first step, or when that step had none)."""
        return msgspec.structs.replace(self, prefix_mismatch=prefix_mismatch(previous, self))


def prefix_mismatch(previous: TokenTrace | None, current: TokenTrace) -> bool | None:
    """Whether ``current``'s prompt ids do not start with ``previous``'s prompt ids followed
    by its completion ids (the chat template rewrote an earlier turn, say stripped its
    ``<think>``, or the completion re-tokenised differently); None when there is nothing to
    compare: no previous step, or either side without prompt or completion ids."""
    if previous is None or previous.prompt_ids is None or previous.completion_ids is None:
        return None
    prompt = current.prompt_ids
    if prompt is None:
        return None
    seen, said = previous.prompt_ids, previous.completion_ids
    head = len(seen)
    return prompt[:head] != seen or prompt[head : head + len(said)] != said


def _check_prefixes(steps: Sequence[StepRecord]) -> None:
    """Every stored ``prefix_mismatch`` agrees with the ids it was computed from."""
    previous: TokenTrace | None = None
    for number, step in enumerate(steps):
        tokens = step.tokens
        if tokens is not None and tokens.prefix_mismatch != (found := prefix_mismatch(previous, tokens)):
            said = tokens.prefix_mismatch
            raise ValueError(f"step {number}: 'tokens.prefix_mismatch' is {said}, but its ids say {found}")
        previous = tokens


class StepRecord(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """One step of an episode: what the agent sent and the env made of it. Fields with a
    default (``action_stored``, ``tokens``) are left off its line while they hold it."""

    turn: NonNegative
    agent_seed: Seed  # the sampling seed handed to the agent for this call
    action: Action  # exactly what the agent returned, before any env coercion
    agent: dict[str, Any]  # prompt/completion tokens, finish reason, logprobs, ...
    tool_calls: list[dict[str, Any]]  # as the env parsed them from the action
    tool_results: list[dict[str, Any]]  # what each call returned
    #: The final grade, or a graded intermediate turn. Null on the line of the step that
    #: ended the episode when its grade is the episode's own (stored once, on the episode).
    grade: GradeRecord | None
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]  # the env's info minus the fields above
    observation: ObservationDelta  # the observation after this step
    agent_seconds: Seconds  # this episode's share of the batched agent call
    env_seconds: Seconds
    #: None when ``action`` is exactly what the agent sent; else how it was stored
    #: (``stored_action``): its full length and sha256, and why the record differs.
    action_stored: StoredAction | None = None
    #: The step's token ids and logprobs (``TokenTrace``), when the agent gave them.
    tokens: TokenTrace | None = None

    def __post_init__(self) -> None:
        _check_grade(self.grade, "grade")
        delta = self.observation
        if delta.echo is not None:
            if type(self.action) is not str:
                raise ValueError("'observation.echo' only follows a text action")
            delta.new = [{"role": delta.echo, "content": self.action}, *delta.new]
            delta.echo = None

    @property
    def action_is_whole(self) -> bool:
        """Whether ``action`` is the action the agent sent, so replay can play it (it is
        not when the card kept only a prefix of an over-long one)."""
        return self.action_stored is None or "chars" not in self.action_stored


class StoredAction(TypedDict):
    """How a step's ``action`` differs from what the agent sent (``stored_action``):
    ``sanitized``, lone surrogates or invalid UTF-8 replaced by U+FFFD; ``chars``,
    ``sha256`` and ``prefix_chars``, an over-long action (its JSON text, when structured)
    kept as its first ``prefix_chars`` characters."""

    kind: Literal["text", "structured"]
    sanitized: NotRequired[Literal[True]]
    chars: NotRequired[NonNegative]
    sha256: NotRequired[Sha256]
    prefix_chars: NotRequired[NonNegative]


class RecordHead(msgspec.Struct, kw_only=True):
    """Which planned episode a record is and the slices it falls in: the first fields of
    every record's line. Its two kinds, ``EpisodeHead`` and ``DropHead``, add how it scored;
    a head is what accounting and the score views read (``head_from_line``), and a record
    is its own head with the trajectory after it."""

    plan_id: Name
    env_id: Name
    task_id: Name
    sample: NonNegative
    difficulty: str | None
    tags: list[str]

    @staticmethod
    def from_json(data: Any, kind: RecordKind) -> Head:
        """The head of a ``kind`` record (``orjson.loads`` of a line, or only its first
        fields). Raises ``ValueError`` naming what makes it not one."""
        return _convert(data, _HEADS[kind], kind)


class EpisodeHead(RecordHead, kw_only=True):
    """The head of a completed episode: its ``reward`` and its ``grade``."""

    reward: float
    grade: GradeRecord | None

    def __post_init__(self) -> None:
        if not math.isfinite(self.reward):
            raise ValueError(f"'reward' must be a finite number, not {self.reward!r}")
        _check_grade(self.grade, "grade")

    @property
    def drop(self) -> None:
        """A completed episode has no drop."""
        return None


class DropHead(RecordHead, kw_only=True):
    """The head of a dropped episode: its drop, spelled out (``drop_class``, ``stage``,
    ``error``) with how the views count it (``counted_as``, implied by the class). It has
    reward 0 and no grade."""

    drop_class: DropClass
    counted_as: CountedAs
    stage: Stage
    error: OneLine

    def __post_init__(self) -> None:
        if self.counted_as != (implied := COUNTED_AS[self.drop_class]):
            raise ValueError(f"'counted_as' is {self.counted_as!r}, but a {self.drop_class} drop counts as {implied!r}")

    @property
    def drop(self) -> Drop:
        return Drop(self.drop_class, self.stage, self.error)

    @property
    def reward(self) -> float:
        return 0.0

    @property
    def grade(self) -> None:
        return None


Head = EpisodeHead | DropHead


class EpisodeRecord(EpisodeHead, kw_only=True, forbid_unknown_fields=True):
    """A completed episode: its head, then the full trajectory (one line of
    ``episodes.jsonl``)."""

    episode_id: Name
    split: Split
    seed: Seed  # the seed passed to env.reset
    seed_derivation: SeedDerivation  # the derive_seed parts that gave ``seed``
    env_version: Name
    fixture_sha256: Sha256
    task_sha256: Sha256
    attempts: Annotated[int, msgspec.Meta(ge=1)]
    started_at: UnixTime
    wall_seconds: Seconds
    observation: Observation  # at reset
    steps: list[StepRecord]

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_prefixes(self.steps)
        ending = self.steps[-1] if self.steps else None
        if ending is not None and ending.grade is None and (ending.terminated or ending.truncated):
            ending.grade = self.grade  # stored once, on the episode (``encode``)

    def head(self) -> EpisodeHead:
        """Its head alone, as ``head_from_line`` reads it from its line."""
        return _head_of(self, EpisodeHead)

    @classmethod
    def from_json(cls, data: Any) -> EpisodeRecord:  # type: ignore[override]
        """The record one line of ``episodes.jsonl`` holds (``orjson.loads`` of it). Raises
        ``ValueError`` naming what makes it not an episode record."""
        return _convert(data, cls, "episode")

    def encode(self, dumps: Callable[[Any], bytes]) -> bytes:
        """This record as a line of ``episodes.jsonl``, encoded by ``dumps``, in the form a
        card stores it (``frostgym.card/3`` and later): the step that ended the episode
        holds no grade when its grade is the episode's own (the runner makes them one
        object), which ``grade`` holds and decoding puts back. The step is restored before
        this returns, whatever ``dumps`` raises."""
        ending = self.steps[-1] if self.steps else None
        if ending is None or ending.grade is None or ending.grade is not self.grade:
            return dumps(self)
        ending.grade = None
        try:
            return dumps(self)
        finally:
            ending.grade = self.grade


class DropRecord(DropHead, kw_only=True, forbid_unknown_fields=True):
    """An episode that was not scored normally, with what is known of it: its drop
    (``drop_class``, ``stage``, ``error``; ``drop`` as one value), the partial trajectory,
    and how views count it (one line of ``drops.jsonl``)."""

    episode_id: Name | None  # None when the episode never reset
    seed: Seed
    seed_derivation: SeedDerivation
    traceback: str | None
    attempts: Annotated[int, msgspec.Meta(ge=1)]
    earlier_errors: list[OneLine]  # one line per failed earlier attempt
    observation: Observation
    steps: list[StepRecord]
    started_at: UnixTime
    wall_seconds: Seconds

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_prefixes(self.steps)

    def head(self) -> DropHead:
        """Its head alone, as ``head_from_line`` reads it from its line."""
        return _head_of(self, DropHead)

    def to_json(self) -> dict[str, Any]:
        """The line ``drops.jsonl`` holds for it, as data (its steps stay records)."""
        return msgspec.structs.asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> DropRecord:  # type: ignore[override]
        """The record one line of ``drops.jsonl`` holds (``orjson.loads`` of it). Raises
        ``ValueError`` naming what makes it not a drop record."""
        return _convert(data, cls, "drop")


Record = EpisodeRecord | DropRecord
RecordKind = Literal["episode", "drop"]
H = TypeVar("H", EpisodeHead, DropHead)


def _head_of(record: RecordHead, head: type[H]) -> H:
    """The ``head`` fields of ``record`` (its own objects, shared, not copied)."""
    return head(**{name: getattr(record, name) for name in head.__struct_fields__})


_HEADS: Final[dict[RecordKind, type[EpisodeHead] | type[DropHead]]] = {"episode": EpisodeHead, "drop": DropHead}
_RECORDS: Final[dict[RecordKind, type[EpisodeRecord] | type[DropRecord]]] = {
    "episode": EpisodeRecord,
    "drop": DropRecord,
}
#: The fields each record type's line must hold.
_REQUIRED: Final[dict[type[Any], frozenset[str]]] = {
    struct: frozenset(field.encode_name for field in msgspec.structs.fields(struct) if field.required)
    for struct in (EpisodeHead, DropHead, EpisodeRecord, DropRecord, StepRecord)
}


def _check_grade(grade: GradeRecord | None, where: str) -> None:
    """The rules a stored grade meets beyond its fields' types: every required component is
    among its components, and ``details.answer_key`` (what maj@k votes with) is a string
    or null."""
    if grade is None:
        return
    components = grade["components"]
    for name in grade["required"]:
        if name not in components:
            raise ValueError(f"{where}: required component {_short(name)} is not among its components")
    answer_key = grade.get("details", {}).get("answer_key")
    if answer_key is not None and type(answer_key) is not str:
        raise ValueError(f"{where}: 'details.answer_key' must be a string or null, not {_short(answer_key)}")


# -- reading records back: one decoder per type, and their errors in words -------------------
_RECORD_DECODERS: Final[dict[RecordKind, msgspec.json.Decoder[Any]]] = {
    kind: msgspec.json.Decoder(record) for kind, record in _RECORDS.items()
}
_HEAD_DECODERS: Final[dict[RecordKind, msgspec.json.Decoder[Any]]] = {
    kind: msgspec.json.Decoder(head) for kind, head in _HEADS.items()
}


def decode_line(line: bytes, kind: RecordKind) -> Record:
    """The ``kind`` record on one JSON line of a card. Raises ``ValueError`` naming what
    makes the line not one (not JSON, a missing or mistyped field, a broken rule)."""
    try:
        record: Record = _RECORD_DECODERS[kind].decode(line)
    except msgspec.DecodeError as error:
        raise _refused(error, kind, line, _RECORDS[kind]) from None
    return record


def decode_record(data: Any, kind: RecordKind) -> Record:
    """The ``kind`` record that ``data`` (one decoded JSON line) holds. Raises
    ``ValueError`` naming what is wrong."""
    return _convert(data, _RECORDS[kind], kind)


def record_problem(data: Any, kind: RecordKind) -> str | None:
    """What makes ``data`` (one JSON line read back from a card, decoded) not a ``kind``
    record as the runner writes it, in words; None when it is one."""
    try:
        decode_record(data, kind)
    except ValueError as error:
        return str(error)
    return None


#: Where a record's head ends on its line: ``episode_id`` is the first field after it.
_HEAD_END = b',"episode_id":'


def head_from_line(line: bytes, kind: RecordKind) -> Head:
    """The head of the record on one JSON line of a card, decoding only the line's first
    fields when it is laid out as records are written (head first), else the whole line
    (a head's decoder skips the fields after it). Raises ``ValueError`` for a line that is
    not JSON or not a ``kind`` record's head.

    The cut is safe on any line: ``,"episode_id":`` outside a string is a key, and when it
    is not the line's own top-level key, the prefix closed with one ``}`` is not JSON, so
    the whole line is decoded instead; a prefix that decodes is exactly the top-level fields
    before it."""
    decoder = _HEAD_DECODERS[kind]
    end = line.find(_HEAD_END)
    if end > 0:
        try:
            head: Head = decoder.decode(line[:end] + b"}")
            return head
        except msgspec.DecodeError:
            pass  # not cut at the top level, or not laid out head first: read it whole
    try:
        head = decoder.decode(line)
    except msgspec.DecodeError as error:
        raise _refused(error, kind, line, _HEADS[kind]) from None
    return head


R = TypeVar("R")


def _convert(data: Any, to: type[R], kind: RecordKind) -> R:
    try:
        return msgspec.convert(data, to)
    except msgspec.ValidationError as error:
        raise ValueError(first_problem(data, to, kind, error)) from None


_ERROR = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]*)`")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")
_BOUND = re.compile(r"Expected `(?P<want>[^`]*)` (?P<rule>.+)")
_ENUM = re.compile(r"Invalid enum value (?P<value>.*)")
_JSON_TYPES: Final = {"str": "string", "int": "number", "float": "number", "bool": "boolean"}
_WANTED: Final = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "array": "an array",
    "object": "an object",
}
_ENUM_NAMES: Final = {"drop_class": "drop class", "stage": "drop stage"}


def _refused(error: msgspec.DecodeError, kind: RecordKind, line: bytes, to: type[Any]) -> ValueError:
    """A decoder's error as the ``ValueError`` readers catch: ``json.JSONDecodeError`` for
    a line that is not JSON, else the first problem in words (``first_problem``)."""
    if not isinstance(error, msgspec.ValidationError):
        return json.JSONDecodeError(str(error), "", 0)
    return ValueError(first_problem(orjson.loads(line), to, kind, error))


def first_problem(data: Any, to: type[Any], kind: RecordKind, error: msgspec.ValidationError) -> str:
    """What is wrong with ``data``, which decoding to ``to`` (a record or head type) refused
    with ``error``, in words, in the order a reader would look: the head's missing fields,
    then the head, then the rest's missing fields, then the steps' (a line that lacks fields
    is most likely not a record at all), and a grade component by its name."""
    if type(data) is not dict:
        return problem_in_words(error, kind)
    name = "an episode record" if kind == "episode" else "a drop record"
    head = _HEADS[kind]
    if missing := _REQUIRED[head] - data.keys():
        return f"not {name}: no {_names(missing)}"
    if to is not head:
        try:
            msgspec.convert(data, head)
        except msgspec.ValidationError as head_error:
            return _component_problem(data.get("grade"), "grade") or problem_in_words(head_error, kind)
        if missing := _REQUIRED[to] - data.keys():
            return f"not {name}: no {_names(missing)}"
    steps = data.get("steps") if to is not head else None
    for number, step in enumerate(steps if type(steps) is list else ()):
        if type(step) is dict:
            if missing := _REQUIRED[StepRecord] - step.keys():
                return f"step {number} has no {_names(missing)}"
            if problem := _component_problem(step.get("grade"), f"step {number} grade"):
                return problem
    return _component_problem(data.get("grade"), "grade") or problem_in_words(error, kind)


def _names(keys: frozenset[str] | set[str]) -> str:
    return ", ".join(repr(key) for key in sorted(keys)[:4])


def _component_problem(grade: Any, where: str) -> str | None:
    """A grade component that is not a number, by name (a decoder's path names no key)."""
    components = grade.get("components") if type(grade) is dict else None
    for name, value in components.items() if type(components) is dict else ():
        if type(value) not in (int, float):
            return f"{where}: component {name!r} is {_short(value)}, not a number"
    return None


def problem_in_words(error: msgspec.ValidationError, kind: RecordKind) -> str:
    """What msgspec found wrong with a record, said as a reader of the card would: which
    field or step, and what is missing, mistyped or broken."""
    match = _ERROR.fullmatch(str(error))
    what, path = (match["what"], match["path"] or "") if match else (str(error), "")
    where = _where(path)
    if found := _MISSING.fullmatch(what):
        name = "an episode record" if kind == "episode" else "a drop record"
        return f"{where} has no {found['name']!r}" if where else f"not {name}: no {found['name']!r}"
    if found := _UNKNOWN.fullmatch(what):
        return f"{where or 'the record'} has an unknown field {found['name']!r}"
    if found := _EXPECTED.fullmatch(what):
        got = _JSON_TYPES.get(found["got"], found["got"])
        want = " or ".join(_JSON_TYPES.get(part, part) for part in found["want"].split(" | "))
        if not where:
            return f"not {'an episode record' if kind == 'episode' else 'a drop record'} but a JSON {got}"
        return f"{where} is a JSON {got}, not {'an' if want[0] in 'aeiou' else 'a'} {want}"
    if found := _BOUND.fullmatch(what):
        return f"{where or 'the record'} must be {_WANTED.get(found['want'], found['want'])} {found['rule']}"
    if found := _ENUM.fullmatch(what):
        field = path.rsplit(".", 1)[-1]
        return f"unknown {_ENUM_NAMES.get(field, field)} {found['value']}"
    return f"{where}: {what}" if where else what


def _where(path: str) -> str:
    """``.steps[0].grade.score`` as "step 0 grade 'score'"; "" for the record itself."""
    words: list[str] = []
    for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        name, index = part
        if index:
            if words and words[-1] == "'steps'":
                words[-1] = f"step {index}"
            else:
                words.append(f"item {index}")
        elif name == "grade":
            words.append("grade")
        else:
            words.append(repr(name))
    return " ".join(words)


def stored_action(action: Action | bytes) -> tuple[Action, StoredAction | None]:
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
    kind: Literal["text", "structured"]
    if isinstance(action, (str, bytes)):
        text, sanitized = clean_text(action)
        kind, kept = "text", text
    else:
        text, sanitized = _json_text(action)
        kind = "structured"
        kept = json.loads(text) if sanitized else action
    note: StoredAction = {"kind": kind}
    if sanitized:
        note["sanitized"] = True
    if len(text) <= STORED_ACTION_CHARS:
        return kept, note if sanitized else None
    note["chars"] = len(text)
    note["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    note["prefix_chars"] = STORED_ACTION_PREFIX
    return text[:STORED_ACTION_PREFIX], note


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


def split_step_info(info: dict[str, Any]) -> tuple[dict[str, Any], list[Any], list[Any], GradeRecord | None]:
    """(rest of info, tool calls, tool results, grade) from an env's step ``info``: the
    one place that decides which info fields a step record lifts out or leaves out, for
    both the runner and replay."""
    rest = {k: v for k, v in info.items() if k not in EPISODE_INFO_KEYS}
    calls = rest.pop("tool_calls", [])
    results = rest.pop("tool_results", [])
    grade = rest.pop("grade", None)
    turn_grade = rest.pop("turn_grade", None)
    graded: GradeRecord | None = grade if grade is not None else turn_grade
    return rest, calls, results, graded


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
    drop: Drop,
    *,
    traceback: str | None = None,
    attempts: int = 1,
    earlier_errors: Sequence[str] = (),
    episode_id: str | None = None,
    observation: Observation | None = None,
    steps: Sequence[StepRecord] = (),
    started_at: float = 0.0,
    wall_seconds: float = 0.0,
) -> DropRecord:
    """The drop of ``planned``: its identity, the drop, and whatever else is known of it
    (an episode that never reset has no ``episode_id``, observation or steps)."""
    return DropRecord(
        plan_id=planned.plan_id,
        env_id=planned.env_id,
        task_id=planned.task_id,
        sample=planned.sample,
        difficulty=planned.difficulty,
        tags=list(planned.tags),
        drop_class=drop.drop_class,
        counted_as=drop.counted_as,
        stage=drop.stage,
        error=drop.error,
        episode_id=episode_id,
        seed=planned.seed,
        seed_derivation=list(planned.seed_derivation),
        traceback=traceback,
        attempts=attempts,
        earlier_errors=list(earlier_errors),
        observation=[] if observation is None else observation,
        steps=list(steps),
        started_at=started_at,
        wall_seconds=wall_seconds,
    )


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
