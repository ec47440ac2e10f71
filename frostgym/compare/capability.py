"""Capability or compression: did the candidate learn to solve tasks the base could not, or to
solve the tasks the base could already solve in fewer samples?

Why: RL on verifiable rewards mostly concentrates probability on paths the base model could
already sample, so pass@1 rises while pass@k at a large k stays flat or falls; a checkpoint
that only compresses search looks like progress at k = 1 and is none at the budget the base
was given. Two cards with several samples per task hold the answer: both pass@k curves, the k
at which they cross, and the reach sets (the tasks one side ever solved and the other never
did). Every interval here is the comparison's own paired bootstrap of the pass@k delta
(``frostgym.compare.views``): nothing is resampled again.

The verdict (``docs/compare.md``, "Capability or compression?"), with K the largest k at which
both cards have pass@k on the overall slice under errors_as_failures:

- *sharper*: pass@1's paired 95% interval lies above 0 (over at least ``views.MIN_TASKS`` tasks);
- *wider*: pass@K's paired 95% interval lies above 0 (likewise). When every task has K samples,
  pass@K of a task is 1 when any sample passed, so pass@K's delta is exactly the change in the
  share of tasks reached, (cand-only - base-only) / tasks, and its interval is the test of
  whether the candidate reaches more tasks than the base beyond noise;
- ``compressed``: sharper and not wider (pass@K flat or lower: the gain at one sample is on
  tasks the base could already solve, within noise of its reach);
- ``expanded``: wider and not sharper; ``both``: sharper and wider; ``neither``: neither.

The reach sets are reported beside the verdict, not folded into it: whether one task was ever
solved in n samples flips between two runs of one policy for any task solved now and then, so
a handful of cand-only tasks is read through pass@K's interval, not on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from frostgym.compare.facts import EpisodeFacts, IntArray, TaskKey
from frostgym.compare.views import ViewDelta

Verdict = Literal["expanded", "compressed", "both", "neither"]
VERDICTS: tuple[Verdict, ...] = ("expanded", "compressed", "both", "neither")
#: The gate metric that reads pass@K at the largest k both cards have (``Comparison.measure``).
CEILING_METRIC = "pass@max"
#: Passing episodes listed per reach-only task in the JSON (the count is always whole).
LISTED_EPISODES = 16


@dataclass(frozen=True)
class ReachedTask:
    """A task one side solved in some sample and the other side in none: the solving side's
    passing episodes, by plan id (``env:task:sample``, how both cards name the episode)."""

    env_id: str
    task_id: str
    passed: int
    episodes: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"env_id": self.env_id, "task_id": self.task_id, "passed": self.passed, "episodes": list(self.episodes)}


@dataclass(frozen=True)
class Capability:
    """Both pass@k curves with the paired interval at each k, where they cross, the reach
    sets and the verdict (the module docstring has the rule)."""

    #: pass@k of the overall slice under errors_as_failures, one row per k in order.
    curve: tuple[ViewDelta, ...]
    #: The largest k at which both cards have pass@k.
    k_max: int
    #: The smallest k at which the candidate's pass@k is at or below the base's after being
    #: above at k = 1, or at or above after being below; None when they do not cross.
    crossing: int | None
    tasks: int
    base_reached: int
    cand_reached: int
    #: Tasks the candidate solved in some sample and the base in none, and the reverse.
    cand_only: tuple[ReachedTask, ...]
    base_only: tuple[ReachedTask, ...]
    verdict: Verdict
    #: One line: the numbers the verdict was read from.
    reason: str

    def to_json(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "k_max": self.k_max,
            "crossing": self.crossing,
            "curve": [
                {
                    "k": int(v.view.removeprefix("pass@")),
                    "base": v.base,
                    "cand": v.cand,
                    "delta": v.delta,
                    "ci_low": v.ci_low,
                    "ci_high": v.ci_high,
                    "n_tasks": v.n_tasks,
                    "too_small": v.too_small,
                }
                for v in self.curve
            ],
            "reach": {
                "tasks": self.tasks,
                "base": self.base_reached,
                "cand": self.cand_reached,
                "both": self.cand_reached - len(self.cand_only),
                "cand_only": [t.to_json() for t in self.cand_only],
                "base_only": [t.to_json() for t in self.base_only],
            },
        }


def ceiling_k(ks: Sequence[int], curve: Sequence[ViewDelta]) -> int | None:
    """The largest k of ``ks`` whose pass@k row in ``curve`` (one slice and rule) has a value
    on both sides, None when none has."""
    have = {v.view for v in curve if v.base is not None and v.cand is not None}
    return next((k for k in sorted(ks, reverse=True) if f"pass@{k}" in have), None)


def crossing(curve: Sequence[ViewDelta]) -> int | None:
    """The smallest k after the first at which the candidate's pass@k is at or below the
    base's when it was above at the first k, or at or above when it was below; None when the
    first delta is 0 or missing, or the curves do not cross."""
    deltas = [(int(v.view.removeprefix("pass@")), v.delta) for v in curve]
    if not deltas or deltas[0][1] is None or deltas[0][1] == 0:
        return None
    sign = 1.0 if deltas[0][1] > 0 else -1.0
    return next((k for k, delta in deltas[1:] if delta is not None and sign * delta <= 0), None)


def above_zero(view: ViewDelta) -> bool:
    """Whether the paired interval lies above 0 and is a claim (enough tasks)."""
    return not view.too_small and view.ci_low is not None and view.ci_low > 0


def judge_capability(pass1: ViewDelta, ceiling: ViewDelta) -> Verdict:
    """The verdict from pass@1's and pass@K's paired intervals (the module docstring)."""
    sharper, wider = above_zero(pass1), above_zero(ceiling)
    if sharper and wider:
        return "both"
    if sharper:
        return "compressed"
    return "expanded" if wider else "neither"


def capability(
    ks: Sequence[int],
    views: Sequence[ViewDelta],
    tasks: Sequence[TaskKey],
    base: EpisodeFacts,
    base_rows: IntArray,
    cand: EpisodeFacts,
    cand_rows: IntArray,
) -> Capability | None:
    """The capability reading of a comparison, or None when the cards have fewer than two
    samples of any task (no curve). ``views`` are the comparison's; ``base`` and ``cand``
    its paired rows (row i of each is the same episode), ``base_rows`` and ``cand_rows`` each
    row's index in ``tasks``."""
    curve = tuple(
        v
        for k in ks
        for v in views
        if v.slice == "overall" and v.rule == "errors_as_failures" and v.view == f"pass@{k}"
    )
    k_max = ceiling_k(ks, curve)
    if k_max is None or k_max < 2:
        return None
    curve = tuple(v for v in curve if int(v.view.removeprefix("pass@")) <= k_max)
    base_solved = _solved(base, base_rows, len(tasks))
    cand_solved = _solved(cand, cand_rows, len(tasks))
    cand_only = _reached(np.flatnonzero((cand_solved > 0) & (base_solved == 0)), tasks, cand, cand_rows, cand_solved)
    base_only = _reached(np.flatnonzero((base_solved > 0) & (cand_solved == 0)), tasks, base, base_rows, base_solved)
    pass1, ceiling = curve[0], curve[-1]
    verdict = judge_capability(pass1, ceiling)
    crosses = crossing(curve)
    reached = (int((base_solved > 0).sum()), int((cand_solved > 0).sum()))
    return Capability(
        curve=curve,
        k_max=k_max,
        crossing=crosses,
        tasks=len(tasks),
        base_reached=reached[0],
        cand_reached=reached[1],
        cand_only=cand_only,
        base_only=base_only,
        verdict=verdict,
        reason=_reason(pass1, ceiling, crosses, len(cand_only), len(base_only), len(tasks)),
    )


def _solved(facts: EpisodeFacts, rows: IntArray, tasks: int) -> IntArray:
    """Passing episodes per task row (drops never pass, so the same under both rules)."""
    keep = facts.passed & (rows >= 0)
    solved: IntArray = np.bincount(rows[keep], minlength=tasks).astype(np.int64)
    return solved


def _reached(
    at: IntArray, tasks: Sequence[TaskKey], facts: EpisodeFacts, rows: IntArray, solved: IntArray
) -> tuple[ReachedTask, ...]:
    """The tasks at the task rows ``at``, each with the passing episodes of ``facts`` (one
    pass over the rows, however many tasks: two large cards may differ in thousands)."""
    chosen = np.flatnonzero(facts.passed & np.isin(rows, at))
    chosen = chosen[np.argsort(rows[chosen], kind="stable")]  # by task row, in row order within one
    starts = np.searchsorted(rows[chosen], at)
    out = []
    for row, start in zip(at.tolist(), starts.tolist(), strict=True):
        listed = facts.plan_ids[chosen[start : start + min(int(solved[row]), LISTED_EPISODES)]].tolist()
        env_id, task_id = tasks[row]
        out.append(ReachedTask(env_id, task_id, int(solved[row]), tuple(str(p) for p in listed)))
    return tuple(out)


def _reason(
    pass1: ViewDelta,
    ceiling: ViewDelta,
    crosses: int | None,
    cand_only: int,
    base_only: int,
    tasks: int,
) -> str:
    def shown(view: ViewDelta) -> str:
        delta = "-" if view.delta is None else f"{view.delta:+.3f}"
        interval = "" if view.ci_low is None or view.ci_high is None else f" [{view.ci_low:+.3f}, {view.ci_high:+.3f}]"
        return f"{view.view} {delta}{interval}" + (" (too few tasks to say)" if view.too_small else "")

    beyond = {True: "above 0", False: "not above 0"}
    where = "the curves do not cross" if crosses is None else f"the curves cross at k = {crosses}"
    return (
        f"{shown(pass1)} {beyond[above_zero(pass1)]}, {shown(ceiling)} {beyond[above_zero(ceiling)]}; "
        f"{where}; the candidate reaches {cand_only} of {tasks} tasks the base never solved, "
        f"the base {base_only} the candidate never solved"
    )
