"""``examples/grpo_tools.py --tiny``: GRPO through TRL's tool loop on ToolsHTTP-v0 level 1,
each step logged with TRL's tool metrics, every completion recorded, and cards before and
after on the same plan."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frostgym.cards.card import load_card

pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
pytest.importorskip("trl", reason="trl is not installed")
pytest.importorskip("datasets", reason="datasets is not installed")

pytestmark = pytest.mark.slow


def test_the_tools_grpo_example_runs_through_the_tool_loop_and_logs_every_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [
        sys.executable, "examples/grpo_tools.py", "--tiny", "--steps", "2", "--batch", "2", "--generations", "2",
        "--eval-episodes", "1", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True, timeout=600)
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    keys = {
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "completions/mean_length",
        "entropy",
        "tools/call_frequency",
        "tools/failure_frequency",
        "rewards/frostgym_score/mean",
        "wall_s",
    }
    assert all(keys <= s.keys() for s in steps)
    completions = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert [c["step"] for c in completions] == [1, 1, 2, 2]  # one line per completion, 2 per step
    assert all(c["task_id"].startswith("tools_http~L1/dev/") and c["reward"] in (0.0, 1.0) for c in completions)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "frostgym/ToolsHTTP-v0[level=1]" and summary["train_split"] == "dev"
    assert summary["groups"] == 2 and 0 <= summary["groups_with_reward_variance"] <= 2
    assert summary["chat_template"] == "trl.chat_template_utils.qwen2_5_chat_template"
    before, _, _ = load_card(out / "before")
    after, _, _ = load_card(out / "after")
    assert before["plan"]["sha256"] == after["plan"]["sha256"]
