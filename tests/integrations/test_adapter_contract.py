"""The contract every trainer adapter keeps, on every id: an episode played through the
adapter's real package is the ``gym.make`` episode.

For two tasks of each id (``reference.cases``), the oracle's actions and a junk reply
played through each adapter's driver (``tests/integrations/drivers/<adapter>.py``: the
adapter driven by its trainer's own package) must show the agent the same messages (as
text) and end with the same grade (score and failure label) as through ``gym.make``.
verl's driver is held to the same check in ``verl_suite.py``, in a process of its own
(``test_verl_adapter.py``: verl's packages are installed apart from the venv's).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from frostgym.train.session import TaskRow
from tests.integrations.reference import cases, junk_actions, oracle_actions, reference_play

#: One driver module per adapter; each has ``play(row, actions) -> Played`` and
#: ``PACKAGE``, the distribution it runs (skipped with a reason where it is not installed).
ADAPTERS = ("trl", "verifiers", "skyrl_gym")
CASES = cases()


def driver(name: str) -> ModuleType:
    module = importlib.import_module(f"tests.integrations.drivers.{name}")
    pytest.importorskip(module.PACKAGE, reason=f"{module.PACKAGE} is not installed (make install installs it)")
    return module


@pytest.mark.parametrize("row", CASES, ids=lambda r: r.task_id)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_oracle_and_junk_play_the_gym_episode(adapter: str, row: TaskRow) -> None:
    play = driver(adapter).play
    oracle = oracle_actions(row)
    assert play(row, oracle) == reference_play(row, oracle)
    junk = junk_actions(row)
    assert play(row, junk) == reference_play(row, junk)
