"""The gap between a card's originals and their twins: is the score memorised?

Why: a model that memorised a benchmark's tasks scores on them what it cannot score on the
same tasks with new values or names. ``frostgym eval --twins`` plays each planned task and
its twin (``TaskSource.twin``, id ``<task id>~twin``) with the same samples, so every
original is paired with its twin, and a card's views report per env the mean pass@1 of the
originals minus that of their twins with a paired bootstrap interval that resamples tasks
together with their twins (``frostgym.core.stats.paired_bootstrap``): a gap well above 0
is the tell; an interval that holds 0 shows none the run can see. The twins are not always
as easy as their originals (a HumanEval twin's names say less than the originals' did), so
the oracle's gap, 0, is the floor, not a model's expected gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from frostgym.core.task_ids import is_twin_id, original_id, twin_id

DEFINITION: Final = (
    "Per env, over the tasks played with their twins (frostgym eval --twins; a twin keeps its original's structure "
    "with new values or names, id TASK~twin) that have a pass@1 under the rule on both sides: originals and twins "
    "are their mean pass@1 (c/n per task), gap = originals - twins, and [ci_low, ci_high] its 95% paired percentile "
    "bootstrap interval, resampling tasks together with their twins (frostgym.core.stats.paired_bootstrap, seeded "
    "by the env id and the rule; null below two pairs). Memorisation shows as originals >> twins."
)


def twin_gaps(
    pass_at_1: Mapping[str, Mapping[tuple[str, str], float]], *, resamples: int | None = None
) -> dict[str, Any]:
    """Per env with twins, per rule: ``pairs``, ``originals``, ``twins``, ``gap``,
    ``ci_low`` and ``ci_high`` (see ``DEFINITION``; values null without pairs). The input
    maps each rule to the pass@1 of every task it counts, by ``(env id, task id)``; an env
    none of whose tasks has its twin counted under some rule is left out (so a card played
    without ``--twins`` has no twin gap). ``resamples``: the bootstrap's (None:
    ``frostgym.core.stats.RESAMPLES``)."""
    pairs: dict[str, set[str]] = {}
    for values in pass_at_1.values():
        for env_id, task_id in values:
            if is_twin_id(task_id):
                pairs.setdefault(env_id, set()).add(original_id(task_id))
    gaps: dict[str, Any] = {}
    for env_id in sorted(pairs):
        originals = sorted(pairs[env_id])
        gaps[env_id] = {
            rule: _gap(env_id, rule, originals, values, resamples) for rule, values in sorted(pass_at_1.items())
        }
    return gaps


def _gap(
    env_id: str, rule: str, originals: list[str], values: Mapping[tuple[str, str], float], resamples: int | None
) -> dict[str, Any]:
    # numpy and the bootstrap only for a card played with --twins: every card's views call
    # twin_gaps, and the process that reads a large card back while it is written starts in
    # a fifth of the time without them (frostgym.cards.readback).
    import numpy as np

    from frostgym.core.stats import RESAMPLES, RatioColumn, paired_bootstrap, stable

    cand = np.array([values.get((env_id, task), np.nan) for task in originals], dtype=np.float64)
    base = np.array([values.get((env_id, twin_id(task)), np.nan) for task in originals], dtype=np.float64)
    both = ~np.isnan(cand) & ~np.isnan(base)
    count = int(both.sum())
    if not count:
        return {"pairs": 0, "originals": None, "twins": None, "gap": None, "ci_low": None, "ci_high": None}
    ones = both.astype(np.float64)
    column = RatioColumn(np.where(both, base, 0.0), ones, np.where(both, cand, 0.0), ones.copy())
    [interval] = paired_bootstrap(
        [column], ("card", "twin_gap", env_id, rule), resamples=RESAMPLES if resamples is None else resamples
    )
    mean_cand, mean_base = float(cand[both].mean()), float(base[both].mean())
    return {
        "pairs": count,
        "originals": stable(mean_cand),
        "twins": stable(mean_base),
        "gap": stable(mean_cand - mean_base),
        "ci_low": None if interval is None else interval.low,
        "ci_high": None if interval is None else interval.high,
    }
