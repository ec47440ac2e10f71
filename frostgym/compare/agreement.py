"""How far a judge agrees with labels: accuracy and Cohen's kappa over paired pass/fail
verdicts, each with a seeded percentile bootstrap interval.

Pure statistics on two boolean sequences (a label and the judge's verdict per item), so the
same numbers come from the command line (``frostgym judge-agreement``) and from Python.

Cohen's kappa is ``(p_o - p_e) / (1 - p_e)``: ``p_o`` the share of items where label and
verdict agree, ``p_e`` the agreement two raters with the same pass rates would reach by chance
(``p_label * p_judge + (1 - p_label) * (1 - p_judge)``). It is undefined (None) when
``p_e`` is 1: both raters gave one and the same verdict to every item.

The intervals resample the items, each a (label, verdict) pair, with replacement: the items
are taken as independent (one labelled reply each). The resampling is drawn from
``derive_generator`` with the caller's seed, so the same labels and verdicts give the same
interval on any machine; a resample on which kappa is undefined has no value, and the
interval is None when more than 1% have none (``frostgym.core.stats.percentile_interval``).
Checked against ``scipy.stats.bootstrap`` in the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from frostgym.core.seeding import derive_generator
from frostgym.core.stats import (
    RESAMPLES,
    RESAMPLES_CHUNK,
    FloatArray,
    Interval,
    percentile_interval,
    stable,
    task_counts,
)


@dataclass(frozen=True)
class Confusion:
    """The paired counts, pass being the positive verdict: ``both_pass`` (label and judge
    pass), ``label_only`` (the label passes, the judge fails), ``judge_only`` (the judge
    passes, the label fails), ``both_fail``."""

    both_pass: int
    label_only: int
    judge_only: int
    both_fail: int

    @property
    def n(self) -> int:
        return self.both_pass + self.label_only + self.judge_only + self.both_fail

    @classmethod
    def of(cls, labels: Sequence[bool], verdicts: Sequence[bool]) -> Confusion:
        """The counts of ``labels`` against ``verdicts`` (one each per item; ``ValueError``
        when their lengths differ)."""
        if len(labels) != len(verdicts):
            raise ValueError(f"{len(labels)} labels but {len(verdicts)} verdicts")
        pairs = list(zip(labels, verdicts, strict=True))
        return cls(
            both_pass=sum(1 for a, b in pairs if a and b),
            label_only=sum(1 for a, b in pairs if a and not b),
            judge_only=sum(1 for a, b in pairs if b and not a),
            both_fail=sum(1 for a, b in pairs if not a and not b),
        )


def accuracy(table: Confusion) -> float | None:
    """The share of items where the judge agrees with the label (to 12 decimals, as every
    number frostgym reports); None with no items."""
    return None if table.n == 0 else stable((table.both_pass + table.both_fail) / table.n)


def cohen_kappa(table: Confusion) -> float | None:
    """Cohen's kappa of the table (module docstring), to 12 decimals; None with no items, or
    when chance agreement is 1."""
    kappa = _kappa(
        *(np.array([float(v)]) for v in (table.both_pass, table.label_only, table.judge_only, table.both_fail))
    )
    value = float(kappa[0])
    return None if np.isnan(value) else stable(value)


def _kappa(tp: FloatArray, fn: FloatArray, fp: FloatArray, tn: FloatArray) -> FloatArray:
    """Kappa of each column of counts, NaN where it is undefined."""
    n = tp + fn + fp + tn
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (tp + tn) / n
        chance = ((tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)) / (n * n)
        kappa = (observed - chance) / (1.0 - chance)
    kappa[(n <= 0) | (chance >= 1.0)] = np.nan
    return np.asarray(kappa, dtype=np.float64)


@dataclass(frozen=True)
class Agreement:
    """Agreement of a judge with labels: the ``confusion`` counts, ``accuracy`` and
    ``kappa`` (None where undefined) with their 95% percentile bootstrap intervals (None
    when the bootstrap cannot give one), and the ``seed`` and ``resamples`` they were drawn
    with."""

    confusion: Confusion
    accuracy: float | None
    accuracy_interval: Interval | None
    kappa: float | None
    kappa_interval: Interval | None
    seed: int
    resamples: int

    @property
    def n(self) -> int:
        return self.confusion.n


def bootstrap_agreement(
    labels: Sequence[bool], verdicts: Sequence[bool], *, seed: int, resamples: int = RESAMPLES
) -> tuple[FloatArray, FloatArray]:
    """The resampled accuracies and kappas (one per resample; NaN where undefined) of the
    items, drawn from ``derive_generator("frostgym.compare.agreement", seed)``."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    n = len(labels)
    label = np.asarray(labels, dtype=bool)
    verdict = np.asarray(verdicts, dtype=bool)
    # one column of indicators per confusion cell: a resample's counts are a matrix product
    cells = np.stack([label & verdict, label & ~verdict, ~label & verdict, ~label & ~verdict], axis=1).astype(
        np.float64
    )
    counts = np.empty((resamples, 4))
    rng = derive_generator("frostgym.compare.agreement", seed)
    for start in range(0, resamples, RESAMPLES_CHUNK):
        rows = min(RESAMPLES_CHUNK, resamples - start)
        counts[start : start + rows] = task_counts(rng, rows, n) @ cells
    tp, fn, fp, tn = (counts[:, j] for j in range(4))
    return (tp + tn) / n, _kappa(tp, fn, fp, tn)


def agreement(
    labels: Sequence[bool], verdicts: Sequence[bool], *, seed: int = 0, resamples: int = RESAMPLES
) -> Agreement:
    """Accuracy and kappa of ``verdicts`` against ``labels`` (one each per item, in the same
    order) with seeded bootstrap intervals (module docstring). No interval with fewer than
    two items. Raises ``ValueError`` for sequences of different lengths or ``resamples``
    below 1."""
    table = Confusion.of(labels, verdicts)
    accuracy_interval = kappa_interval = None
    if table.n >= 2:
        accuracies, kappas = bootstrap_agreement(labels, verdicts, seed=seed, resamples=resamples)
        accuracy_interval = percentile_interval(accuracies)
        kappa_interval = percentile_interval(kappas)
    elif resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    return Agreement(
        confusion=table,
        accuracy=accuracy(table),
        accuracy_interval=accuracy_interval,
        kappa=cohen_kappa(table),
        kappa_interval=kappa_interval,
        seed=seed,
        resamples=resamples,
    )
