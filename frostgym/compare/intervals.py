"""The candidate's own 95% interval for a view or a cost of one slice: what a ``min`` or ``max``
gate with ``significant = true`` judges.

Why two methods: a rate view (pass@K, pass^K, maj@K) whose every task has a value of 0 or 1
(one sample a task, maj@K always, any task solved by all or none of its samples) is a count of
independent tasks that passed, and Wilson's score interval (``frostgym.core.stats.
wilson_interval``) is the right interval for a count: it stays honest at 0 and at every task
passed, where a percentile bootstrap collapses to a point. Any other view or cost is a ratio of
per-task sums whose samples within a task are not independent, so its interval is the
comparison's bootstrap clustered by task (``frostgym.core.stats.bootstrap_ratio``), seeded by
the metric, the rule and the slice's task set, so the same card gives the same interval on any
machine. A bootstrap over fewer than ``MIN_TASKS`` tasks undercovers, so it is no claim and no
interval is given.

The comparison keeps the candidate's per-task sums (``OwnSums``, built once by ``compare``)
and draws an interval only when a gate asks for one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from frostgym.cards.views import RULE_NAMES, Rule
from frostgym.compare.costs import COST_METRICS, MONEY, PERCENTILE_METRICS, episode_dollars
from frostgym.compare.facts import EpisodeFacts, FloatArray, IntArray, TaskKey
from frostgym.compare.gates import OwnInterval
from frostgym.compare.prices import Price
from frostgym.compare.views import GRADED_RATES, MIN_TASKS, SliceId
from frostgym.core.stats import bootstrap_ratio, wilson_interval

#: Views that are rates: a task's value is a probability (of passing, abstaining, violating).
RATE_VIEWS: tuple[str, ...] = ("pass@", "pass^", "maj@", *GRADED_RATES)
WILSON = "Wilson"
BOOTSTRAP = "bootstrap by task"

#: The per-task cost columns: reported tokens, episodes, successes, turns, tool calls, seconds,
#: USD (0 without a price table).
_TOKENS, _EPISODES, _SUCCESSES, _TURNS, _CALLS, _SECONDS, _DOLLARS = range(7)
#: Each cost as (numerator column, denominator column), as ``costs.costs`` divides them.
_COST_RATIOS: Mapping[str, tuple[int, int]] = {
    "tokens_per_episode": (_TOKENS, _EPISODES),
    "tokens_per_success": (_TOKENS, _SUCCESSES),
    "turns_per_success": (_TURNS, _SUCCESSES),
    "tool_calls_per_episode": (_CALLS, _EPISODES),
    "wall_seconds_per_episode": (_SECONDS, _EPISODES),
    MONEY: (_DOLLARS, _EPISODES),
}
#: A percentile is no ratio of per-task sums: it has no interval here.
assert set(_COST_RATIOS) | set(PERCENTILE_METRICS) == set(COST_METRICS), "every cost needs its per-task ratio"


def cost_sums(facts: EpisodeFacts, task_row: IntArray, tasks: int, price: Price | None = None) -> FloatArray:
    """Per task row (``task_row`` maps each row of ``facts`` to one), the sums the costs divide,
    shape ``(tasks, 7)``: every row counts, drops included, as in ``costs.costs``; tokens a
    row's agent did not report count 0; USD at ``price`` (0 without one, or when unknown:
    ``costs.episode_dollars``; the gate then has no value and never asks for an interval)."""
    tokens = np.nan_to_num(facts.completion_tokens, nan=0.0)
    dollars = None if price is None else episode_dollars(facts, price)
    columns = (
        tokens,
        np.ones(len(facts)),
        facts.passed,
        facts.turns,
        facts.tool_calls,
        facts.wall_seconds,
        np.zeros(len(facts)) if dollars is None else dollars,
    )
    out = np.zeros((tasks, len(columns)))
    for column, values in enumerate(columns):
        out[:, column] = np.bincount(task_row, weights=np.asarray(values, dtype=np.float64), minlength=tasks)
    return out


@dataclass(frozen=True)
class OwnSums:
    """The candidate's per-task sums of one comparison: for every view under both rules
    (numerator, denominator) and for the costs (``cost_sums``), with each slice's task rows."""

    tasks: tuple[TaskKey, ...]
    views: tuple[str, ...]
    #: Shape ``(tasks, len(RULE_NAMES), len(views), 2)``.
    view_sums: FloatArray
    #: Shape ``(tasks, 7)``: ``cost_sums``.
    costs: FloatArray
    #: The task rows of each slice (env, difficulty, tag); overall is every row.
    members: Mapping[SliceId, IntArray]

    def rows(self, slice_name: str, key: str) -> IntArray | None:
        """The task rows of one slice, None for a slice the comparison does not have."""
        if slice_name == "overall":
            return np.arange(len(self.tasks), dtype=np.int64)
        return self.members.get((slice_name, key))

    def interval(self, metric: str, rule: Rule, rows: IntArray, seed_parts: tuple[str, ...]) -> OwnInterval | str:
        """The candidate's 95% interval for ``metric`` on the task ``rows``, or why there is
        none; ``seed_parts`` name the rows' task set (``compare.task_set_seed``)."""
        seed = ("frostgym.compare.intervals", metric, rule, *seed_parts)
        if metric in self.views:
            sums = self.view_sums[rows, RULE_NAMES.index(rule), self.views.index(metric)]
            return view_interval(metric, sums[:, 0], sums[:, 1], seed)
        if metric in _COST_RATIOS:
            numerator, denominator = _COST_RATIOS[metric]
            return _bootstrap(self.costs[rows, numerator], self.costs[rows, denominator], seed)
        if metric in PERCENTILE_METRICS:
            return f"no interval for the candidate's {metric!r}: a percentile is judged on its point estimate"
        return f"no interval for the candidate's {metric!r}: significant min/max reads views and costs"


def view_interval(
    view: str, numerator: FloatArray, denominator: FloatArray, seed_parts: tuple[str, ...]
) -> OwnInterval | str:
    """A view's interval from its per-task sums (see the module docstring for which method)."""
    counted = denominator > 0
    values = numerator[counted] / denominator[counted]
    if not len(values):
        return "the candidate has no value here"
    if view.startswith(RATE_VIEWS) and bool(np.isin(values, (0.0, 1.0)).all()):
        interval = wilson_interval(int(values.sum()), len(values))
        assert interval is not None  # at least one task
        return OwnInterval(interval.low, interval.high, WILSON, len(values))
    return _bootstrap(numerator, denominator, seed_parts)


def _bootstrap(numerator: FloatArray, denominator: FloatArray, seed_parts: tuple[str, ...]) -> OwnInterval | str:
    tasks = int((denominator > 0).sum())
    if tasks < MIN_TASKS:
        return f"{tasks} tasks with a value: a bootstrap over fewer than {MIN_TASKS} is no claim"
    interval = bootstrap_ratio(numerator, denominator, seed_parts)
    if interval is None:
        return "the bootstrap leaves the value undefined in too many resamples (too few tasks count)"
    return OwnInterval(interval.low, interval.high, BOOTSTRAP, tasks)
