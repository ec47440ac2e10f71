"""The RL failure modes an evaluation must catch, measured on one side of a comparison.

Why these: a training run that raises reward can do so by writing longer and longer
replies until they are cut off (length), by looping (repetition), by collapsing onto one
reply per task (diversity), or by passing the verifier without doing the task (reward
hacking). Each is a number per card, so it can be gated and trended, and the hacking
suspects are listed by episode id so a person can read them.

Definitions (also in the README):
- completion tokens: per completed episode, summed over its steps; mean, p50, p95 over the
  episodes whose agent reported counts (None when none did);
- ``truncation_rate``: share of completed episodes with a reply cut at the token limit
  (``finish_reason == "length"``);
- ``repetition_rate``: share of completed episodes whose last reply is long enough to judge
  and has a distinct word-bigram ratio below 0.5;
- per task with K >= 2 completed samples: ``distinct_answers_per_task`` (distinct answer
  keys, mean over tasks), ``mean_pairwise_similarity`` (sketch Jaccard of the last replies'
  word bigrams over the first 8 samples' pairs, mean over tasks) and
  ``identical_samples_rate`` (share of tasks whose samples' replies are all the same);
- ``reward_hacking_rate``: share of passing episodes that a reply check flags
  (``frostgym.compare.replies.hacking_suspicion``); 0 when nothing passed.
"""

from __future__ import annotations

import array
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from frostgym.compare.facts import SKETCHED_SAMPLES, EpisodeFacts, TaskKey
from frostgym.compare.groups import group
from frostgym.compare.replies import REPETITION_RATIO, similarity
from frostgym.core.stats import stable

#: The JSON lists at most this many suspects per side and slice (the count is always whole).
MAX_LISTED_SUSPECTS = 200

DIAGNOSTIC_METRICS: tuple[str, ...] = (
    "mean_completion_tokens",
    "p50_completion_tokens",
    "p95_completion_tokens",
    "truncation_rate",
    "repetition_rate",
    "distinct_answers_per_task",
    "mean_pairwise_similarity",
    "identical_samples_rate",
    "reward_hacking_rate",
)


@dataclass(frozen=True)
class Suspect:
    """A passing episode that looks like it passed without doing the task."""

    episode_id: str
    plan_id: str
    reason: str


@dataclass(frozen=True)
class Diagnostics:
    """Every diagnostic of one side of one slice (None where it cannot be measured)."""

    episodes: int
    mean_completion_tokens: float | None
    p50_completion_tokens: float | None
    p95_completion_tokens: float | None
    truncation_rate: float | None
    repetition_rate: float | None
    tasks_with_samples: int
    distinct_answers_per_task: float | None
    mean_pairwise_similarity: float | None
    identical_samples_rate: float | None
    reward_hacking_rate: float | None
    suspects: tuple[Suspect, ...]

    def value(self, metric: str) -> float | None:
        if metric not in DIAGNOSTIC_METRICS:
            raise KeyError(metric)
        result: float | None = getattr(self, metric)
        return result

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            **{metric: self.value(metric) for metric in DIAGNOSTIC_METRICS},
            "tasks_with_samples": self.tasks_with_samples,
            "suspects": len(self.suspects),
            "suspects_listed": [
                {"episode_id": s.episode_id, "plan_id": s.plan_id, "reason": s.reason}
                for s in self.suspects[:MAX_LISTED_SUSPECTS]
            ],
        }


def diagnose(facts: EpisodeFacts, diversity: Mapping[TaskKey, TaskDiversity] | None = None) -> Diagnostics:
    """The diagnostics of one side's episodes (drops are left out: they have no reply).
    ``diversity`` is ``task_diversity`` of a superset of them, computed once and shared by
    every slice; by default it is computed here."""
    done = facts.done
    episodes = int(done.sum())
    tokens = facts.completion_tokens[done]
    tokens = tokens[~np.isnan(tokens)]
    judged = facts.bigram_ratio[done]
    judged = judged[~np.isnan(judged)]
    passed = done & facts.passed
    suspects = tuple(
        sorted(
            (
                Suspect(episode_id or "", facts.plan_ids[row], reason)
                for row, (episode_id, reason) in facts.suspects.items()
                if passed[row]
            ),
            key=lambda s: s.plan_id,
        )
    )
    distinct, similar, identical, tasks = _diversity(facts, task_diversity(facts) if diversity is None else diversity)
    return Diagnostics(
        episodes=episodes,
        mean_completion_tokens=stable(float(tokens.mean())) if len(tokens) else None,
        p50_completion_tokens=stable(float(np.percentile(tokens, 50))) if len(tokens) else None,
        p95_completion_tokens=stable(float(np.percentile(tokens, 95))) if len(tokens) else None,
        truncation_rate=_share(int(facts.truncated[done].sum()), episodes),
        repetition_rate=_share(int((judged < REPETITION_RATIO).sum()), len(judged)),
        tasks_with_samples=tasks,
        distinct_answers_per_task=distinct,
        mean_pairwise_similarity=similar,
        identical_samples_rate=identical,
        reward_hacking_rate=(_share(len(suspects), int(passed.sum())) or 0.0) if episodes else None,
        suspects=suspects,
    )


@dataclass(frozen=True)
class TaskDiversity:
    """One task's samples (K >= 2 completed): distinct answer keys, mean pairwise sketch
    similarity of the sketched samples' replies (None with fewer than two), all replies equal."""

    distinct_answers: int
    similarity: float | None
    identical: bool


def task_diversity(facts: EpisodeFacts) -> dict[TaskKey, TaskDiversity]:
    """The diversity of every task with at least two completed samples."""
    by_task = group(facts.task, np.flatnonzero(facts.done))
    order = by_task.order.tolist()
    answers = facts.answer[by_task.order].tolist()
    crcs = facts.reply_crc[by_task.order].tolist()
    samples = facts.sample[by_task.order].tolist()
    out: dict[TaskKey, TaskDiversity] = {}
    for task, start, end in zip(by_task.keys, by_task.starts, by_task.ends, strict=True):
        if end - start < 2:
            continue
        sketched = sorted((i for i in range(start, end) if samples[i] < SKETCHED_SAMPLES), key=samples.__getitem__)
        pairs = _similarities([facts.reply_sketch[order[i]] for i in sketched])
        out[facts.task_keys[task]] = TaskDiversity(
            distinct_answers=len({a for a in answers[start:end] if a}),
            similarity=sum(pairs) / len(pairs) if pairs else None,
            identical=len(set(crcs[start:end])) == 1,
        )
    return out


def _similarities(sketches: list[bytes]) -> list[float]:
    """``replies.similarity`` of every pair of packed sketches, in ``combinations`` order
    (equal sketches are alike, 1.0, without unpacking them)."""
    pairs = list(combinations(range(len(sketches)), 2))
    if all(sketches[i] == sketches[j] for i, j in pairs):
        return [1.0] * len(pairs)
    sets = [frozenset(array.array("I", sketch)) for sketch in sketches]
    return [1.0 if sketches[i] == sketches[j] else similarity(sets[i], sets[j]) for i, j in pairs]


def _diversity(
    done: EpisodeFacts, diversity: Mapping[TaskKey, TaskDiversity]
) -> tuple[float | None, float | None, float | None, int]:
    keys = (done.task_keys[task] for task in np.unique(done.task[done.done]).tolist())
    tasks = sorted(key for key in keys if key in diversity)
    if not tasks:
        return None, None, None, 0
    values = [diversity[t] for t in tasks]
    similar = [v.similarity for v in values if v.similarity is not None]
    return (
        stable(sum(v.distinct_answers for v in values) / len(values)),
        stable(sum(similar) / len(similar)) if similar else None,
        _share(sum(v.identical for v in values), len(values)),
        len(values),
    )


def _share(part: int, whole: int) -> float | None:
    return stable(part / whole) if whole else None
