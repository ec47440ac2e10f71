"""The gap between an env's public test split and its private split, on both sides.

Why: tuning to a test set shows as a public score that rises while the private split, which
nobody looked at, stays flat. When both cards hold ``test`` and ``private`` episodes of one
env (``frostgym eval --split test,private``), each side's gap is its mean reward on test
minus its mean reward on private (drops counted as failures), and the candidate's change in
gap gets a paired bootstrap interval from the same task resampling as the views: a gap that
grows by more than its interval is the tell.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from frostgym.compare.facts import EpisodeFacts
from frostgym.compare.views import counted
from frostgym.core.stats import RatioColumn, bootstrap_deltas, percentile_interval, stable

PUBLIC, PRIVATE = "test", "private"


@dataclass(frozen=True)
class PrivateGap:
    """One env's test-minus-private mean reward on each side, and the change."""

    env_id: str
    base_gap: float
    cand_gap: float
    delta: float
    ci_low: float | None
    ci_high: float | None
    test_tasks: int
    private_tasks: int

    def to_json(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "base_gap": self.base_gap,
            "cand_gap": self.cand_gap,
            "delta": self.delta,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "test_tasks": self.test_tasks,
            "private_tasks": self.private_tasks,
        }


def private_gaps(base: EpisodeFacts, cand: EpisodeFacts) -> list[PrivateGap]:
    """A gap per env whose paired episodes include both test and private tasks; row i of
    ``base`` and ``cand`` is one pair."""
    env_of_task = base.env_of_task()
    envs = [env_of_task[task] for task in base.task.tolist()]
    splits = [base.names[split] for split in base.split.tolist()]
    by_env: dict[str, list[int]] = defaultdict(list)
    for row, env_id in enumerate(envs):
        by_env[env_id].append(row)
    gaps = []
    for env_id in sorted(by_env):
        rows = by_env[env_id]
        if {splits[row] for row in rows} >= {PUBLIC, PRIVATE}:
            gaps.append(_gap(env_id, base, cand, [row for row in rows if splits[row] in (PUBLIC, PRIVATE)], splits))
    return gaps


def _gap(env_id: str, base: EpisodeFacts, cand: EpisodeFacts, rows: list[int], splits: list[Any]) -> PrivateGap:
    tasks = sorted({base.task_keys[base.task[row]] for row in rows})
    row_of = {task: i for i, task in enumerate(tasks)}
    sums = np.zeros((2, len(tasks), 4))  # split (test, private) x task x [base num, den, cand num, den]
    counted_rows = (counted(base, "errors_as_failures"), counted(cand, "errors_as_failures"))
    for row in rows:
        s = 0 if splits[row] == PUBLIC else 1
        task = row_of[base.task_keys[base.task[row]]]
        for side, facts, counts in ((0, base, counted_rows[0]), (2, cand, counted_rows[1])):
            if counts[row]:
                sums[s, task, side] += facts.reward[row]
                sums[s, task, side + 1] += 1
    columns = [RatioColumn(*(sums[s, :, j] for j in range(4))) for s in (0, 1)]
    base_means = [float(sums[s, :, 0].sum() / sums[s, :, 1].sum()) for s in (0, 1)]
    cand_means = [float(sums[s, :, 2].sum() / sums[s, :, 3].sum()) for s in (0, 1)]
    resampled = bootstrap_deltas(columns, ("compare", "private_gap", env_id))
    interval = percentile_interval(resampled[:, 0] - resampled[:, 1])
    base_gap, cand_gap = base_means[0] - base_means[1], cand_means[0] - cand_means[1]
    return PrivateGap(
        env_id=env_id,
        base_gap=stable(base_gap),
        cand_gap=stable(cand_gap),
        delta=stable(cand_gap - base_gap),
        ci_low=None if interval is None else interval.low,
        ci_high=None if interval is None else interval.high,
        test_tasks=int((sums[0, :, 1] > 0).sum()),
        private_tasks=int((sums[1, :, 1] > 0).sum()),
    )
