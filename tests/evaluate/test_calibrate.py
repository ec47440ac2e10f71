"""Calibration: a probe card per level, pass@1 with a Wilson interval checked against scipy,
and the level nearest the target."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.core.stats import wilson_interval
from frostgym.evaluate.calibrate import LevelProbe, nearest_level
from frostgym.evaluate.replay import replay_card


@pytest.mark.parametrize(("successes", "trials"), [(0, 1), (1, 1), (0, 30), (7, 30), (15, 30), (30, 30), (24, 100)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_interval_matches_scipy(successes: int, trials: int, confidence: float) -> None:
    ours = wilson_interval(successes, trials, confidence)
    theirs = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="wilson")
    assert ours is not None
    assert ours.low == pytest.approx(theirs.low, abs=1e-11)
    assert ours.high == pytest.approx(theirs.high, abs=1e-11)


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="successes <= trials"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="successes <= trials"):
        wilson_interval(-1, 2)


def _probe(level: int, rate: float | None) -> LevelProbe:
    return LevelProbe(level, 10, round((rate or 0) * 10), rate, None, Path("."))


def test_nearest_level_prefers_the_easier_on_a_tie() -> None:
    probes = [_probe(1, 0.9), _probe(2, 0.6), _probe(3, 0.4), _probe(4, 0.0)]
    assert nearest_level(probes, 0.5) == probes[1]
    assert nearest_level(probes, 0.0) == probes[3]
    assert nearest_level(probes, 1.0) == probes[0]
    assert nearest_level([_probe(1, None)]) is None


def test_calibrate_writes_a_card_per_level_and_names_the_nearest(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "calibrate",
            "--env",
            "frostgym/Arithmetic-v0",
            "--agent",
            "oracle",
            "--levels",
            "1,2",
            "--episodes",
            "3",
            "--out",
            str(tmp_path / "cal"),
            "--json",
            str(tmp_path / "cal.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "cal.json").read_text())
    assert [p["level"] for p in data["levels"]] == [1, 2]
    assert all(p["passed"] == 3 and p["pass_rate"] == 1.0 for p in data["levels"])
    assert data["nearest"] == 1  # every level at 1.0: the easier one
    for level in (1, 2):
        card, episodes, _ = load_card(tmp_path / "cal" / f"level-{level}")
        assert card["config"]["identity"]["env_options"] == {"frostgym/Arithmetic-v0": {"level": level}}
        assert all(e.task_id.startswith(f"arithmetic~L{level}/") for e in episodes)
        assert replay_card(tmp_path / "cal" / f"level-{level}").ok


def test_calibrate_refuses_what_it_cannot_probe(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, why in (
        (["--env", "frostgym/Code-v0"], "has no levels"),
        (["--env", "frostgym/Arithmetic-v0", "--levels", "9"], "no level \\[9\\]"),
        (["--env", "frostgym/Arithmetic-v0[level=1]"], "--levels"),
    ):
        result = runner.invoke(app, ["calibrate", *args, "--agent", "oracle", "--out", str(tmp_path / "x")])
        assert result.exit_code == 2 and re.search(why, result.output), result.output
    assert not (tmp_path / "x").exists()
