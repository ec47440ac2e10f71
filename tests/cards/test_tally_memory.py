"""A card's tally (``frostgym.cards.tally.Tally``: what its read-back process and its close
compute the accounting and views with) holds only the tasks under way: fed 2N records, it
holds no more than after N, and its plan is read alongside them, never held.

Measured with ``tracemalloc`` with a tenth of the budget the old tally broke: it held each
task's values for the views, a set of every plan id recorded and one of every task counted,
about 3 KB an episode. The views it gives are ``compute_views``'s (the running sums are
exact: ``frostgym.cards.views.ExactSum``).
"""

from __future__ import annotations

import gc
import math
import random
import tracemalloc
from collections.abc import Iterator
from typing import Any

import orjson

from frostgym.cards.tally import Tally
from frostgym.cards.views import ExactSum, _Group, compute_views
from frostgym.core.episode import Head, head_from_line

ENV = "frostgym/Fake-v0"
SAMPLES = 2
KS = [1, 2]


class _Plan:
    """The plan entries of ``tasks`` tasks of ``SAMPLES`` samples, made afresh each time it is
    iterated (the way a card's ``plan.json`` is read back), none of them held."""

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for task in range(self.tasks):
            for sample in range(SAMPLES):
                yield {"plan_id": f"{ENV}:t/{task}:{sample}", "env_id": ENV, "task_id": f"t/{task}"}


def _heads(first: int, last: int) -> list[Head]:
    """The heads of the episodes of tasks ``first`` to ``last`` (excluded), in plan order,
    with rewards of many bits (each an ``ExactSum`` keeps exact)."""
    return [
        head_from_line(
            orjson.dumps(
                {
                    "plan_id": f"{ENV}:t/{task}:{sample}",
                    "env_id": ENV,
                    "task_id": f"t/{task}",
                    "sample": sample,
                    "difficulty": ("easy", "hard")[task % 2],
                    "tags": ["word", ("a", "b", "c")[task % 3]],
                    "reward": (task * 2654435761 + sample * 40503) % 1000003 / 1000003,
                    "grade": None,
                }
            ),
            "episode",
        )
        for task in range(first, last)
        for sample in range(SAMPLES)
    ]


def _held() -> tuple[int, int]:
    """The blocks traced and alive now, and their bytes."""
    gc.collect()
    traces = tracemalloc.take_snapshot().traces
    return len(traces), sum(t.size for t in traces)


def test_a_tally_holds_no_more_after_2n_records_than_after_n() -> None:
    """Traced from the (N/2)-th record on: by then every running sum and slice is made. N is
    such that every group's sums have just folded at both counts (a slice has every task,
    or every second or third one: ``_heads``), so that the values a sum holds between two
    folds (a bounded few thousand) do not blur the count."""
    assert ExactSum.FOLD % _Group.FOLD_TASKS == 0
    tasks = 6 * ExactSum.FOLD  # 1,536 tasks of 2 samples
    n = tasks * SAMPLES
    tally = Tally(_Plan(3 * tasks), KS)
    for first in range(0, tasks // 2, 256):
        tally.add("episode", _heads(first, first + 256))
    tracemalloc.start()  # from half way: each sum's floats are replaced at its folds, traced by N
    try:
        for first in range(tasks // 2, tasks, 256):
            tally.add("episode", _heads(first, first + 256))
        before = _held()
        for first in range(tasks, 2 * tasks, 256):
            tally.add("episode", _heads(first, first + 256))
        after = _held()
    finally:
        tracemalloc.stop()
    assert after[0] - before[0] < n // 4, (before, after, "blocks kept per record")
    assert after[1] - before[1] < n * 100, (before, after, "bytes kept per record")
    result = tally.result(complete=False)
    assert result["accounting"]["pending"] == n
    assert result["views"] == compute_views(_heads(0, 2 * tasks), KS)


def test_an_exact_sum_is_fsum_of_everything_in_any_order() -> None:
    rng = random.Random(7)
    for trial in range(200):
        values = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-300, 300) for _ in range(rng.randint(0, 700))]
        if trial % 3 == 0:
            values = [rng.choice([0.0, 1.0, 0.5, 1 / 3, -0.0]) for _ in values]
        summed = ExactSum()
        at = 0
        while at < len(values):
            step = rng.randint(1, 80)
            if step % 2:
                summed.add(values[at])
                at += 1
            else:
                summed.extend(values[at : at + step])
                at += step
        rng.shuffle(values)
        assert summed.count == len(values)
        assert summed.total() == math.fsum(values)
    kept = ExactSum()
    kept.extend([math.inf, 1.0] * 100)  # nothing folds an infinity: every value is kept
    assert kept.total() == math.inf
