"""One episode reduced to what a comparison reads: its identity, score, cost and reply tells.

Why reduce: a comparison of two 100k-episode cards must not hold both cards' trajectories
(hundreds of MB each). Each record is read once, turned into an ``EpisodeFacts`` of a few
hundred bytes (the reply kept only as a 256-byte similarity sketch), and dropped. The
score fields are the views' own (``frostgym.cards.views``), so a delta is a delta of the
numbers the cards show.
"""

from __future__ import annotations

import array
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frostgym.cards.views import Sample
from frostgym.compare.replies import distinct_bigram_ratio, hacking_suspicion, sketch, words
from frostgym.core.episode import COUNTED_AS
from frostgym.core.grade import passes

#: Samples per task whose replies get a similarity sketch (28 pairs): diversity's cost stays
#: linear in tasks however many samples each has.
SKETCHED_SAMPLES = 8


@dataclass(slots=True)
class EpisodeFacts:
    """One planned episode of one card, as the comparison counts it. Read, never changed
    (not frozen only because a frozen dataclass of this size costs ~8 µs more to build, and a
    comparison builds one per episode of both cards)."""

    plan_id: str
    episode_id: str | None
    env_id: str
    task_id: str
    sample: int
    split: str | None
    difficulty: str | None
    tags: tuple[str, ...]
    #: The drop class, or None for a completed episode.
    drop_class: str | None
    #: How the errors_as_failures rule counts a drop ("failure" or "excluded"); None when completed.
    counted_as: str | None
    reward: float
    passed: bool
    label: str | None
    answer: str | None
    completion_tokens: int | None
    prompt_tokens: int | None
    truncated: bool
    turns: int
    tool_calls: int
    wall_seconds: float
    #: Distinct word-bigram share of the last reply (None: too short to judge).
    bigram_ratio: float | None
    #: ``replies.sketch`` of the last reply, packed as unsigned 32-bit ints; only for the
    #: first ``SKETCHED_SAMPLES`` samples of a task (what diversity reads), else empty.
    reply_sketch: bytes
    #: CRC-32 of the last reply's text: whether a task's samples are all the same reply.
    reply_crc: int
    #: Why a passing episode looks like it passed without doing the task, or None.
    suspicion: str | None
    #: (env id, task id): the key every per-task table uses.
    task: tuple[str, str]
    #: Whether each reporting rule counts it (a completed episode always; a drop under
    #: errors_as_failures when it counts as a failure).
    counted_by: tuple[bool, bool]
    #: The sample the cards' views count it as (built once: every rule and slice shares it).
    as_sample: Sample


def episode_facts(data: Mapping[str, Any]) -> EpisodeFacts:
    """The facts of a completed episode, from its record as read back and checked
    (``record_problem(data, "episode")`` is None: the fields read here are there and typed)."""
    grade: Mapping[str, Any] | None = data["grade"]
    passed = grade is not None and passes(grade)
    details = (grade.get("details") if grade is not None else None) or {}
    answer = details.get("answer_key") if isinstance(details.get("answer_key"), str) else None
    steps = data["steps"]
    text = _last_reply(steps)
    tokens = words(text)
    calls = sum(len(step["tool_calls"]) for step in steps)
    completion, prompt, truncated = _tokens(steps)
    task = (data["env_id"], data["task_id"])
    reward = float(data["reward"])
    return EpisodeFacts(
        plan_id=data["plan_id"],
        episode_id=data["episode_id"],
        env_id=task[0],
        task_id=task[1],
        sample=data["sample"],
        split=data["split"],
        difficulty=data["difficulty"],
        tags=tuple(data["tags"]),
        drop_class=None,
        counted_as=None,
        reward=reward,
        passed=passed,
        label=None if grade is None else grade.get("label"),
        answer=answer,
        completion_tokens=completion,
        prompt_tokens=prompt,
        truncated=truncated,
        turns=len(steps),
        tool_calls=calls,
        wall_seconds=float(data["wall_seconds"]),
        bigram_ratio=distinct_bigram_ratio(tokens),
        reply_sketch=array.array("I", sketch(tokens)).tobytes() if data["sample"] < SKETCHED_SAMPLES else b"",
        reply_crc=zlib.crc32(text.encode("utf-8", "surrogatepass")),
        suspicion=hacking_suspicion(str(grade.get("grader", "")), text, details, calls) if grade and passed else None,
        task=task,
        counted_by=(True, True),
        as_sample=Sample(task, data["sample"], reward, passed, answer, None if grade is None else grade["components"]),
    )


def drop_facts(data: Mapping[str, Any]) -> EpisodeFacts:
    """The facts of a dropped episode (``record_problem(data, "drop")`` is None): no score
    (the rules decide how it counts), and its cost so far."""
    steps = data["steps"]
    completion, prompt, truncated = _tokens(steps)
    task = (data["env_id"], data["task_id"])
    drop_class = data["drop_class"]
    counted_as = COUNTED_AS[drop_class]
    return EpisodeFacts(
        plan_id=data["plan_id"],
        episode_id=data.get("episode_id"),
        env_id=task[0],
        task_id=task[1],
        sample=data["sample"],
        split=task[1].rsplit("/", 2)[-2] if task[1].count("/") >= 2 else None,
        difficulty=data["difficulty"],
        tags=tuple(data["tags"]),
        drop_class=drop_class,
        counted_as=counted_as,
        reward=0.0,
        passed=False,
        label=f"drop:{drop_class}",
        answer=None,
        completion_tokens=completion,
        prompt_tokens=prompt,
        truncated=truncated,
        turns=len(steps),
        tool_calls=sum(len(step["tool_calls"]) for step in steps),
        wall_seconds=float(data.get("wall_seconds", 0.0)),
        bigram_ratio=None,
        reply_sketch=b"",
        reply_crc=0,
        suspicion=None,
        task=task,
        counted_by=(counted_as == "failure", False),
        as_sample=Sample(task, data["sample"], 0.0, False, None, None),
    )


def _last_reply(steps: Sequence[Mapping[str, Any]]) -> str:
    """The text of the last action (a structured action's content, else "")."""
    if not steps:
        return ""
    action = steps[-1]["action"]
    if isinstance(action, str):
        return action
    if isinstance(action, dict) and isinstance(action.get("content"), str):
        return str(action["content"])
    return ""


def _tokens(steps: Sequence[Mapping[str, Any]]) -> tuple[int | None, int | None, bool]:
    """(completion tokens, prompt tokens, any reply cut at the token limit) over the steps;
    a count is None when the agent reported none (the oracle, a replay)."""
    completion = prompt = 0
    seen_completion = seen_prompt = truncated = False
    for step in steps:
        agent = step["agent"]
        if not isinstance(agent, dict):
            continue
        value = agent.get("completion_tokens")
        if type(value) is int:
            completion += value
            seen_completion = True
        value = agent.get("prompt_tokens")
        if type(value) is int:
            prompt += value
            seen_prompt = True
        truncated = truncated or agent.get("finish_reason") == "length"
    return (completion if seen_completion else None, prompt if seen_prompt else None, truncated)
