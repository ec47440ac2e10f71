"""Score views for a rollout card, derived from episode and drop records on every call.

Nothing here is stored by hand: a card recomputes its views from the records, so it cannot
drift from the rollouts it summarises. Both reporting rules for dropped samples are always
computed side by side, because whether a drop should count against the agent is a judgement
the reader makes, and a card that picked one rule would hide the other's numbers.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from frostgym.core.episode import CountedAs
from frostgym.core.grade import passes

Rule = Literal["errors_as_failures", "errors_excluded"]
RULE_NAMES: Final[tuple[Rule, ...]] = ("errors_as_failures", "errors_excluded")
COUNTED_AS_VALUES: Final[tuple[str, ...]] = get_args(CountedAs)
SLICES: Final[tuple[str, ...]] = ("by_env", "by_difficulty", "by_tag")
NO_DIFFICULTY: Final = "none"

RULES: Final[Mapping[str, str]] = {
    "errors_as_failures": (
        "Drops counted as 'failure' are samples that failed (reward 0, no answer, not passed) and drops counted "
        "as 'excluded' are left out, so a task's n is its completed episodes plus its failure drops and every "
        "denominator (episodes, tasks, tasks with n >= k) includes those failures; component_means uses "
        "completed graded episodes only, as under the other rule."
    ),
    "errors_excluded": (
        "Every drop is left out, so a task's n is its completed episodes only, a task whose samples were all "
        "dropped is in no denominator, and component_means (completed graded episodes only) equals the other rule's."
    ),
}

DEFINITIONS: Final[Mapping[str, str]] = {
    "pass@k": (
        "Per task with n counted samples of which c pass (frostgym.core.grade.passes), the unbiased estimate "
        "(Chen et al. 2021) that at least one of k samples drawn without replacement passes, "
        "1 - prod_{i=n-c+1..n} (1 - k/i), which is 1 when n - c < k; averaged over tasks with n >= k, while "
        "tasks with n < k are counted in tasks_n_lt_k and left out (k is never capped to n)."
    ),
    "pass^k": (
        "Per task, the chance that all of k samples drawn without replacement pass (tau-bench), C(c, k) / C(n, k); "
        "averaged over tasks with n >= k, tasks with n < k counted in tasks_n_lt_k and left out."
    ),
    "maj@k": (
        "Per task, the first k counted samples by sample index vote with grade.details.answer_key (samples with "
        "no grade or no answer key, and drops, do not vote); the most common answer wins, and a tie goes to the "
        "tied answer whose first vote has the lowest sample index; the task is solved when some sample voting "
        "for the winning answer passed and unsolved when nobody voted; averaged over tasks with n >= k."
    ),
    "best_of_n": (
        "Per task, the highest reward among its counted samples, averaged over tasks; pass_any is the fraction "
        "of tasks where any counted sample passed."
    ),
    "mean_reward": (
        "Mean reward over all counted samples, so tasks with more samples weigh more; failure drops add reward 0."
    ),
    "component_means": (
        "Per grade component, the mean over completed episodes whose grade has that component; drops never "
        "have a grade, so it is the same under both rules."
    ),
}


@dataclass(frozen=True)
class _Sample:
    """One counted attempt at a task, reduced to what the metrics read, so episodes and
    drops go through the same arithmetic."""

    task: tuple[str, str]
    index: int
    reward: float
    passed: bool
    answer: str | None
    components: Mapping[str, float] | None
    slices: tuple[tuple[str, str], ...]


# ---------------------------------------------------------------------------------------------
# Per-task estimators


def _check_counts(n: int, c: int, k: int) -> None:
    """Reject counts no run can produce, rather than returning a plausible-looking number."""
    for name, value in (("n", n), ("c", c), ("k", k)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an int, got {value!r}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k for one task, or None when n < k: capping k to n would report a
    different quantity under the same name. The product form avoids the huge binomials
    of 1 - C(n-c, k) / C(n, k)."""
    _check_counts(n, c, k)
    if n < k:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """pass^k for one task, or None when n < k. Exact integer binomials keep it exact
    until the final division, since its values near 0 are the interesting ones."""
    _check_counts(n, c, k)
    if n < k:
        return None
    return math.comb(c, k) / math.comb(n, k)


def majority_vote(answers: Sequence[str | None]) -> str | None:
    """The winning answer among votes given in sample order (None does not vote), or None
    when nobody voted. Ties go to the answer voted first, so the result depends only on
    the samples and never on hash or sort order of the answers."""
    counts: dict[str, int] = {}
    for answer in answers:
        if answer is not None:
            counts[answer] = counts.get(answer, 0) + 1
    winner: str | None = None
    for answer, count in counts.items():  # insertion order is first-vote order
        if winner is None or count > counts[winner]:
            winner = answer
    return winner


def default_ks(samples: int) -> list[int]:
    """The ks worth reporting for ``samples`` per task: powers of two keep the curve readable
    at any budget, and ``samples`` itself gives the widest view the run supports."""
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ValueError(f"samples must be a positive int, got {samples!r}")
    ks = {1, samples}
    power = 2
    while power <= samples:
        ks.add(power)
        power *= 2
    return sorted(ks)


# ---------------------------------------------------------------------------------------------
# Records to samples


def _name(record: Mapping[str, Any]) -> str:
    """How errors point at a record, so a bad line in a JSONL file can be found."""
    return f"{record.get('env_id')!r} task {record.get('task_id')!r} sample {record.get('sample')!r}"


def _field(record: Mapping[str, Any], key: str) -> Any:
    if key not in record:
        raise ValueError(f"record {_name(record)} has no {key!r}")
    return record[key]


def _text(record: Mapping[str, Any], key: str) -> str:
    value = _field(record, key)
    if not isinstance(value, str):
        raise ValueError(f"record {_name(record)}: {key} must be a str, got {value!r}")
    return value


def _sample_index(record: Mapping[str, Any]) -> int:
    value = _field(record, "sample")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"record {_name(record)}: sample must be an int >= 0")
    return value


def _slice_keys(record: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Every (view, key) the record shows up under, fixed once so both rules slice alike."""
    difficulty = record.get("difficulty")
    tags = record.get("tags") or []
    if isinstance(tags, str) or not all(isinstance(tag, str) for tag in tags):
        raise ValueError(f"record {_name(record)}: tags must be a list of str, got {tags!r}")
    keys = [
        ("by_env", _text(record, "env_id")),
        ("by_difficulty", NO_DIFFICULTY if difficulty is None else str(difficulty)),
    ]
    keys.extend(("by_tag", tag) for tag in sorted(set(tags)))
    return tuple(keys)


def _reward(record: Mapping[str, Any]) -> float:
    """A finite reward, so every mean stays a JSON number."""
    value = _field(record, "reward")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"record {_name(record)}: reward must be a finite number, got {value!r}")
    return float(value)


def _answer_key(record: Mapping[str, Any], grade: Mapping[str, Any]) -> str | None:
    answer = (grade.get("details") or {}).get("answer_key")
    if answer is not None and not isinstance(answer, str):
        raise ValueError(f"record {_name(record)}: answer_key must be a str or None, got {answer!r}")
    return answer


def _components(record: Mapping[str, Any], grade: Mapping[str, Any]) -> dict[str, float]:
    components = grade.get("components") or {}
    if not isinstance(components, Mapping):
        raise ValueError(f"record {_name(record)}: grade components must be a mapping, got {components!r}")
    return {str(name): float(value) for name, value in components.items()}


def _episode_sample(episode: Mapping[str, Any]) -> _Sample:
    """A completed episode; one without a grade is a counted sample that did not pass."""
    grade = episode.get("grade")
    if grade is not None and not isinstance(grade, Mapping):
        raise ValueError(f"episode {_name(episode)}: grade must be a mapping or None, got {grade!r}")
    return _Sample(
        task=(_text(episode, "env_id"), _text(episode, "task_id")),
        index=_sample_index(episode),
        reward=_reward(episode),
        passed=grade is not None and passes(grade),
        answer=None if grade is None else _answer_key(episode, grade),
        components=None if grade is None else _components(episode, grade),
        slices=_slice_keys(episode),
    )


def _drop_sample(drop: Mapping[str, Any]) -> tuple[_Sample, str]:
    """A drop as the failed sample it becomes under errors_as_failures, with how it counts."""
    counted_as = drop.get("counted_as")
    if counted_as not in COUNTED_AS_VALUES:
        raise ValueError(f"drop {_name(drop)}: counted_as must be one of {list(COUNTED_AS_VALUES)}, got {counted_as!r}")
    sample = _Sample(
        task=(_text(drop, "env_id"), _text(drop, "task_id")),
        index=_sample_index(drop),
        reward=0.0,
        passed=False,
        answer=None,
        components=None,
        slices=_slice_keys(drop),
    )
    return sample, str(counted_as)


def _check_unique(samples: Iterable[_Sample]) -> None:
    """A sample both completed and dropped (or recorded twice) would be counted twice."""
    seen: set[tuple[tuple[str, str], int]] = set()
    for sample in samples:
        key = (sample.task, sample.index)
        if key in seen:
            env_id, task_id = sample.task
            raise ValueError(f"{env_id!r} task {task_id!r} sample {sample.index} is recorded more than once")
        seen.add(key)


# ---------------------------------------------------------------------------------------------
# Aggregation


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


@dataclass(frozen=True)
class _Task:
    """One task's counted samples, reduced once per group so that every k costs O(1)
    (O(k) for maj@k) instead of another pass over the samples."""

    n: int
    c: int
    best_reward: float
    votes: tuple[tuple[str | None, bool], ...]  # (answer key, passed) in sample order


def _task_of(samples: Sequence[_Sample]) -> _Task:
    ordered = sorted(samples, key=lambda s: s.index)
    return _Task(
        n=len(ordered),
        c=sum(s.passed for s in ordered),
        best_reward=max(s.reward for s in ordered),
        votes=tuple((s.answer, s.passed) for s in ordered),
    )


def _aggregate(per_task: Sequence[float | None]) -> dict[str, Any]:
    """Mean over tasks with a value; tasks_n_lt_k says how many were too small to count."""
    counted = [value for value in per_task if value is not None]
    return {"value": _mean(counted), "tasks_counted": len(counted), "tasks_n_lt_k": len(per_task) - len(counted)}


def _task_maj_at_k(task: _Task, k: int) -> float | None:
    """Solved when the winning answer was given by a passing sample: answer keys can agree
    while a required component (a format check, say) still fails."""
    if task.n < k:
        return None
    first = task.votes[:k]
    winner = majority_vote([answer for answer, _ in first])
    if winner is None:
        return 0.0
    return 1.0 if any(answer == winner and passed for answer, passed in first) else 0.0


@dataclass(frozen=True)
class _TaskValues:
    """Everything a view needs from one task under one rule, computed once and shared by
    the overall view and every slice the task is in."""

    rewards: tuple[float, ...]
    components: Mapping[str, list[float]]  # name -> values over the task's graded samples
    task: _Task
    per_k: Mapping[str, Mapping[int, float | None]]  # metric -> k -> value


def _task_values(samples: Sequence[_Sample], ks: Sequence[int]) -> _TaskValues:
    task = _task_of(samples)
    components: dict[str, list[float]] = defaultdict(list)
    for sample in samples:
        for name, value in (sample.components or {}).items():
            components[name].append(value)
    return _TaskValues(
        rewards=tuple(s.reward for s in samples),
        components=components,
        task=task,
        per_k={
            "pass@k": {k: pass_at_k(task.n, task.c, k) for k in ks},
            "pass^k": {k: pass_hat_k(task.n, task.c, k) for k in ks},
            "maj@k": {k: _task_maj_at_k(task, k) for k in ks},
        },
    )


def _component_means(tasks: Iterable[_TaskValues]) -> dict[str, float]:
    values: dict[str, list[float]] = defaultdict(list)
    for task in tasks:
        for name, task_values in task.components.items():
            values[name] += task_values
    return {name: math.fsum(values[name]) / len(values[name]) for name in sorted(values)}


def _metrics(tasks: Sequence[_TaskValues], ks: Sequence[int]) -> dict[str, Any]:
    rewards = [reward for t in tasks for reward in t.rewards]
    sizes = [t.task.n for t in tasks]
    return {
        "episodes": len(rewards),
        "tasks": len(tasks),
        "per_task_n": {"min": min(sizes), "max": max(sizes)} if sizes else None,
        "mean_reward": _mean(rewards),
        "component_means": _component_means(tasks),
        **{
            metric: {str(k): _aggregate([t.per_k[metric][k] for t in tasks]) for k in ks}
            for metric in ("pass@k", "pass^k", "maj@k")
        },
        "best_of_n": {
            "value": _mean([t.task.best_reward for t in tasks]),
            "tasks_counted": len(tasks),
            "pass_any": _mean([float(t.task.c > 0) for t in tasks]),
        },
    }


TaskKey = tuple[str, str]


def _tables(counted: Mapping[Rule, Sequence[_Sample]], ks: Sequence[int]) -> dict[Rule, dict[TaskKey, _TaskValues]]:
    """Per rule, every task with at least one counted sample, in a fixed task order."""
    tables: dict[Rule, dict[TaskKey, _TaskValues]] = {}
    for rule in RULE_NAMES:
        grouped: dict[TaskKey, list[_Sample]] = defaultdict(list)
        for sample in counted[rule]:
            grouped[sample.task].append(sample)
        tables[rule] = {key: _task_values(grouped[key], ks) for key in sorted(grouped)}
    return tables


def _both_rules(
    tables: Mapping[Rule, Mapping[TaskKey, _TaskValues]], members: set[TaskKey] | None, ks: Sequence[int]
) -> dict[str, Any]:
    return {
        rule: _metrics([v for key, v in tables[rule].items() if members is None or key in members], ks)
        for rule in RULE_NAMES
    }


def _normalise_ks(ks: Sequence[int]) -> list[int]:
    if isinstance(ks, str):
        raise ValueError(f"ks must be a sequence of positive ints, got {ks!r}")
    for k in ks:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"every k must be a positive int, got {k!r}")
    return sorted(set(ks))


def compute_views(
    episodes: Iterable[Mapping[str, Any]], drops: Iterable[Mapping[str, Any]], ks: Sequence[int]
) -> dict[str, Any]:
    """Every score view of a run, under both reporting rules, as plain JSON-ready data."""
    ks_sorted = _normalise_ks(ks)
    completed = [_episode_sample(episode) for episode in episodes]
    dropped = [_drop_sample(drop) for drop in drops]
    _check_unique([*completed, *(sample for sample, _ in dropped)])
    counted: dict[Rule, list[_Sample]] = {
        "errors_as_failures": [*completed, *(sample for sample, how in dropped if how == "failure")],
        "errors_excluded": completed,
    }
    every = [*completed, *(sample for sample, _ in dropped)]
    tables = _tables(counted, ks_sorted)
    views: dict[str, Any] = {
        "ks": ks_sorted,
        "rules": dict(RULES),
        "definitions": dict(DEFINITIONS),
        "overall": _both_rules(tables, None, ks_sorted),
    }
    # A slice holds the tasks any of whose samples (dropped ones too) carry its key, so the
    # set of slices does not depend on the rule.
    for view in SLICES:
        members: dict[str, set[TaskKey]] = defaultdict(set)
        for sample in every:
            for name, key in sample.slices:
                if name == view:
                    members[key].add(sample.task)
        views[view] = {key: _both_rules(tables, members[key], ks_sorted) for key in sorted(members)}
    return views
