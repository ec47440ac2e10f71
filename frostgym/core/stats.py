"""The statistics behind every interval frostgym reports: a paired bootstrap clustered by
task, McNemar, and Wilson's interval.

Why here, on the ground floor: a comparison of two cards (``frostgym.compare``), a report's
bars (``frostgym.report``) and a card's own views (its ``twin_gap``, ``frostgym.cards.views``)
all draw intervals, and the cards sit below the comparison, so the one implementation sits
below both.

Why clustered by task: the samples of one task are not independent (an easy task is easy
for every sample), so resampling episodes would make intervals too narrow. Every view of a
card is a ratio of per-task sums (mean reward: reward sums over sample counts; pass@k: the
per-task estimates over the number of tasks that have one), so one resampling of tasks,
drawn once per slice as a matrix of counts, serves every view at the cost of a matrix
product. Both cards are resampled with the same counts: that is what makes it paired.

Why seeded: an interval is a claim a user may act on, so the same cards must give the same
interval on any machine. The counts come from ``derive_generator`` with the slice's name,
so an interval does not depend on which other slices were computed first.

Checked against ``scipy.stats.bootstrap`` and ``scipy.stats.binomtest`` in
``tests/core/test_compare_stats.py`` (scipy is a dev dependency only).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from frostgym.core.seeding import SeedPart, derive_generator

#: Resamples per interval: enough that the 2.5% and 97.5% percentiles move by well under
#: a tenth of the interval's width between seeds.
RESAMPLES = 2_000
#: The interval's coverage.
CONFIDENCE = 0.95
#: Rows of the count matrix drawn at a time, so memory stays ~RESAMPLES_CHUNK x tasks x 8 bytes.
RESAMPLES_CHUNK = 250

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Interval:
    """A two-sided percentile interval for a paired delta (cand minus base)."""

    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class RatioColumn:
    """One view of one slice as per-task sums: the view is ``sum(numerator) / sum(denominator)``
    over tasks, on each side. A task with no value on a side has 0 in both."""

    base_numerator: FloatArray
    base_denominator: FloatArray
    cand_numerator: FloatArray
    cand_denominator: FloatArray


def ratio(numerator: FloatArray, denominator: FloatArray) -> float | None:
    """``sum(numerator) / sum(denominator)``, or None when nothing is counted."""
    total = float(denominator.sum())
    return stable(float(numerator.sum()) / total) if total > 0 else None


def paired_bootstrap(
    columns: list[RatioColumn],
    seed_parts: tuple[SeedPart, ...],
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> list[Interval | None]:
    """A percentile interval for each column's delta, ``cand ratio - base ratio``, from one
    shared resampling of the tasks (every column must have one row per task, in the same
    order). None for a column whose delta is undefined in too many resamples to say
    anything (fewer than two tasks with a value on both sides, or a resample leaves a side
    with nothing counted more than 1% of the time)."""
    deltas = bootstrap_deltas(columns, seed_parts, resamples=resamples)
    intervals: list[Interval | None] = []
    for index, column in enumerate(columns):
        both = (column.base_denominator > 0) & (column.cand_denominator > 0)
        intervals.append(percentile_interval(deltas[:, index], confidence) if int(both.sum()) >= 2 else None)
    return intervals


def bootstrap_ratio(
    numerator: FloatArray,
    denominator: FloatArray,
    seed_parts: tuple[SeedPart, ...],
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """A percentile interval for one card's view, ``sum(numerator) / sum(denominator)`` over
    tasks (one value each), from a resampling of the tasks: the paired bootstrap against a
    base that is 0 on every task, so one card's interval and a comparison's are the same
    statistic. None when fewer than two tasks have a value, or too many resamples have none."""
    if int((denominator > 0).sum()) < 2:
        return None
    zero = np.zeros_like(numerator)
    [interval] = paired_bootstrap(
        [RatioColumn(zero, denominator, numerator, denominator)], seed_parts, resamples=resamples, confidence=confidence
    )
    return interval


def bootstrap_deltas(
    columns: list[RatioColumn], seed_parts: tuple[SeedPart, ...], *, resamples: int = RESAMPLES
) -> FloatArray:
    """The resampled deltas, one row per resample and one column per ``RatioColumn``; NaN
    where a resample leaves a side with nothing counted. For statistics built from several
    columns of the same resampling (a difference of deltas, say)."""
    if not columns:
        return np.empty((resamples, 0))
    tasks = len(columns[0].base_numerator)
    if any(len(getattr(c, f)) != tasks for c in columns for f in RatioColumn.__dataclass_fields__):
        raise ValueError("every column needs one value per task")
    # One matrix of per-task sums: [base num, base den, cand num, cand den] per column.
    sums = np.stack(
        [arr for c in columns for arr in (c.base_numerator, c.base_denominator, c.cand_numerator, c.cand_denominator)],
        axis=1,
    )
    # Views often coincide (pass@1, pass^1 and maj@1 with one sample; both rules with no
    # drops): resample each distinct column once.
    distinct, inverse = distinct_columns(sums)
    totals = np.empty((resamples, distinct.shape[1]))
    rng = derive_generator("frostgym.compare.bootstrap", *seed_parts)
    for start in range(0, resamples, RESAMPLES_CHUNK):
        rows = min(RESAMPLES_CHUNK, resamples - start)
        totals[start : start + rows] = task_counts(rng, rows, tasks) @ distinct
    totals = totals[:, inverse.reshape(-1)]
    base_num, base_den, cand_num, cand_den = (totals[:, j::4] for j in range(4))
    with np.errstate(divide="ignore", invalid="ignore"):
        deltas = cand_num / cand_den - base_num / base_den
    deltas[(base_den <= 0) | (cand_den <= 0)] = np.nan
    return np.asarray(deltas, dtype=np.float64)


def distinct_columns(sums: FloatArray) -> tuple[FloatArray, npt.NDArray[np.intp]]:
    """What ``np.unique(sums, axis=1, return_inverse=True)`` returns (the distinct columns in
    lexicographic order, top row first, and each column's index among them), from one
    ``lexsort`` of the columns instead of a sort of them as records, which is many times
    slower on a large card. With no rows every column is alike."""
    if not sums.shape[0] or not sums.shape[1]:
        return sums[:, : min(1, sums.shape[1])], np.zeros(sums.shape[1], dtype=np.intp)
    order = np.lexsort(sums[::-1])
    ordered = sums[:, order]
    new = np.ones(sums.shape[1], dtype=bool)
    new[1:] = (ordered[:, 1:] != ordered[:, :-1]).any(axis=0)
    inverse = np.empty(sums.shape[1], dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return ordered[:, new], inverse


def percentile_interval(deltas: FloatArray, confidence: float = CONFIDENCE) -> Interval | None:
    """The percentile interval of resampled values, or None when more than 1% of the
    resamples have no value (NaN): an interval over the rest would be conditioned on luck."""
    defined = deltas[~np.isnan(deltas)]
    if len(deltas) == 0 or len(defined) < 0.99 * len(deltas):
        return None
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(defined, [100 * alpha, 100 * (1 - alpha)])
    return Interval(stable(float(low)), stable(float(high)))


def task_counts(rng: np.random.Generator, rows: int, tasks: int) -> FloatArray:
    """``rows`` bootstrap resamples of ``tasks`` tasks, as how often each task was drawn
    (each row sums to ``tasks``): the same draw as indexing with
    ``rng.integers(0, tasks, (rows, tasks))``, counted per row."""
    drawn = rng.integers(0, tasks, size=(rows, tasks), dtype=np.int64)
    drawn += np.arange(rows, dtype=np.int64)[:, None] * tasks
    return np.bincount(drawn.ravel(), minlength=rows * tasks).reshape(rows, tasks).astype(np.float64)


def mcnemar_exact(base_only: int, cand_only: int) -> float:
    """The exact two-sided McNemar p-value for paired pass/fail outcomes: ``base_only``
    pairs passed only on the base side, ``cand_only`` only on the candidate's. Under the
    null each discordant pair is a fair coin, so p is twice the smaller binomial tail,
    capped at 1 (1 when there are no discordant pairs). Computed in log space, exact to
    float rounding for any count."""
    for name, value in (("base_only", base_only), ("cand_only", cand_only)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    n = base_only + cand_only
    k = min(base_only, cand_only)
    if n == 0 or 2 * k >= n:
        return 1.0
    i = np.arange(k + 1, dtype=np.float64)
    log_pmf = math.lgamma(n + 1) - _lgamma(i + 1) - _lgamma(n - i + 1) - n * math.log(2.0)
    peak = float(log_pmf.max())
    tail = math.exp(peak + math.log(float(np.exp(log_pmf - peak).sum())))
    return min(1.0, 2.0 * tail)


def _lgamma(values: FloatArray) -> FloatArray:
    return np.fromiter((math.lgamma(v) for v in values), dtype=np.float64, count=len(values))


def stable(value: float) -> float:
    """``value`` to 12 decimals, and -0 as 0: float noise rounded away (a delta of 1e-17 on
    identical cards is 0), so identical inputs print identical, readable JSON on any machine.
    Every number a comparison reports goes through here."""
    rounded = round(value, 12)
    return 0.0 if rounded == 0 else rounded


def wilson_interval(successes: int, trials: int, confidence: float = CONFIDENCE) -> Interval | None:
    """The Wilson score interval for a pass rate of ``successes`` in ``trials`` independent
    episodes (one per task: a probe), or None for no trials. Unlike the normal
    approximation it stays inside [0, 1] and is not degenerate at 0 or ``trials`` passes,
    which a probe of a too-hard or too-easy level often gives. Raises ``ValueError`` for
    counts that are not 0 <= successes <= trials."""
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / trials
    scale = 1.0 + z * z / trials
    center = (p + z * z / (2 * trials)) / scale
    half = z * math.sqrt(p * (1.0 - p) / trials + z * z / (4 * trials * trials)) / scale
    return Interval(stable(max(0.0, center - half)), stable(min(1.0, center + half)))
