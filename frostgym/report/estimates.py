"""One card's pass@1 per slice (env, difficulty, tag) with a 95% interval, for the report's bars.

Why here and not in the card: a card's views hold values, not intervals, and a bar without
its interval invites reading noise as a difference. The value is the card's own estimator
(``frostgym.compare.views.task_sums``, as every comparison counts it, so a bar equals the
card's view), and the interval is the comparison's bootstrap clustered by task
(``frostgym.core.stats.bootstrap_ratio``), seeded by the slice's task set: the same card
draws the same bars on any machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from frostgym.cards.views import Rule
from frostgym.compare.compare import task_set_seed
from frostgym.compare.facts import BoolArray, EpisodeFacts
from frostgym.compare.views import MIN_TASKS, counted, task_sums
from frostgym.core.stats import bootstrap_ratio, ratio

SliceKind = str  # "overall" | "env" | "difficulty" | "tag"


@dataclass(frozen=True)
class SliceEstimate:
    """pass@1 of one slice of one card, with its interval (None where it has no value or
    too few tasks to resample)."""

    kind: SliceKind
    key: str
    value: float | None
    low: float | None
    high: float | None
    tasks: int
    #: Fewer than ``MIN_TASKS`` tasks: the interval is shown, but is no claim.
    too_small: bool


def pass_at_1(facts: EpisodeFacts, rule: Rule = "errors_as_failures") -> list[SliceEstimate]:
    """pass@1 overall, per env, per difficulty and per tag (a row counts in each of its tags),
    in that order, keys sorted within a kind."""
    # Masks from the coded columns and their tables, not a Python loop over the rows.
    estimates = [_estimate(facts, rule, "overall", "", np.ones(len(facts), dtype=bool))]
    envs = np.array(facts.env_of_task(), dtype=object)[facts.task]
    for env in sorted(set(envs.tolist())):
        estimates.append(_estimate(facts, rule, "env", env, envs == env))
    difficulties = {facts.names[code]: code for code in set(facts.difficulty.tolist())}
    for difficulty in sorted(d for d in difficulties if d is not None):
        estimates.append(
            _estimate(facts, rule, "difficulty", str(difficulty), facts.difficulty == difficulties[difficulty])
        )
    used_sets = set(facts.tags.tolist())
    for tag in sorted({tag for code in used_sets for tag in facts.tag_sets[code]}):
        holding = [code for code in used_sets if tag in facts.tag_sets[code]]
        estimates.append(_estimate(facts, rule, "tag", tag, np.isin(facts.tags, holding)))
    return estimates


def _estimate(facts: EpisodeFacts, rule: Rule, kind: SliceKind, key: str, rows: BoolArray) -> SliceEstimate:
    chosen = rows & counted(facts, rule)
    tasks = sorted(set(facts.task[chosen].tolist()))
    task_row = np.full(len(facts.task_keys), -1, dtype=np.int64)
    task_row[tasks] = np.arange(len(tasks))
    sums = task_sums(facts, chosen, task_row[facts.task], len(tasks), (1,), ["pass@1"])
    numerator, denominator = sums[:, 0, 0], sums[:, 0, 1]
    value = ratio(numerator, denominator)
    keys: Sequence[tuple[str, str]] = [facts.task_keys[t] for t in tasks]
    interval = bootstrap_ratio(numerator, denominator, ("frostgym.report", kind, key, *task_set_seed(keys)))
    return SliceEstimate(
        kind=kind,
        key=key,
        value=value,
        low=None if interval is None else interval.low,
        high=None if interval is None else interval.high,
        tasks=len(tasks),
        too_small=len(tasks) < MIN_TASKS,
    )
