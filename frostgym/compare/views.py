"""Every card view of both sides, per slice and rule, with the paired delta and its interval.

Why this module: a delta is only meaningful if it is a delta of the numbers each card shows,
so the per-task values come from the cards' own estimators (``frostgym.cards.views``:
pass@k, pass^k, maj@k, best-of-n, component means), and each view is written as a ratio of
per-task sums (``stats.RatioColumn``) so one task resampling gives every interval. pass@1
also gets McNemar's exact test over the paired episodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from frostgym.cards.views import RULE_NAMES, Rule, Sample, TaskValues, task_values
from frostgym.compare.facts import EpisodeFacts
from frostgym.compare.stats import FloatArray, RatioColumn, mcnemar_exact, paired_bootstrap, ratio, stable

#: A slice with fewer tasks than this (with a value on both sides) is marked too small: a
#: percentile bootstrap over so few clusters undercovers, so its interval is not a claim.
MIN_TASKS = 10

TaskKey = tuple[str, str]
SliceId = tuple[str, str]  # ("overall", "") | ("env", id) | ("difficulty", d) | ("tag", t)


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


def counted(facts: Iterable[EpisodeFacts], rule: Rule) -> list[EpisodeFacts]:
    """The episodes a rule counts: every completed one, and under errors_as_failures the
    drops counted as failures."""
    index = RULE_NAMES.index(rule)
    return [f for f in facts if f.counted_by[index]]


def per_task(facts: Iterable[EpisodeFacts], ks: Sequence[int]) -> dict[TaskKey, TaskValues]:
    grouped: dict[TaskKey, list[Sample]] = defaultdict(list)
    for fact in facts:
        grouped[fact.task].append(fact.as_sample)
    return {key: task_values(samples, ks) for key, samples in grouped.items()}


def view_names(ks: Sequence[int], components: Iterable[str]) -> list[str]:
    """The views compared, in report order."""
    names = ["mean_reward"]
    for metric in ("pass@", "pass^", "maj@"):
        names.extend(f"{metric}{k}" for k in ks)
    names.append("best_of_n")
    names.extend(f"component:{name}" for name in sorted(set(components)))
    return names


def _sums(values: TaskValues | None, view: str) -> tuple[float, float]:
    """(numerator, denominator) of one task for one view; (0, 0) when it has no value."""
    if values is None:
        return 0.0, 0.0
    if view == "mean_reward":
        return float(sum(values.rewards)), float(len(values.rewards))
    if view == "best_of_n":
        return values.task.best_reward, 1.0
    if view.startswith("component:"):
        scores = values.components.get(view.removeprefix("component:"), [])
        return float(sum(scores)), float(len(scores))
    metric, k = (view[:5], int(view[5:])) if view[4] in "@^" else (view[:4], int(view[4:]))
    value = values.per_k[f"{metric}k"][k]
    return (0.0, 0.0) if value is None else (value, 1.0)


def task_matrix(
    tasks: Sequence[TaskKey],
    tables: Mapping[Rule, tuple[Mapping[TaskKey, TaskValues], Mapping[TaskKey, TaskValues]]],
    views: Sequence[str],
) -> FloatArray:
    """Per task (rows, in ``tasks`` order), rule and view: base numerator, base denominator,
    cand numerator, cand denominator. Built once; every slice takes its rows."""
    matrix = np.zeros((len(tasks), len(RULE_NAMES), len(views), 4))
    for r, rule in enumerate(RULE_NAMES):
        if r and tables[rule] is tables[RULE_NAMES[0]]:
            matrix[:, r] = matrix[:, 0]  # the same tables (no drops): the same sums
            continue
        base_table, cand_table = tables[rule]
        for row, task in enumerate(tasks):
            for side, table in ((0, base_table), (2, cand_table)):
                values = table.get(task)
                if values is not None:
                    for v, view in enumerate(views):
                        matrix[row, r, v, side : side + 2] = _sums(values, view)
    return matrix


def slice_deltas(
    slice_id: SliceId,
    seed_parts: tuple[str, ...],
    rows: FloatArray,
    discordant: Mapping[Rule, tuple[int, int] | None],
    views: Sequence[str],
) -> list[ViewDelta]:
    """Every view of one slice under both rules, from its rows of ``task_matrix``, with the
    bootstrap seeded from ``seed_parts`` (``task_set_seed`` of the slice's tasks);
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


def discordant_by_task(
    pairs: Sequence[tuple[EpisodeFacts, EpisodeFacts]],
) -> dict[Rule, dict[TaskKey, tuple[int, int]]]:
    """Per rule and task, (pairs only the base passed, pairs only the candidate passed)
    among the pairs the rule counts on both sides; a task with such pairs but none
    discordant has (0, 0)."""
    out: dict[Rule, dict[TaskKey, tuple[int, int]]] = {}
    for r, rule in enumerate(RULE_NAMES):
        counts: dict[TaskKey, list[int]] = {}
        for b, c in pairs:
            if b.counted_by[r] and c.counted_by[r]:
                cell = counts.setdefault(b.task, [0, 0])
                if b.passed != c.passed:
                    cell[0 if b.passed else 1] += 1
        out[rule] = {task: (cell[0], cell[1]) for task, cell in counts.items()}
    return out
