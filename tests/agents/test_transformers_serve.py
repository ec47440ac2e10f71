"""The OpenAI agent against a real ``transformers serve`` on loopback (a one-at-a-time
server), at ``frostgym eval``'s default flags: every episode completes, no request times
out in the server's queue (so none of its generations is wasted), and the greedy replies
equal the in-process HF agent's on the same weights."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="transformers serve needs fastapi (the dev extra)")
pytest.importorskip("openai", reason="transformers serve needs openai (the dev extra)")

from frostgym.agents.smollm2 import tiny_random_model
from tests.cli_process import FROSTGYM, ROOT
from tests.model_server import ServerDidNotStart, transformers_serve

pytestmark = pytest.mark.slow
EPISODES = 6


def _eval(agent: str, out: Path) -> dict[str, list[object]]:
    command = [*FROSTGYM, "eval", "--env", "frostgym/Arithmetic-v0[level=1]", "--episodes", str(EPISODES)]
    command += ["--agent", agent, "--max-new-tokens", "12", "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return {r["plan_id"]: [s["action"] for s in r["steps"]] for r in records}


def test_a_real_transformers_serve_completes_every_episode_with_the_in_process_replies(tmp_path: Path) -> None:
    model, tokenizer = tiny_random_model(0, max_positions=512)
    model_dir = tmp_path / "tiny"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    try:
        with transformers_serve(model_dir, start_timeout_s=180) as url:
            served = _eval(f"openai:{url}#{model_dir}", tmp_path / "served")
    except ServerDidNotStart as error:
        pytest.skip(f"transformers serve cannot start here: {error}")
    card = json.loads((tmp_path / "served" / "card.json").read_text())
    usage = card["agent"]["usage"]
    assert len(served) == EPISODES and not (tmp_path / "served" / "drops.jsonl").read_text().strip()
    assert usage["failures"] == 0 and usage["retries"] == 0 and usage["requests"] == EPISODES
    # A tiny model answers in milliseconds, below the controller's 50 ms queueing floor, so how far the
    # limit climbs here depends on the machine's speed: what matters, no
    # generation wasted, is asserted above; the limit's response to a queue is tests/agents/test_concurrency.py's.
    assert 1 <= card["agent"]["concurrency_limit"]["reached"] <= EPISODES
    in_process = _eval(f"hf:{model_dir}", tmp_path / "in-process")
    assert served == in_process
