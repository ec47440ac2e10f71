"""Score views for a rollout card, derived from episode and drop records on every call.

Nothing here is stored by hand: a card recomputes its views from the records, so it cannot
drift from the rollouts it summarises. Both reporting rules for dropped samples are always
computed side by side, because whether a drop should count against the agent is a judgement
the reader makes, and a card that picked one rule would hide the other's numbers.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from frostgym.cards import twin_gap
from frostgym.core.episode import Head
from frostgym.core.grade import passes, violated
from frostgym.core.stats import wilson_interval

Rule = Literal["errors_as_failures", "errors_excluded"]
RULE_NAMES: Final[tuple[Rule, ...]] = ("errors_as_failures", "errors_excluded")
SLICES: Final[tuple[str, ...]] = ("by_env", "by_difficulty", "by_tag")
NO_DIFFICULTY: Final = "none"
#: The grade label of an episode whose reply gave no answer (an abstention or a refusal).
NO_ANSWER: Final = "no_answer"

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
    "no_answer_rate": (
        "The share of graded episodes (completed, with a grade: drops have none, so it is the same under both "
        "rules) whose grade's label is 'no_answer' (the reply gave no answer: an abstention or a refusal), with "
        "its 95% Wilson score interval over those episodes (taken as independent: with several samples per task "
        "the interval is too narrow); value and interval are null when no episode was graded."
    ),
    "selective_accuracy": (
        "The pass rate among the graded episodes that answered (label not 'no_answer'): accuracy where the model "
        "chose to answer, beside pass@1's over every sample; with its 95% Wilson interval as no_answer_rate's; "
        "null when every graded episode abstained (or none was graded)."
    ),
    "safety_violation_rate": (
        "The share of graded episodes whose grader checks safety (its grade has a 'safety' component: "
        "frostgym.core.grade.violated) that did something unsafe (safety below 1: a write or destructive SQL "
        "statement, a call to a tool that changes state the task only reads), with its 95% Wilson interval as "
        "no_answer_rate's; the same under both rules; null when no graded episode was checked."
    ),
}


@dataclass(slots=True)
class Sample:
    """One counted attempt at a task, reduced to what the metrics read, so episodes and
    drops (a failed sample: reward 0, no answer, no components) go through the same
    arithmetic. ``abstained``: whether its grade's label is ``no_answer`` (None: it has no
    grade, as a drop); ``violated``: whether its grade records a safety violation (None: no
    grade, or a grader that checks none). Read, never changed."""

    task: tuple[str, str]
    index: int
    reward: float
    passed: bool
    answer: str | None
    components: Mapping[str, float] | None
    abstained: bool | None = None
    violated: bool | None = None


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
    return _pass_at_k(n, c, k)


def _pass_at_k(n: int, c: int, k: int) -> float | None:
    if n < k:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """pass^k for one task, or None when n < k. Exact integer binomials keep it exact
    until the final division, since its values near 0 are the interesting ones."""
    _check_counts(n, c, k)
    return _pass_hat_k(n, c, k)


def _pass_hat_k(n: int, c: int, k: int) -> float | None:
    return None if n < k else math.comb(c, k) / math.comb(n, k)


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


def sample_of(head: Head) -> Sample:
    """The sample a record counts as (a completed episode without a grade is a sample that
    did not pass; a drop, a failed one). The record's checks (``head_problem``) are all the
    views rely on: no field is checked again here."""
    grade = head.grade
    task = (head.env_id, head.task_id)
    if grade is None:
        return Sample(task, head.sample, head.reward if head.drop is None else 0.0, False, None, None)
    details = grade.get("details")
    answer = details.get("answer_key") if details else None
    abstained = grade.get("label") == NO_ANSWER
    return Sample(
        task, head.sample, head.reward, passes(grade), answer, grade["components"], abstained, violated(grade)
    )


@dataclass(slots=True)
class TaskRecord:
    """One record of a task reduced to what the task's entry reads (``task_entry``): its
    sample number, the sample it counts as (None for a drop neither rule counts), whether
    it is a drop, and the slices it falls in. Why not the head itself: a card's read-back
    keeps a task's records until the task has all of them, which in a plan drawn sample by
    sample is every record until the last round, and a head holds the whole grade (its
    weights, details and label besides what the views read): held, a math record's head
    took 2.3 KB and this takes 1.0 KB. Read, never changed."""

    index: int
    sample: Sample | None
    dropped: bool
    tags: Sequence[str]
    difficulty: str | None


def task_record(head: Head) -> TaskRecord:
    """What ``task_entry`` reads of a record (``sample_of`` for the samples a rule counts)."""
    drop = head.drop
    counted = drop is None or drop.counted_as == "failure"
    return TaskRecord(head.sample, sample_of(head) if counted else None, drop is not None, head.tags, head.difficulty)


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


def _task_of(samples: Sequence[Sample]) -> _Task:
    ordered = sorted(samples, key=lambda s: s.index)
    return _Task(
        n=len(ordered),
        c=sum(s.passed for s in ordered),
        best_reward=max(s.reward for s in ordered),
        votes=tuple((s.answer, s.passed) for s in ordered),
    )


def _task_maj_at_ks(task: _Task, ks: Sequence[int]) -> dict[int, float | None]:
    """maj@k at every k of ``ks`` in one pass over the votes: the winner of the first k votes
    is ``majority_vote``'s (most votes, a tie to the earliest first vote), and the task is
    solved when the winning answer was given by a passing sample: answer keys can agree
    while a required component (a format check, say) still fails."""
    values: dict[int, float | None] = {k: None for k in ks if k > task.n}
    wanted = sorted(k for k in ks if k <= task.n)
    counts: dict[str, int] = {}
    first_vote: dict[str, int] = {}
    passing: set[str] = set()
    winner: str | None = None
    for index, (answer, passed) in enumerate(task.votes[: wanted[-1]] if wanted else (), start=1):
        if answer is not None:
            counts[answer] = counts.get(answer, 0) + 1
            first_vote.setdefault(answer, index)
            if passed:
                passing.add(answer)
            if winner is None or (counts[answer], -first_vote[answer]) > (counts[winner], -first_vote[winner]):
                winner = answer
        while wanted and wanted[0] == index:
            values[wanted.pop(0)] = 0.0 if winner is None else float(winner in passing)
    return {k: values[k] for k in ks}


@dataclass(frozen=True)
class TaskValues:
    """Everything a view needs from one task under one rule, computed once and shared by
    the overall view and every slice the task is in."""

    rewards: tuple[float, ...]
    components: Mapping[str, list[float]]  # name -> values over the task's graded samples
    task: _Task
    per_k: Mapping[str, Mapping[int, float | None]]  # metric -> k -> value
    graded: int = 0  # samples with a grade
    no_answer: int = 0  # ... of which labelled no_answer
    answered_passed: int = 0  # ... of the others, those that passed
    checked: int = 0  # graded samples whose grader checks safety
    violations: int = 0  # ... of which violated it


def task_values(samples: Sequence[Sample], ks: Sequence[int]) -> TaskValues:
    """One task's values under one rule, from the samples that rule counts (at least one),
    at each of ``ks`` (positive ints: not checked again here)."""
    task = _task_of(samples)
    components: dict[str, list[float]] = defaultdict(list)
    graded = no_answer = answered_passed = checked = violations = 0
    for sample in samples:
        if sample.violated is not None:
            checked += 1
            violations += sample.violated
        for name, value in (sample.components or {}).items():
            components[name].append(value)
        if sample.abstained is not None:
            graded += 1
            if sample.abstained:
                no_answer += 1
            elif sample.passed:
                answered_passed += 1
    return TaskValues(
        rewards=tuple(s.reward for s in samples),
        components=components,
        task=task,
        per_k={
            "pass@k": {k: _pass_at_k(task.n, task.c, k) for k in ks},
            "pass^k": {k: _pass_hat_k(task.n, task.c, k) for k in ks},
            "maj@k": _task_maj_at_ks(task, ks),
        },
        graded=graded,
        no_answer=no_answer,
        answered_passed=answered_passed,
        checked=checked,
        violations=violations,
    )


TaskKey = tuple[str, str]
MetricName = Literal["pass@k", "pass^k", "maj@k"]
METRICS: Final[tuple[MetricName, ...]] = ("pass@k", "pass^k", "maj@k")


class ExactSum:
    """A running sum of floats that gives exactly what ``math.fsum`` of all of them gives,
    in any order, while holding a few floats instead of every one: ``total`` is ``fsum``'s
    correctly rounded sum of the exact total.

    Why: a card's views are means over every task and episode, and holding each task's
    values until the end to take those ``fsum``s costs a card's read-back process 3 KB an
    episode (3 GB at 1,000,000 episodes). Every ``FOLD`` values the ones held are replaced by floats
    whose exact sum is theirs (``fsum`` of them, then ``fsum`` of what that rounding left,
    and so on until nothing is left: one or two floats in practice), so the sum is never
    rounded before ``total``. A value no fold can take exactly (an infinity, an overflow)
    is kept as it is, and the sum is then ``fsum`` of everything, as before."""

    __slots__ = ("_fold_at", "_values", "count", "missing")

    FOLD = 256
    #: Most floats one fold may leave (each is at least 2**53 times smaller than the one
    #: before, so 40 cover every double); a fold that would leave more is not made.
    MAX_PARTIALS = 48

    def __init__(self) -> None:
        self.count = 0
        self.missing = 0  # for its user: the values it was not given (a task with n < k)
        self._values: list[float] = []
        self._fold_at = self.FOLD

    def add(self, value: float) -> None:
        self.count += 1
        values = self._values
        values.append(value)
        if len(values) >= self._fold_at:
            self._fold()

    def extend(self, values: Sequence[float]) -> None:
        self.count += len(values)
        self._values += values
        if len(self._values) >= self._fold_at:
            self._fold()

    def _fold(self) -> None:
        values = self._values
        try:
            partials = [math.fsum(values)]
            while math.isfinite(partials[-1]) and len(partials) <= self.MAX_PARTIALS:
                rest = math.fsum([*values, *(-p for p in partials)])
                if rest == 0.0:
                    self._values = partials
                    self._fold_at = len(partials) + self.FOLD
                    return
                partials.append(rest)
        except (OverflowError, ValueError):  # an infinity or an overflow: keep every value
            pass
        self._fold_at = 2 * len(values)

    def total(self) -> float:
        """``math.fsum`` of every value added."""
        return math.fsum(self._values)

    def mean(self) -> float | None:
        """The values' ``fsum`` over their count; None when there are none."""
        return math.fsum(self._values) / self.count if self.count else None


class _Group:
    """One rule's metrics over a group of tasks (a run, or one slice of it), accumulated a
    task at a time: the per-task values each metric averages, appended as they come (as cheap
    as it gets: a card's read-back process adds every task to ten or so groups), and every
    ``FOLD_TASKS`` tasks folded into exact sums (``ExactSum``) and counts, so a group holds
    the same few numbers however many tasks it has.

    Every mean is an exact sum (``math.fsum``'s), so the views come out the same in the
    order a run's tasks complete (a card's read-back process adds each task once it has
    all its samples) as in sorted order."""

    __slots__ = (
        "answered_passed",
        "best",
        "checked",
        "components",
        "episodes",
        "graded",
        "n_max",
        "n_min",
        "no_answer",
        "pass_any",
        "per_k",
        "rewards",
        "sums",
        "tasks",
        "violations",
    )

    #: Tasks added between two folds.
    FOLD_TASKS = 64

    def __init__(self, ks: Sequence[int]) -> None:
        self.tasks = 0
        self.episodes = 0
        self.n_min = self.n_max = 0
        self.graded = self.no_answer = self.answered_passed = 0  # counts: no order to depend on
        self.checked = self.violations = 0
        # Appended since the last fold: metric -> k -> the tasks' values (None: n < k), ...
        self.per_k: dict[MetricName, dict[int, list[float | None]]] = {m: {k: [] for k in ks} for m in METRICS}
        self.best: list[float] = []
        self.pass_any: list[float] = []
        self.rewards: list[float] = []
        self.components: dict[str, list[float]] = {}
        # ... and folded: by what they sum ("best", "pass_any", "rewards", (metric, k), ("component", name)).
        self.sums: dict[Any, ExactSum] = {}

    def add(self, values: TaskValues) -> None:
        task = values.task
        self.n_min = task.n if not self.tasks else min(self.n_min, task.n)
        self.n_max = max(self.n_max, task.n)
        self.tasks += 1
        self.episodes += task.n
        self.graded += values.graded
        self.no_answer += values.no_answer
        self.answered_passed += values.answered_passed
        self.checked += values.checked
        self.violations += values.violations
        for metric, by_k in self.per_k.items():
            of_task = values.per_k[metric]
            for k, collected in by_k.items():
                collected.append(of_task[k])
        self.best.append(task.best_reward)
        self.pass_any.append(float(task.c > 0))
        self.rewards += values.rewards
        components = self.components
        for name, each in values.components.items():
            if name in components:
                components[name] += each
            else:
                components[name] = list(each)
        if len(self.best) >= self.FOLD_TASKS:
            self._fold()

    def _sum(self, key: Any) -> ExactSum:
        summed = self.sums.get(key)
        if summed is None:
            summed = self.sums[key] = ExactSum()
        return summed

    def _fold(self) -> None:
        """Fold what was appended since the last fold into the sums."""
        for metric, by_k in self.per_k.items():
            for k, collected in by_k.items():
                summed = self._sum((metric, k))
                missing = collected.count(None)
                summed.extend([v for v in collected if v is not None] if missing else cast(list[float], collected))
                summed.missing += missing
                collected.clear()
        for key, appended in (("best", self.best), ("pass_any", self.pass_any), ("rewards", self.rewards)):
            self._sum(key).extend(appended)
            appended.clear()
        for name, each in self.components.items():
            self._sum(("component", name)).extend(each)
        self.components.clear()

    def metrics(self) -> dict[str, Any]:
        self._fold()
        tasks, episodes, sums = self.tasks, self.episodes, self.sums
        components = sorted((key[1], summed) for key, summed in sums.items() if key[0] == "component")
        return {
            "episodes": episodes,
            "tasks": tasks,
            "per_task_n": {"min": self.n_min, "max": self.n_max} if tasks else None,
            "mean_reward": self._sum("rewards").total() / episodes if episodes else None,
            "component_means": {name: each.total() / each.count for name, each in components},
            **{metric: {str(k): _aggregate(self._sum((metric, k))) for k in self.per_k[metric]} for metric in METRICS},
            "best_of_n": {
                "value": self._sum("best").mean(),
                "tasks_counted": tasks,
                "pass_any": self._sum("pass_any").mean(),
            },
            "no_answer_rate": {
                **_rate(self.no_answer, self.graded),
                "no_answer": self.no_answer,
                "graded": self.graded,
            },
            "selective_accuracy": {
                **_rate(self.answered_passed, self.graded - self.no_answer),
                "passed": self.answered_passed,
                "answered": self.graded - self.no_answer,
            },
            "safety_violation_rate": {
                **_rate(self.violations, self.checked),
                "violations": self.violations,
                "checked": self.checked,
            },
        }


def _rate(successes: int, trials: int) -> dict[str, float | None]:
    """``successes / trials`` and its 95% Wilson interval (``frostgym.core.stats``); all None
    for no trials."""
    interval = wilson_interval(successes, trials)
    return {
        "value": successes / trials if trials else None,
        "ci_low": None if interval is None else interval.low,
        "ci_high": None if interval is None else interval.high,
    }


def _aggregate(per_task: ExactSum) -> dict[str, Any]:
    """Mean over tasks with a value; tasks_n_lt_k says how many were too small to count."""
    return {"value": per_task.mean(), "tasks_counted": per_task.count, "tasks_n_lt_k": per_task.missing}


class ViewsBuilder:
    """The views of a run (as ``compute_views`` returns them) built task by task: ``add``
    each task's entry (``task_entry``) once it has all its records, in any order, then
    ``views``. Each task's values are folded into both rules' groups of the run and of every
    slice the task is in (``_Group``), and then let go: the builder's memory is that of its
    groups, not of its tasks. The one thing kept per task is its pass@1 under each rule, for
    the twin gaps, and only with ``twins`` (a plan without twin tasks has no twin gap)."""

    def __init__(self, ks: Sequence[int], *, twins: bool = True) -> None:
        """``ks``: sorted positive ints (``normalise_ks``); ``twins``: whether the tasks
        added may include twins (``frostgym.cards.twin_gap``), whose gaps need every task's
        pass@1."""
        self.ks = list(ks)
        self._groups: dict[tuple[str, str, Rule], _Group] = {}
        self._names: dict[str, set[str]] = {view: set() for view in SLICES}
        self._twins = twins
        self._pass_at_1: dict[Rule, dict[TaskKey, float]] = {rule: {} for rule in RULE_NAMES}  # for twin gaps

    def _group(self, view: str, name: str, rule: Rule) -> _Group:
        group = self._groups.get((view, name, rule))
        if group is None:
            group = self._groups[(view, name, rule)] = _Group(self.ks)
        return group

    def add(self, key: TaskKey, entry: TaskEntry) -> None:
        """Count the task ``key`` (once: a task added twice is counted twice)."""
        for view, names in entry.slices.items():
            self._names[view].update(names)
        for rule, values in entry.values.items():
            self._group("overall", "", rule).add(values)
            for view, names in entry.slices.items():
                for name in names:
                    self._group(view, name, rule).add(values)
            if self._twins:
                self._pass_at_1[rule][key] = values.task.c / values.task.n

    def _both_rules(self, view: str, name: str) -> dict[str, Any]:
        """Both rules' metrics of one group."""
        return {rule: (self._groups.get((view, name, rule)) or _Group(self.ks)).metrics() for rule in RULE_NAMES}

    def views(self) -> dict[str, Any]:
        """The views of the tasks added so far."""
        views: dict[str, Any] = {
            "ks": list(self.ks),
            "rules": dict(RULES),
            "definitions": dict(DEFINITIONS),
            "overall": self._both_rules("overall", ""),
        }
        for view in SLICES:
            views[view] = {name: self._both_rules(view, name) for name in sorted(self._names[view])}
        gaps = twin_gap.twin_gaps({rule: dict(sorted(rates.items())) for rule, rates in self._pass_at_1.items()})
        if gaps:  # a card played with --twins (frostgym.cards.twin_gap)
            views["twin_gap"] = gaps
            views["definitions"]["twin_gap"] = twin_gap.DEFINITION
        return views


def normalise_ks(ks: Sequence[int]) -> list[int]:
    """``ks`` sorted, without repeats. Raises ``ValueError`` for a k that is not a positive int."""
    if isinstance(ks, str):
        raise ValueError(f"ks must be a sequence of positive ints, got {ks!r}")
    for k in ks:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"every k must be a positive int, got {k!r}")
    return sorted(set(ks))


def compute_views(heads: Iterable[Head], ks: Sequence[int]) -> dict[str, Any]:
    """Every score view of a run, under both reporting rules, as plain JSON-ready data,
    from the heads of its records (completed episodes and drops alike, in any order).
    Raises ``ValueError`` for a ``k`` that is not a positive int, or a sample of a task
    recorded twice (it would be counted twice)."""
    ks_sorted = normalise_ks(ks)
    by_task: dict[TaskKey, list[TaskRecord]] = defaultdict(list)
    for head in heads:
        by_task[(head.env_id, head.task_id)].append(task_record(head))
    return views_of({key: task_entry(key, by_task[key], ks_sorted) for key in sorted(by_task)}, ks_sorted)


@dataclass(frozen=True)
class TaskEntry:
    """What the views take from one task: its values under each rule that counts any of
    its samples, and the slices it is in (view -> names; by any of its samples, dropped ones
    too, so the set of slices does not depend on the rule)."""

    values: Mapping[Rule, TaskValues]
    slices: Mapping[str, frozenset[str]]


def task_entry(key: TaskKey, group: Sequence[TaskRecord], ks: Sequence[int]) -> TaskEntry:
    """The entry of the task ``key`` from all its records (``task_record``), at ``ks``
    (sorted positive ints, as ``normalise_ks`` returns). Raises ``ValueError`` for a
    sample recorded twice."""
    if len({record.index for record in group}) < len(group):
        repeated = sorted(n for n, count in Counter(record.index for record in group).items() if count > 1)
        raise ValueError(f"{key[0]!r} task {key[1]!r} sample {repeated[0]} is recorded more than once")
    completed = [record.sample for record in group if record.sample is not None and not record.dropped]
    failed = [record.sample for record in group if record.sample is not None and record.dropped]
    values: dict[Rule, TaskValues] = {}
    if completed:
        values["errors_excluded"] = task_values(completed, ks)
    if completed or failed:
        values["errors_as_failures"] = task_values([*completed, *failed], ks) if failed else values["errors_excluded"]
    tags: set[str] = set()
    for record in group:
        tags.update(record.tags)
    slices = {
        "by_env": frozenset((key[0],)),
        "by_difficulty": frozenset(
            NO_DIFFICULTY if record.difficulty is None else record.difficulty for record in group
        ),
        "by_tag": frozenset(tags),
    }
    return TaskEntry(values, slices)


def views_of(entries: Mapping[TaskKey, TaskEntry], ks: Sequence[int]) -> dict[str, Any]:
    """The views (as ``compute_views`` returns them) of a run whose tasks have ``entries``
    (``task_entry``, in any order) at ``ks`` (sorted positive ints)."""
    builder = ViewsBuilder(ks)
    for key, entry in entries.items():
        builder.add(key, entry)
    return builder.views()
