"""Every card view of both sides, per slice and rule, with the paired delta and its interval.

Why this module: a delta is only meaningful if it is a delta of the numbers each card shows,
so the per-task values come from the cards' own estimators (``frostgym.cards.views``:
pass@k, pass^k, maj@k, best-of-n, component means, and the rates of abstention, selective
accuracy and safety violations over graded episodes), and each view is written as a ratio of
per-task sums (``stats.RatioColumn``) so one task resampling gives every interval. pass@1
also gets McNemar's exact test over the paired episodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from frostgym.cards.views import NO_ANSWER, RULE_NAMES, Rule, Sample, task_values
from frostgym.compare.facts import BoolArray, EpisodeFacts, IntArray
from frostgym.compare.groups import group
from frostgym.core.grade import SAFETY
from frostgym.core.stats import FloatArray, RatioColumn, mcnemar_exact, paired_bootstrap, ratio, stable

#: A slice with fewer tasks than this (with a value on both sides) is marked too small: a
#: percentile bootstrap over so few clusters undercovers, so its interval is not a claim.
MIN_TASKS = 10

SliceId = tuple[str, str]  # ("overall", "") | ("env", id) | ("difficulty", d) | ("tag", t)
#: The views that are rates over a card's graded episodes (``frostgym.cards.views``): the
#: same under both rules, since a drop has no grade.
GRADED_RATES: tuple[str, ...] = ("no_answer_rate", "selective_accuracy", "safety_violation_rate")


@dataclass(frozen=True)
class ViewDelta:
    """One view of one slice under one rule, on both sides."""

    slice: str
    key: str
    view: str
    rule: Rule
    base: float | None
    cand: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n_tasks: int
    too_small: bool

    def to_json(self) -> dict[str, object]:
        return {
            "slice": self.slice,
            "key": self.key,
            "view": self.view,
            "rule": self.rule,
            "base": self.base,
            "cand": self.cand,
            "delta": self.delta,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "n_tasks": self.n_tasks,
            "too_small": self.too_small,
        }


def counted(facts: EpisodeFacts, rule: Rule) -> BoolArray:
    """The rows a rule counts: every completed episode, and under errors_as_failures the
    drops counted as failures."""
    return facts.done if rule == "errors_excluded" else facts.done | facts.failure_drop


def view_names(ks: Sequence[int], components: Iterable[str]) -> list[str]:
    """The views compared, in report order."""
    names = ["mean_reward"]
    for metric in ("pass@", "pass^", "maj@"):
        names.extend(f"{metric}{k}" for k in ks)
    names.append("best_of_n")
    names.extend(GRADED_RATES)
    names.extend(f"component:{name}" for name in sorted(set(components)))
    return names


def components_of(facts: EpisodeFacts) -> list[str]:
    """The grade components any of the rows has."""
    present: list[bool] = np.asarray(~np.isnan(facts.components).all(axis=0)).tolist()
    return [name for name, has in zip(facts.component_names, present, strict=True) if has]


Votes = tuple[tuple[int, bool], ...]
Cell = tuple[float, float]


def task_sums(
    facts: EpisodeFacts,
    counted_rows: BoolArray,
    task_row: IntArray,
    tasks: int,
    ks: Sequence[int],
    views: Sequence[str],
) -> FloatArray:
    """(numerator, denominator) per task and view, shape ``(tasks, len(views), 2)``, of the
    ``counted_rows``; ``task_row`` maps each row's task to its row here, or -1 to leave it
    out. A task with no counted row has (0, 0).

    The values are the cards' own (``frostgym.cards.views.task_values`` of the task's samples,
    in row order): sums of rewards and components are Python's ``sum`` in row order, and the
    pass@k, pass^k and maj@k estimates are computed once per distinct pattern of votes (which
    samples agree on an answer and which passed, in sample order), which is all they read."""
    out = np.zeros((tasks, len(views), 2))
    rows = np.flatnonzero(counted_rows & (task_row >= 0))
    by_row = group(task_row, rows)
    by_sample = group(task_row, rows, within=facts.sample)
    rewards = facts.reward[by_row.order].tolist()
    ordered_rewards = facts.reward[by_sample.order].tolist()
    passed = facts.passed[by_sample.order].tolist()
    answers = facts.answer[by_sample.order].tolist()
    kinds = [_kind(view, facts.component_names) for view in views]
    components = {column: facts.components[by_row.order, column].tolist() for _, column in kinds if column is not None}
    rates = _graded_rates(facts, by_row.order) if any(kind == "rate" for kind, _ in kinds) else {}
    filled = [(v, kind, column) for v, (kind, column) in enumerate(kinds) if kind != "estimate"]
    estimated = [(v, *_per_k(views[v])) for v, (kind, _) in enumerate(kinds) if kind == "estimate"]
    estimates: dict[Votes, list[Cell | None]] = {}
    samples: dict[tuple[int, int, bool], Sample] = {}
    for task, start, end in zip(by_row.keys, by_row.starts, by_row.ends, strict=True):
        votes = _votes(answers[start:end], passed[start:end])
        cells = estimates.get(votes)
        if cells is None:
            cells = estimates[votes] = _estimates(votes, ks, len(views), estimated, samples)
        row = list(cells)
        for v, kind, column in filled:
            if kind == "mean":
                row[v] = (float(sum(rewards[start:end])), float(end - start))
            elif kind == "best":
                row[v] = (max(ordered_rewards[start:end]), 1.0)
            elif kind == "rate":
                numerator, denominator = rates[views[v]]
                row[v] = (float(sum(numerator[start:end])), float(sum(denominator[start:end])))
            else:
                scores = [] if column is None else [x for x in components[column][start:end] if x == x]
                row[v] = (float(sum(scores)), float(len(scores)))
        out[task] = row
    return out


def _kind(view: str, component_names: Sequence[str]) -> tuple[str, int | None]:
    """How ``task_sums`` fills a view: mean, best, component (its column, None if no record
    has it) or an estimate (pass@k, pass^k, maj@k: ``_per_k``)."""
    if view == "mean_reward":
        return "mean", None
    if view == "best_of_n":
        return "best", None
    if view in GRADED_RATES:
        return "rate", None
    if view.startswith("component:"):
        name = view.removeprefix("component:")
        return "component", component_names.index(name) if name in component_names else None
    return "estimate", None


def _graded_rates(facts: EpisodeFacts, order: IntArray) -> dict[str, tuple[list[int], list[int]]]:
    """Per graded-rate view, each of the ``order`` rows' part of its numerator and of its
    denominator (0 or 1), by the cards' rules: a graded row has some grade component (a drop
    or an ungraded episode has none); it abstained when its label is ``no_answer``; it was
    checked for safety when it has a ``safety`` component, and violated it below 1."""
    components = facts.components[order]
    graded = ~np.isnan(components).all(axis=1)
    code = facts.names.index(NO_ANSWER) if NO_ANSWER in facts.names else -1
    abstained = graded & (facts.label[order] == code)
    answered = graded & ~abstained
    if SAFETY in facts.component_names:
        safety = components[:, facts.component_names.index(SAFETY)]
        checked, violated = ~np.isnan(safety), safety < 1.0
    else:
        checked = violated = np.zeros(len(order), dtype=bool)
    return {
        "no_answer_rate": (abstained.astype(int).tolist(), graded.astype(int).tolist()),
        "selective_accuracy": ((answered & facts.passed[order]).astype(int).tolist(), answered.astype(int).tolist()),
        "safety_violation_rate": ((checked & violated).astype(int).tolist(), checked.astype(int).tolist()),
    }


def _per_k(view: str) -> tuple[str, int]:
    """The ``TaskValues.per_k`` metric and k an estimate's view reads ("pass@k", 4 for pass@4)."""
    metric, k = (view[:5], int(view[5:])) if view[4] in "@^" else (view[:4], int(view[4:]))
    return f"{metric}k", k


def _votes(answers: Sequence[int], passed: Sequence[bool]) -> Votes:
    """A task's samples in sample order as (answer, passed), each answer renamed to the
    order of its first vote (-1: no answer): the estimates read nothing else."""
    first: dict[int, int] = {}
    return tuple((first.setdefault(a, len(first)) if a else -1, p) for a, p in zip(answers, passed, strict=True))


def _estimates(
    votes: Votes,
    ks: Sequence[int],
    views: int,
    estimated: list[tuple[int, str, int]],
    samples: dict[tuple[int, int, bool], Sample],
) -> list[Cell | None]:
    """The cells of a task with these votes: the ``estimated`` views' (index, metric, k)
    from ``task_values``, None for the other views. ``samples`` holds the samples built so
    far (by index, answer and passed): they are only read."""
    votes_as_samples = []
    for i, (a, p) in enumerate(votes):
        sample = samples.get((i, a, p))
        if sample is None:
            sample = samples[(i, a, p)] = Sample(("", ""), i, 0.0, p, None if a < 0 else str(a), None)
        votes_as_samples.append(sample)
    per_k = task_values(votes_as_samples, ks).per_k
    cells: list[Cell | None] = [None] * views
    for v, metric, k in estimated:
        value = per_k[metric][k]
        cells[v] = (0.0, 0.0) if value is None else (value, 1.0)
    return cells


def slice_deltas(
    slice_id: SliceId,
    seed_parts: tuple[str, ...],
    rows: FloatArray,
    discordant: Mapping[Rule, tuple[int, int] | None],
    views: Sequence[str],
) -> list[ViewDelta]:
    """Every view of one slice under both rules, from its rows of the task matrix (per task,
    rule and view: base numerator, base denominator, cand numerator, cand denominator), with
    the bootstrap seeded from ``seed_parts`` (``task_set_seed`` of the slice's tasks);
    ``discordant[rule]`` counts the slice's pairs that both sides count under the rule and
    that only the base, or only the candidate, passed (None: no such pairs at all)."""
    columns: list[RatioColumn] = []
    order: list[tuple[Rule, str]] = []
    for r, rule in enumerate(RULE_NAMES):
        for v, view in enumerate(views):
            cells = rows[:, r, v, :]
            columns.append(RatioColumn(cells[:, 0], cells[:, 1], cells[:, 2], cells[:, 3]))
            order.append((rule, view))
    intervals = paired_bootstrap(columns, seed_parts) if len(rows) else [None] * len(columns)
    out: list[ViewDelta] = []
    for (rule, view), column, interval in zip(order, columns, intervals, strict=True):
        base_value = ratio(column.base_numerator, column.base_denominator)
        cand_value = ratio(column.cand_numerator, column.cand_denominator)
        delta = None if base_value is None or cand_value is None else stable(cand_value - base_value)
        n_tasks = int(((column.base_denominator > 0) & (column.cand_denominator > 0)).sum())
        out.append(
            ViewDelta(
                slice=slice_id[0],
                key=slice_id[1],
                view=view,
                rule=rule,
                base=base_value,
                cand=cand_value,
                delta=delta,
                ci_low=None if interval is None else interval.low,
                ci_high=None if interval is None else interval.high,
                p_value=_mcnemar(discordant[rule]) if view == "pass@1" else None,
                n_tasks=n_tasks,
                too_small=interval is None or n_tasks < MIN_TASKS,
            )
        )
    return out


def _mcnemar(discordant: tuple[int, int] | None) -> float | None:
    return None if discordant is None else mcnemar_exact(*discordant)


@dataclass(frozen=True)
class Discordant:
    """Per task row, under one rule: whether any pair is counted by the rule on both sides,
    and how many of those pairs only the base, or only the candidate, passed."""

    paired: BoolArray
    base_only: IntArray
    cand_only: IntArray

    def within(self, rows: IntArray) -> tuple[int, int] | None:
        """The sums over the task ``rows`` (McNemar's counts), None when none has a pair."""
        if not self.paired[rows].any():
            return None
        return int(self.base_only[rows].sum()), int(self.cand_only[rows].sum())


def discordant_by_task(
    base: EpisodeFacts, cand: EpisodeFacts, task_row: IntArray, tasks: int
) -> dict[Rule, Discordant]:
    """Per rule, the discordant pairs of each task; ``base`` and ``cand`` are the two sides'
    rows of the same pairs, ``task_row`` each pair's task row."""
    out: dict[Rule, Discordant] = {}
    for rule in RULE_NAMES:
        both = counted(base, rule) & counted(cand, rule)
        differ = both & (base.passed != cand.passed)
        out[rule] = Discordant(
            np.bincount(task_row[both], minlength=tasks) > 0,
            np.bincount(task_row[differ & base.passed], minlength=tasks).astype(np.int64),
            np.bincount(task_row[differ & cand.passed], minlength=tasks).astype(np.int64),
        )
    return out
