"""The trainer's log (``frostgym.compare.training_log``): KL and entropy per step, the two
flags at the steps their documented rules name, and both shown by ``frostgym trend`` and
``frostgym report``."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.agents import OracleAgent
from frostgym.cli import app
from frostgym.compare.training_log import (
    MAX_WINDOWS,
    TrainingLog,
    TrainingRules,
    TrainingStep,
    read_training_log,
    training_diagnostics,
    training_flags,
)
from frostgym.core.errors import TrainingLogError
from tests.report_cards import make_card

ROOT = Path(__file__).resolve().parents[2]
GRPO_L1 = ROOT / "benchmarks" / "results" / "grpo-l1"


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _steps(kl: Sequence[float | None], entropy: Sequence[float | None]) -> list[TrainingStep]:
    return [TrainingStep(step=i + 1, kl=k, entropy=e) for i, (k, e) in enumerate(zip(kl, entropy, strict=True))]


def _text(output: str) -> str:
    return " ".join(output.replace("│", " ").split())


def test_the_committed_grpo_run_reads_and_raises_no_flag() -> None:
    log = training_diagnostics(GRPO_L1 / "steps.jsonl")
    assert [s.step for s in log.steps] == list(range(1, 41))
    assert log.steps[0].kl == 0.0 and log.steps[-1].kl == pytest.approx(0.1583, abs=1e-4)
    assert log.steps[0].entropy == pytest.approx(1.5594, abs=1e-4)
    assert all(s.reward is not None and s.loss is not None for s in log.steps)
    assert log.flags == ()
    windows = log.windows()
    assert [(w.first, w.last, w.steps) for w in windows] == [(i, i + 4, 5) for i in range(1, 41, 5)]
    assert windows[0].kl == pytest.approx(sum(s.kl or 0.0 for s in log.steps[:5]) / 5)
    # the same run from the directory (steps.jsonl first) and from TRL's log_history
    assert read_training_log(GRPO_L1) == log.steps
    history = read_training_log(GRPO_L1 / "summary.json")
    assert [(s.step, s.kl, s.entropy, s.reward) for s in history] == [
        (s.step, s.kl, s.entropy, s.reward) for s in log.steps
    ]


def test_entropy_collapse_is_flagged_at_the_step_the_trailing_mean_crosses() -> None:
    # baseline (steps 1-5) 2.0; threshold 0.1 x 2.0 = 0.2. From step 6 entropy is 0.1: the
    # trailing mean of 5 is (5 - j) x 2.0 + j x 0.1 over 5 after j low steps, first below
    # 0.2 at j = 5 (0.1): step 10. No KL in the log: no KL flag.
    steps = _steps([None] * 12, [2.0] * 5 + [0.1] * 7)
    [flag] = training_flags(steps)
    assert (flag.kind, flag.step) == ("entropy_collapse", 10)
    assert "below 0.1 x the first 5 steps' 2" in flag.message and "steps 6-10" in flag.message
    # just above the threshold: no flag
    assert training_flags(_steps([None] * 12, [2.0] * 5 + [0.21] * 7)) == []


def test_entropy_below_the_absolute_floor_is_a_collapse_whatever_the_baseline() -> None:
    # a policy that starts nearly deterministic (0.3) falls to 0.04: never below a tenth of
    # its start (0.03), but the trailing mean (0.3 (5 - j) + 0.04 j) / 5 is below the floor
    # 0.05 from j = 5: step 10.
    steps = _steps([None] * 10, [0.3] * 5 + [0.04] * 5)
    [flag] = training_flags(steps)
    assert (flag.kind, flag.step) == ("entropy_collapse", 10)
    assert "below the floor 0.05 nats/token" in flag.message
    # a custom floor and window move the step: (0.3 + 0.04) / 2 = 0.17 < 0.2 at step 6
    [flag] = training_flags(steps, TrainingRules(window=2, entropy_floor=0.2))
    assert flag.step == 6


def test_kl_above_the_maximum_is_a_blowup_at_the_crossing_step() -> None:
    # KL 0.5 for 10 steps, then 2.0: the trailing mean (0.5 (5 - j) + 2 j) / 5 is 0.8 at
    # j = 1 and 1.1 at j = 2: step 12 (never 10x the window before). Entropy stays healthy.
    steps = _steps([0.5] * 10 + [2.0] * 5, [1.5] * 15)
    [flag] = training_flags(steps)
    assert (flag.kind, flag.step) == ("kl_blowup", 12)
    assert flag.message == "KL blow-up at step 12: mean KL of steps 8-12 1.1 is above 1 nats/token"


def test_kl_growing_tenfold_over_a_window_is_a_blowup() -> None:
    # 0.01 for 10 steps, then 0.3: the trailing mean (0.01 (5 - j) + 0.3 j) / 5 is 0.068 at
    # j = 1 (under the 0.1 floor) and 0.126 at j = 2, 12.6x the 0.01 of steps 3-7: step 12.
    steps = _steps([0.01] * 10 + [0.3] * 5, [1.5] * 15)
    [flag] = training_flags(steps)
    assert (flag.kind, flag.step) == ("kl_blowup", 12)
    assert "mean KL of steps 8-12 0.126 is over 10 x that of steps 3-7 0.01" in flag.message
    # the same growth below the floor (0.001 to 0.03): the start of a run, no flag
    assert training_flags(_steps([0.001] * 5 + [0.03] * 5, [1.5] * 10)) == []


def test_a_non_finite_kl_is_a_blowup_at_its_step() -> None:
    steps = _steps([0.01, 0.02, math.inf, 0.02], [1.0] * 4)
    [flag] = training_flags(steps)
    assert (flag.kind, flag.step) == ("kl_blowup", 3)


def test_a_log_without_kl_reads_with_kl_none_and_raises_no_kl_flag(tmp_path: Path) -> None:
    rows = [{"step": i, "reward": 0.5, "entropy": 1.2, "loss": 0.1} for i in range(1, 13)]
    log = training_diagnostics(_write(tmp_path / "steps.jsonl", rows))
    assert all(s.kl is None for s in log.steps) and not log.has("kl")
    assert log.flags == ()
    assert all(w.kl is None for w in log.windows())
    assert log.to_json()["steps"][0] == {"step": 1, "reward": 0.5, "kl": None, "entropy": 1.2, "loss": 0.1}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"step": 3, "kl": 0.1', "line 4: not JSON"),
        ("[1, 2]", "line 4: not a JSON object"),
        ('{"kl": 0.1}', "line 4: no non-negative integer 'step'"),
        ('{"step": "3"}', "line 4: no non-negative integer 'step'"),
        ('{"step": 3, "kl": "high"}', "line 4: 'kl' is not a number"),
        ('{"step": 3, "entropy": true}', "line 4: 'entropy' is not a number"),
        ('{"step": 1}', "line 4: step 1 after step 2"),
    ],
)
def test_a_malformed_line_is_an_error_naming_the_line(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text('{"step": 1, "kl": 0.0}\n\n{"step": 2, "kl": 0.1}\n' + line + "\n")  # line 4
    with pytest.raises(TrainingLogError, match=f"steps.jsonl: {why}"):
        read_training_log(path)


def test_unreadable_logs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TrainingLogError, match="cannot read"):
        read_training_log(tmp_path / "missing.jsonl")
    with pytest.raises(TrainingLogError, match="no training log in it"):
        read_training_log(tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TrainingLogError, match="holds no step"):
        read_training_log(tmp_path / "empty.jsonl")
    (tmp_path / "state.json").write_text('{"global_step": 3}')
    with pytest.raises(TrainingLogError, match="'log_history' list"):
        read_training_log(tmp_path / "state.json")


def test_trainer_state_log_history_skips_summary_and_eval_entries(tmp_path: Path) -> None:
    history = [
        {"step": 1, "loss": 0.3, "kl": 0.0, "entropy": 1.0, "reward": 0.1, "epoch": 0.1},
        {"step": 1, "eval_loss": 0.5},
        {"step": 2, "loss": 0.2, "kl": 0.01, "entropy": 0.9, "reward": 0.2},
        {"step": 2, "train_runtime": 12.0, "train_loss": 0.25},
    ]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": history}))
    steps = read_training_log(tmp_path)
    assert steps == (
        TrainingStep(step=1, reward=0.1, kl=0.0, entropy=1.0, loss=0.3),
        TrainingStep(step=2, reward=0.2, kl=0.01, entropy=0.9, loss=0.2),
    )


def test_rules_refuse_nonsense() -> None:
    bad: list[dict[str, Any]] = [{"window": 0}, {"entropy_fraction": 1.0}, {"kl_max": 0.0}, {"kl_growth": 1.0}]
    for rules in bad:
        with pytest.raises(ValueError, match="must be"):
            TrainingRules(**rules)


def test_long_runs_show_at_most_max_windows_rows() -> None:
    steps = _steps([0.01] * 1000, [1.0] * 1000)
    windows = TrainingLog("x", tuple(steps)).windows()
    assert len(windows) == MAX_WINDOWS and windows[0].steps == 50


def test_trend_prints_windows_and_flags(tmp_path: Path) -> None:
    rows = [{"step": i, "reward": 0.2, "kl": 0.5 if i <= 10 else 2.0, "entropy": 1.5} for i in range(1, 16)]
    path = _write(tmp_path / "steps.jsonl", rows)
    out = tmp_path / "trend.json"
    result = CliRunner().invoke(app, ["trend", "--training-log", str(path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    text = _text(result.output)
    assert "11-15 0.200 2.000 1.500 kl_blowup" in text
    assert "flag: KL blow-up at step 12: mean KL of steps 8-12 1.1 is above 1 nats/token" in text
    data = json.loads(out.read_text())
    assert data["rows"] == [] and data["training_log"]["flags"][0]["step"] == 12
    # a rule moved on the command line moves the flag
    moved = CliRunner().invoke(app, ["trend", "--training-log", str(path), "--kl-max", "1.5"])
    assert "KL blow-up at step 14" in _text(moved.output), moved.output
    # the committed run: no flag
    clean = CliRunner().invoke(app, ["trend", "--training-log", str(GRPO_L1 / "steps.jsonl")])
    assert clean.exit_code == 0 and "no training flag (40 steps)" in _text(clean.output), clean.output


def test_trend_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text('{"step": 1}\nnot json\n')
    result = CliRunner().invoke(app, ["trend", "--training-log", str(path)])
    assert result.exit_code == 2 and "line 2: not JSON" in _text(result.output), result.output
    nothing = CliRunner().invoke(app, ["trend"])
    assert nothing.exit_code == 2 and "give card directories, --training-log, or both" in _text(nothing.output)


def test_report_shows_the_training_section(tmp_path: Path) -> None:
    card = make_card(tmp_path / "oracle", OracleAgent(), ["frostgym/Arithmetic-v0"], 2, samples=1)
    rows = [{"step": i, "reward": 0.2, "entropy": 2.0 if i <= 5 else 0.1} for i in range(1, 13)]
    log = _write(tmp_path / "steps.jsonl", rows)
    result = CliRunner().invoke(app, ["report", str(card), "--out", str(tmp_path / "r"), "--training-log", str(log)])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert '<a href="#training">Training</a>' in page and '<section id="training">' in page
    assert "entropy collapse at step 10: mean entropy of steps 6-10 0.1 is below 0.1" in page
    assert "No KL in the log (no reference model): no KL flag." in page
    plain = CliRunner().invoke(app, ["report", str(card), "--out", str(tmp_path / "p")])
    assert plain.exit_code == 0 and 'id="training"' not in (tmp_path / "p" / "index.html").read_text()
