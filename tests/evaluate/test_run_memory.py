"""A run's memory does not grow with the episodes it finished, nor with its plan: a run into
a card (``run_to_card``, read back in process) holds the same after 2N finished episodes as
after N, and one interrupted early holds the same whatever the size of its plan.

Measured with ``tracemalloc``, in blocks and bytes of the blocks under 64 KiB (what a
structure kept per episode is made of; the card's write buffers, a few blocks of megabytes
reused or replaced now and then, are not), with a tenth of the budget the old code broke:
it held about 10 KB an episode in all, over 500 bytes of them per planned entry in this
process (``benchmarks/run_memory.py`` measures the whole process tree).
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import frostgym.cards.card as card_module
from frostgym.agents import OracleAgent
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.plan import PlanFile
from frostgym.run.runner import Outcome, RunOptions

ENV = "frostgym/Arithmetic-v0"
OPTIONS = RunOptions(split="train")
SMALL_BLOCK = 64 << 10


def _config(tasks: int, samples: int = 1) -> dict[str, Any]:
    return card_config(
        env_ids=[ENV], agent_spec="oracle", sampling={}, episodes=tasks, samples=samples, seed=0, options=OPTIONS
    )


def _held() -> tuple[int, int]:
    """The blocks under ``SMALL_BLOCK`` traced and alive now, and their bytes."""
    gc.collect()
    sizes = [t.size for t in tracemalloc.take_snapshot().traces if t.size < SMALL_BLOCK]
    return len(sizes), sum(sizes)


class _Stop(Exception):
    pass


@pytest.fixture(autouse=True)
def _read_back_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Close reads the card back in this process, where it is traced."""
    monkeypatch.setattr(card_module, "READBACK_MIN_EPISODES", 10**9)


def test_a_run_holds_nothing_more_after_2n_finished_episodes_than_after_n(tmp_path: Path) -> None:
    """Traced from episode 1,000 on (by then every cache and buffer is made: the grader's
    first one-character strings, the card's write buffers); the plan's 2,000 entries are
    one chunk of its file (``PlanFile.CHUNK``), read back before."""
    warm_up, n = 1000, 400
    marks: dict[int, tuple[int, int]] = {}
    finished = 0

    def on_outcome(_: Outcome) -> None:
        nonlocal finished
        finished += 1
        if finished == warm_up:
            tracemalloc.start()
        elif finished in (warm_up + n, warm_up + 2 * n):
            marks[finished] = _held()
            if len(marks) == 2:
                tracemalloc.stop()  # the rest untraced: quicker

    planned = warm_up + 2 * n + 200
    try:
        card = run_to_card(tmp_path / "card", OracleAgent(), _config(planned), OPTIONS, on_outcome=on_outcome)
    finally:
        tracemalloc.stop()
    assert card["accounting"]["completed"] == planned
    (blocks_before, bytes_before), (blocks_after, bytes_after) = marks[warm_up + n], marks[warm_up + 2 * n]
    assert blocks_after - blocks_before < n // 2, (marks, "blocks kept per finished episode")
    assert bytes_after - bytes_before < n * 100, (marks, "bytes kept per finished episode")


def test_a_run_holds_none_of_its_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs stopped after the same 100 episodes, of plans of 200 and 4,200 entries
    (tasks of 20 samples: their entries are quick to make), hold the same then."""
    monkeypatch.setattr(PlanFile, "CHUNK", 50)  # the entries read back at a time: a plan of 4,200 has 2,048

    def held_after_100(tasks: int, out: Path) -> tuple[int, int]:
        finished = 0
        held = (0, 0)

        def on_outcome(_: Outcome) -> None:
            nonlocal finished, held
            finished += 1
            if finished == 100:
                held = _held()
                raise _Stop

        gc.collect()
        tracemalloc.start()
        try:
            with pytest.raises(_Stop):
                run_to_card(out, OracleAgent(), _config(tasks, samples=20), OPTIONS, on_outcome=on_outcome)
        finally:
            tracemalloc.stop()
        return held

    held_after_100(10, tmp_path / "warm-up")
    small = held_after_100(10, tmp_path / "small")
    large = held_after_100(210, tmp_path / "large")
    assert large[0] - small[0] < 1000, (small, large, "blocks kept per planned entry")
    assert large[1] - small[1] < 4000 * 50, (small, large, "bytes kept per planned entry")
