"""scipy's percentile bootstrap, the reference every interval frostgym reports is checked
against, and the one tolerance those checks use.

Why one place: the compare, report and twin-gap tests all ask the same question (does our
seeded bootstrap give scipy's interval, to within Monte Carlo error?), and each spelled out
scipy's call and the tolerance itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.stats as scipy_stats  # a dev dependency: the reference, never a runtime need

#: Resamples on both sides: enough that 3% of the interval's width covers Monte Carlo error.
RESAMPLES = 40_000


def mean_gap(base: np.ndarray, cand: np.ndarray, axis: int) -> np.ndarray:
    """The paired statistic of a comparison: candidate mean minus base mean."""
    return np.asarray(np.mean(cand, axis=axis) - np.mean(base, axis=axis))


def scipy_interval(
    data: tuple[np.ndarray, ...], statistic: Callable[..., Any], *, seed: int, paired: bool = False
) -> Any:
    """scipy's 95% percentile bootstrap interval of ``statistic`` (vectorized, taking
    ``axis``) over ``data``, resampled together when ``paired``."""
    return scipy_stats.bootstrap(
        data,
        statistic,
        paired=paired,
        vectorized=True,
        method="percentile",
        n_resamples=RESAMPLES,
        confidence_level=0.95,
        random_state=np.random.default_rng(seed),
    ).confidence_interval


def assert_matches(low: float | None, high: float | None, reference: Any) -> None:
    """``low`` and ``high`` are scipy's ``reference`` interval to within 3% of its width."""
    width = reference.high - reference.low
    assert low == pytest.approx(reference.low, abs=0.03 * width)
    assert high == pytest.approx(reference.high, abs=0.03 * width)
