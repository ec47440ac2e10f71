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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from frostgym.compare.facts import EpisodeFacts
from frostgym.compare.stats import RatioColumn, bootstrap_deltas, percentile_interval, stable
from frostgym.compare.views import counted

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


def private_gaps(pairs: Sequence[tuple[EpisodeFacts, EpisodeFacts]]) -> list[PrivateGap]:
    """A gap per env whose paired episodes include both test and private tasks."""
    by_env: dict[str, list[tuple[EpisodeFacts, EpisodeFacts]]] = defaultdict(list)
    for pair in pairs:
        by_env[pair[0].env_id].append(pair)
    gaps = []
    for env_id in sorted(by_env):
        env_pairs = by_env[env_id]
        if {b.split for b, _ in env_pairs} >= {PUBLIC, PRIVATE}:
            gaps.append(_gap(env_id, env_pairs))
    return gaps


def _gap(env_id: str, pairs: Sequence[tuple[EpisodeFacts, EpisodeFacts]]) -> PrivateGap:
    tasks = sorted({b.task for b, _ in pairs if b.split in (PUBLIC, PRIVATE)})
    row = {task: i for i, task in enumerate(tasks)}
    sums = np.zeros((2, len(tasks), 4))  # split (test, private) x task x [base num, den, cand num, den]
    for b, c in pairs:
        if b.split not in (PUBLIC, PRIVATE):
            continue
        s = 0 if b.split == PUBLIC else 1
        for side, fact in ((0, b), (2, c)):
            if counted((fact,), "errors_as_failures"):
                sums[s, row[b.task], side] += fact.reward
                sums[s, row[b.task], side + 1] += 1
    columns = [RatioColumn(*(sums[s, :, j] for j in range(4))) for s in (0, 1)]
    base = [float(sums[s, :, 0].sum() / sums[s, :, 1].sum()) for s in (0, 1)]
    cand = [float(sums[s, :, 2].sum() / sums[s, :, 3].sum()) for s in (0, 1)]
    resampled = bootstrap_deltas(columns, ("compare", "private_gap", env_id))
    interval = percentile_interval(resampled[:, 0] - resampled[:, 1])
    base_gap, cand_gap = base[0] - base[1], cand[0] - cand[1]
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
