"""One card's episodes reduced to columns: what a comparison reads of each, one row per record.

Why columns: a comparison of two 100k-episode cards must hold neither card's trajectories
(hundreds of MB each) nor a Python object per episode (building, holding and garbage-
collecting 200,000 of them cost more than the comparison itself). Each record is read once,
its facts appended to per-field lists (strings as small integer codes, the reply kept only
as a 256-byte similarity sketch) that become numpy arrays, and the record is let go; the
comparison is then array arithmetic over rows. The score fields are the views' own
(``frostgym.cards.views``), so a delta is a delta of the numbers the cards show.

Each distinct reply text is analysed once while it is remembered (its words, bigram ratio,
sketch and hacking check; the last ``REPLY_MEMO`` distinct replies are): a policy that gives
several samples of a task the same reply, as the oracle and any greedy policy do, pays for
it once.
"""

from __future__ import annotations

import array
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from frostgym.compare.replies import READS_DETAILS, distinct_bigram_ratio, hacking_suspicion, sketch, words
from frostgym.core.episode import COUNTED_AS, DropRecord, EpisodeRecord, StepRecord
from frostgym.core.grade import passes

#: Samples per task whose replies get a similarity sketch (28 pairs): diversity's cost stays
#: linear in tasks however many samples each has.
SKETCHED_SAMPLES = 8
#: Distinct replies remembered at a time (the memo starts afresh when full): the samples of
#: the tasks in flight, in memory bounded however long the card.
REPLY_MEMO = 4096

TaskKey = tuple[str, str]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
ObjectArray = npt.NDArray[np.object_]


@dataclass(frozen=True)
class EpisodeFacts:
    """Records of one card (completed episodes and drops), one row each, or a selection of
    them (``take``), as the comparison counts them. Read, never changed.

    Coded columns index a table: ``split``, ``difficulty``, ``label``, ``answer`` and
    ``drop`` index ``names``, whose code 0 is None (so ``drop == 0`` is a completed
    episode); ``task`` indexes ``task_keys`` and ``tags`` indexes ``tag_sets``."""

    #: Each row's plan id (str).
    plan_ids: ObjectArray
    #: (env id, task id): the key every per-task table uses.
    task: IntArray
    sample: IntArray
    split: IntArray
    difficulty: IntArray
    tags: IntArray
    #: The drop class (0: completed).
    drop: IntArray
    reward: FloatArray
    passed: BoolArray
    #: The grade's label (0: none, a drop or an ungraded episode).
    label: IntArray
    #: The grade's ``details.answer_key`` (0: none).
    answer: IntArray
    #: One column per name of ``component_names``: the grade's component, NaN where the
    #: record has none (a drop, no grade, or a grade without it).
    components: FloatArray
    #: Summed over the steps; NaN when the agent reported no counts (the oracle, a replay).
    completion_tokens: FloatArray
    #: The prompt tokens each step was sent, summed over the steps (a multi-turn episode's
    #: later prompts hold its earlier turns, and each is counted as it was sent); NaN when
    #: the agent reported none.
    prompt_tokens: FloatArray
    #: The mean over the steps of the agent's ``ttft_s`` and ``tpot_s`` (time to first token,
    #: seconds per output token after it: ``frostgym.agents.hf``), over the steps that
    #: recorded one; NaN where none did (the OpenAI agent, cards written before they existed).
    ttft_seconds: FloatArray
    tpot_seconds: FloatArray
    #: Whether any reply was cut at the token limit.
    truncated: BoolArray
    turns: IntArray
    tool_calls: IntArray
    wall_seconds: FloatArray
    #: Distinct word-bigram share of the last reply (NaN: too short to judge).
    bigram_ratio: FloatArray
    #: CRC-32 of the last reply's text: whether a task's samples are all the same reply.
    reply_crc: IntArray
    #: ``replies.sketch`` of the last reply (bytes), packed as unsigned 32-bit ints; only for
    #: the first ``SKETCHED_SAMPLES`` samples of a task (what diversity reads), else empty.
    reply_sketch: ObjectArray
    #: The passing episodes that look like they passed without doing the task: row ->
    #: (episode id, why).
    suspects: Mapping[int, tuple[str | None, str]]
    names: tuple[Any, ...]
    task_keys: tuple[TaskKey, ...]
    tag_sets: tuple[tuple[str, ...], ...]
    component_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.plan_ids)

    @property
    def done(self) -> BoolArray:
        """Completed episodes (not drops)."""
        done: BoolArray = self.drop == 0
        return done

    @property
    def failure_drop(self) -> BoolArray:
        """Drops that the errors_as_failures rule counts as failed samples."""
        failing = np.array([COUNTED_AS.get(name) == "failure" for name in self.names], dtype=bool)
        failure: BoolArray = failing[self.drop]
        return failure

    def env_of_task(self) -> list[str]:
        """The env id of each ``task_keys`` entry."""
        return [key[0] for key in self.task_keys]

    def take(self, rows: IntArray | BoolArray) -> EpisodeFacts:
        """The rows ``rows`` selects (indices, in their order, or a mask), with the same tables."""
        index = np.flatnonzero(rows) if rows.dtype == np.bool_ else rows
        suspects: dict[int, tuple[str | None, str]] = {}
        if self.suspects:
            at = np.flatnonzero(np.isin(index, np.fromiter(self.suspects, dtype=np.int64)))
            suspects = {new: self.suspects[old] for new, old in zip(at.tolist(), index[at].tolist(), strict=True)}
        columns: dict[str, Any] = {
            field.name: column[index]
            for field in fields(self)
            if isinstance(column := getattr(self, field.name), np.ndarray)
        }
        return replace(self, suspects=suspects, **columns)


class FactsBuilder:
    """Appends records as rows (``add_episode``, ``add_drop``), then ``build``s the columns.

    Each record is a typed record, checked when it was decoded, so nothing is checked again."""

    def __init__(self) -> None:
        self._names: dict[Any, int] = {None: 0}
        self._tasks: dict[TaskKey, int] = {}
        self._tag_sets: dict[tuple[str, ...], int] = {}
        #: Rows whose grades have the same component names in the same order, and their values.
        self._components: dict[tuple[str, ...], tuple[list[int], list[tuple[float, ...]]]] = {}
        self._replies: dict[str, _Tells] = {}
        self._suspicions: dict[tuple[str, str], str | None] = {}
        #: One tuple per row, in ``_COLUMNS`` order (one append a record, not one a field).
        self._rows: list[tuple[Any, ...]] = []
        self._suspects: dict[int, tuple[str | None, str]] = {}

    def add_episode(self, record: EpisodeRecord) -> int:
        """A completed episode's record; its row."""
        row = len(self._rows)
        names = self._names
        grade: Mapping[str, Any] | None = record.grade
        steps = record.steps
        sample = record.sample
        sketched = sample < SKETCHED_SAMPLES
        text = _last_reply(steps)
        completion, prompt, truncated, calls, ttft, tpot = _steps(steps)
        tells = self._tells(text, sketched)
        passed = False
        label = answer = None
        if grade is not None:
            passed = passes(grade)
            details = grade.get("details") or {}
            key = details.get("answer_key")
            answer = key if isinstance(key, str) else None
            label = grade.get("label")
            components = grade["components"]
            shape = tuple(components)
            rows = self._components.get(shape)
            if rows is None:
                rows = self._components[shape] = ([], [])
            rows[0].append(row)
            rows[1].append(tuple(components.values()))
            if passed and grade:
                suspicion = self._suspicion(str(grade.get("grader", "")), text, details, calls)
                if suspicion is not None:
                    self._suspects[row] = (record.episode_id, suspicion)
        tasks, tag_sets = self._tasks, self._tag_sets
        self._rows.append(
            (
                record.plan_id,
                tasks.setdefault((record.env_id, record.task_id), len(tasks)),
                sample,
                names.setdefault(record.split, len(names)),
                names.setdefault(record.difficulty, len(names)),
                tag_sets.setdefault(tuple(record.tags), len(tag_sets)),
                0,
                float(record.reward),
                passed,
                names.setdefault(label, len(names)),
                names.setdefault(answer, len(names)),
                completion,
                prompt,
                ttft,
                tpot,
                truncated,
                len(steps),
                calls,
                float(record.wall_seconds),
                tells.bigram_ratio,
                tells.crc,
                tells.sketch if sketched else b"",
            )
        )
        return row

    def add_drop(self, record: DropRecord) -> int:
        """A dropped episode's record: no score (the rules decide how it counts), and its
        cost so far; its row."""
        row = len(self._rows)
        names, tasks, tag_sets = self._names, self._tasks, self._tag_sets
        steps = record.steps
        task_id = record.task_id
        completion, prompt, truncated, calls, ttft, tpot = _steps(steps)
        self._rows.append(
            (
                record.plan_id,
                tasks.setdefault((record.env_id, task_id), len(tasks)),
                record.sample,
                names.setdefault(task_id.rsplit("/", 2)[-2] if task_id.count("/") >= 2 else None, len(names)),
                names.setdefault(record.difficulty, len(names)),
                tag_sets.setdefault(tuple(record.tags), len(tag_sets)),
                names.setdefault(record.drop_class, len(names)),
                0.0,
                False,
                0,
                0,
                completion,
                prompt,
                ttft,
                tpot,
                truncated,
                len(steps),
                calls,
                float(record.wall_seconds),
                math.nan,
                0,
                b"",
            )
        )
        return row

    def build(self) -> EpisodeFacts:
        """The columns of every record added, in the order added."""
        rows = len(self._rows)
        columns = dict(zip(_COLUMNS, zip(*self._rows, strict=True) if rows else [()] * len(_COLUMNS), strict=True))
        component_names: dict[str, int] = {}
        for shape in self._components:
            for name in shape:
                component_names.setdefault(name, len(component_names))
        components = np.full((rows, len(component_names)), np.nan)
        for shape, (at, values) in self._components.items():
            if shape:
                where = [component_names[name] for name in shape]
                components[np.array(at)[:, None], where] = np.array(values, dtype=np.float64)
        return EpisodeFacts(
            plan_ids=_objects(columns["plan_id"]),
            task=_ints(columns["task"]),
            sample=_ints(columns["sample"]),
            split=_ints(columns["split"]),
            difficulty=_ints(columns["difficulty"]),
            tags=_ints(columns["tags"]),
            drop=_ints(columns["drop"]),
            reward=np.array(columns["reward"], dtype=np.float64),
            passed=np.array(columns["passed"], dtype=bool),
            label=_ints(columns["label"]),
            answer=_ints(columns["answer"]),
            components=components,
            completion_tokens=np.array(columns["completion_tokens"], dtype=np.float64),
            prompt_tokens=np.array(columns["prompt_tokens"], dtype=np.float64),
            ttft_seconds=np.array(columns["ttft_seconds"], dtype=np.float64),
            tpot_seconds=np.array(columns["tpot_seconds"], dtype=np.float64),
            truncated=np.array(columns["truncated"], dtype=bool),
            turns=_ints(columns["turns"]),
            tool_calls=_ints(columns["tool_calls"]),
            wall_seconds=np.array(columns["wall_seconds"], dtype=np.float64),
            bigram_ratio=np.array(columns["bigram_ratio"], dtype=np.float64),
            reply_crc=_ints(columns["reply_crc"]),
            reply_sketch=_objects(columns["reply_sketch"]),
            suspects=self._suspects,
            names=tuple(self._names),
            task_keys=tuple(self._tasks),
            tag_sets=tuple(self._tag_sets),
            component_names=tuple(component_names),
        )

    def _tells(self, text: str, sketched: bool) -> _Tells:
        """What the reply ``text`` shows, computed once per distinct text."""
        tells = self._replies.get(text)
        if tells is None:
            if len(self._replies) >= REPLY_MEMO:
                self._replies.clear()
            tokens = words(text)
            ratio = distinct_bigram_ratio(tokens)
            tells = _Tells(
                math.nan if ratio is None else ratio,
                zlib.crc32(text.encode("utf-8", "surrogatepass")),
                array.array("I", sketch(tokens)).tobytes() if sketched else b"",
            )
            self._replies[text] = tells
        elif sketched and not tells.sketch:
            tells.sketch = array.array("I", sketch(words(text))).tobytes()
        return tells

    def _suspicion(self, grader: str, text: str, details: Mapping[str, Any], calls: int) -> str | None:
        if grader in READS_DETAILS:
            return hacking_suspicion(grader, text, details, calls)
        key = (grader, text)
        if key not in self._suspicions:
            if len(self._suspicions) >= REPLY_MEMO:
                self._suspicions.clear()
            self._suspicions[key] = hacking_suspicion(grader, text, details, calls)
        return self._suspicions[key]


#: The fields of a row as ``FactsBuilder`` appends them.
_COLUMNS = (
    "plan_id",
    "task",
    "sample",
    "split",
    "difficulty",
    "tags",
    "drop",
    "reward",
    "passed",
    "label",
    "answer",
    "completion_tokens",
    "prompt_tokens",
    "ttft_seconds",
    "tpot_seconds",
    "truncated",
    "turns",
    "tool_calls",
    "wall_seconds",
    "bigram_ratio",
    "reply_crc",
    "reply_sketch",
)


def _steps(steps: Sequence[StepRecord]) -> tuple[float, float, bool, int, float, float]:
    """(completion tokens, prompt tokens, whether any reply was cut at the token limit, tool
    calls, mean ttft_s, mean tpot_s) over the steps; a count or a mean is NaN when the agent
    reported none (the oracle, a replay)."""
    completion = prompt = calls = 0
    seen = seen_prompt = truncated = False
    timings: tuple[list[float], list[float]] = ([], [])
    for step in steps:
        calls += len(step.tool_calls)
        agent = step.agent
        if not isinstance(agent, dict):
            continue
        value = agent.get("completion_tokens")
        if type(value) is int:
            completion += value
            seen = True
        value = agent.get("prompt_tokens")
        if type(value) is int:
            prompt += value
            seen_prompt = True
        truncated = truncated or agent.get("finish_reason") == "length"
        for key, kept in zip(("ttft_s", "tpot_s"), timings, strict=True):
            value = agent.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
                kept.append(float(value))
    ttft, tpot = (sum(kept) / len(kept) if kept else math.nan for kept in timings)
    return (
        float(completion) if seen else math.nan,
        float(prompt) if seen_prompt else math.nan,
        truncated,
        calls,
        ttft,
        tpot,
    )


@dataclass(slots=True)
class _Tells:
    """One reply text's bigram ratio (NaN: too short), CRC-32 and sketch (b"": not yet asked for)."""

    bigram_ratio: float
    crc: int
    sketch: bytes


def _ints(values: Sequence[int]) -> IntArray:
    return np.array(values, dtype=np.int64)


def _objects(values: Sequence[Any]) -> ObjectArray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _last_reply(steps: Sequence[StepRecord]) -> str:
    """The text of the last action (a structured action's content, else "")."""
    if not steps:
        return ""
    action = steps[-1].action
    if isinstance(action, str):
        return action
    if isinstance(action, dict) and isinstance(action.get("content"), str):
        return str(action["content"])
    return ""
