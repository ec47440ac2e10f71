"""The comparison's statistics against scipy's reference implementations.

The paired bootstrap must agree with ``scipy.stats.bootstrap`` (paired, percentile) on the
same per-task data to within Monte Carlo error, and be exactly reproducible from its seed;
McNemar's exact p-value must equal ``scipy.stats.binomtest``'s two-sided p to float rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as scipy_stats  # a dev dependency: the reference, never a runtime need

from frostgym.core.stats import Interval, RatioColumn, mcnemar_exact, paired_bootstrap, task_counts
from tests.stats_reference import RESAMPLES, assert_matches, mean_gap, scipy_interval


def _column(base: np.ndarray, cand: np.ndarray, base_n: np.ndarray | None = None) -> RatioColumn:
    ones = np.ones(len(base)) if base_n is None else base_n
    return RatioColumn(base * ones, ones.copy(), cand * ones, ones.copy())


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [30, 200])
def test_bootstrap_matches_scipy_paired_percentile(tasks: int) -> None:
    data = np.random.default_rng(7)
    base = data.binomial(1, 0.55, tasks).astype(float)
    cand = np.clip(base + data.normal(0.05, 0.4, tasks), 0, 1)
    [ours] = paired_bootstrap([_column(base, cand)], ("test", tasks), resamples=RESAMPLES)
    reference = scipy_interval((base, cand), mean_gap, seed=11, paired=True)
    assert ours is not None
    assert_matches(ours.low, ours.high, reference)


def test_ratio_statistic_weights_tasks_by_their_counts() -> None:
    """With unequal samples per task the view is a ratio of sums (mean over samples); the
    clustered bootstrap of that ratio equals scipy's bootstrap of the same ratio over tasks."""
    data = np.random.default_rng(3)
    counts = data.integers(1, 6, 80).astype(float)
    base_sum = np.array([data.binomial(int(n), 0.4) for n in counts], dtype=float)
    cand_sum = np.array([data.binomial(int(n), 0.5) for n in counts], dtype=float)
    column = RatioColumn(base_sum, counts, cand_sum, counts)
    [ours] = paired_bootstrap([column], ("ratio",), resamples=RESAMPLES)

    def statistic(b: np.ndarray, c: np.ndarray, n: np.ndarray, axis: int) -> np.ndarray:
        return np.asarray(c.sum(axis=axis) / n.sum(axis=axis) - b.sum(axis=axis) / n.sum(axis=axis))

    reference = scipy_interval((base_sum, cand_sum, counts), statistic, seed=5, paired=True)
    assert ours is not None
    assert_matches(ours.low, ours.high, reference)


def test_same_seed_same_interval_and_identical_sides_give_zero() -> None:
    data = np.random.default_rng(1)
    base = data.random(50)
    cand = data.random(50)
    first = paired_bootstrap([_column(base, cand)], ("slice", "overall"))
    assert first == paired_bootstrap([_column(base, cand)], ("slice", "overall"))
    assert first != paired_bootstrap([_column(base, cand)], ("slice", "by_env", "x"))
    [same] = paired_bootstrap([_column(base, base)], ("slice",))
    assert same == Interval(0.0, 0.0) and same.contains(0.0)


def test_interval_is_none_when_it_cannot_say_anything() -> None:
    one = np.ones(1)
    assert paired_bootstrap([_column(one, one)], ("tiny",)) == [None]
    # Base has a value on only one of 40 tasks: most resamples leave it with nothing counted.
    base_den = np.zeros(40)
    base_den[0] = 1
    sparse = RatioColumn(np.zeros(40), base_den, np.ones(40), np.ones(40))
    assert paired_bootstrap([sparse], ("sparse",)) == [None]


def test_task_counts_rows_sum_to_the_task_count() -> None:
    counts = task_counts(np.random.default_rng(0), 17, 33)
    assert counts.shape == (17, 33)
    assert set(counts.sum(axis=1)) == {33.0}


@pytest.mark.parametrize(
    ("base_only", "cand_only"),
    [(0, 0), (0, 1), (1, 0), (3, 3), (2, 9), (9, 2), (0, 25), (40, 61), (517, 580), (12_000, 12_400), (5, 6)],
)
def test_mcnemar_equals_scipy_binomtest(base_only: int, cand_only: int) -> None:
    n = base_only + cand_only
    expected = 1.0 if n == 0 else scipy_stats.binomtest(min(base_only, cand_only), n, 0.5).pvalue
    assert mcnemar_exact(base_only, cand_only) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_mcnemar_refuses_impossible_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="non-negative int"):
        mcnemar_exact(bad, 1)  # type: ignore[arg-type]
