"""What a long eval shows while it works (``frostgym.commands.progress``): the model named on the
first line, the loading phase said at both ends, and, with stdout a pipe, plain lines of
episodes and tokens, whose token count is the card's own.

The eval runs in a real subprocess (stdout a pipe, as in a log or CI) with a real tiny
random Llama saved as a model directory (``hf:PATH``); the OpenAI agent's count comes
from a real HTTP server on loopback.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from frostgym.agents.base import AgentRequest, CountsTokens
from frostgym.agents.openai_compat import OpenAIAgent
from frostgym.commands.progress import RunProgress, TokenMeter, phase
from tests.chat_server import ChatServer

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")

FROSTGYM = [sys.executable, "-c", "from frostgym.cli import main; main()"]
#: An episodes line: ``episodes 3/4 · 2 replies · 1,204 tokens · 9.8 tok/s · 2s elapsed · ...``.
LINE = re.compile(
    r"^episodes (\d+)/(\d+) · ([\d,]+) replies · ([\d,]+) tokens · ([\d.]+) tok/s · (\S+) elapsed · (.+)$"
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama with SmolLM2's tokenizer, saved as a local model directory."""
    from frostgym.agents.smollm2 import tiny_random_model

    model, tokenizer = tiny_random_model(0, max_positions=1024)
    path = tmp_path_factory.mktemp("models") / "tiny-llama"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _card_tokens(card: Path) -> int:
    """Completion tokens the card records, over every step of every episode."""
    total = 0
    for line in (card / "episodes.jsonl").read_text().splitlines():
        total += sum(step["agent"]["completion_tokens"] for step in json.loads(line)["steps"])
    return total


def test_a_piped_eval_names_the_model_then_prints_episodes_and_tokens_lines(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "card"
    env = {**os.environ, "FROSTGYM_PROGRESS_SECONDS": "0.2"}
    run = subprocess.run(
        [*FROSTGYM, "eval", "--env", "frostgym/Arithmetic-v0[level=1]", "--agent", f"hf:{model_dir}",
         "--episodes", "4", "--max-new-tokens", "48", "--model-batch-size", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout
    lines = run.stdout.splitlines()
    assert lines[0] == (
        f"agent: tiny-llama (LlamaForCausalLM, in the local directory {model_dir}), greedy, "
        f"up to 48 new tokens a turn, {'CUDA' if torch.cuda.is_available() else 'CPU'}"
        + (f" ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "")
    )
    assert lines[1] == f"loading the model in {model_dir}..."
    assert any(re.fullmatch(r"loaded the model in \d+\.\ds", line) for line in lines), lines[:6]
    progress = [m for m in map(LINE.match, lines) if m]
    assert progress, run.stdout
    first, last = progress[0], progress[-1]
    assert first.group(1, 2, 3, 4, 7) == ("0", "4", "0", "0", "estimate after the first reply")  # the plan is known
    assert last.group(1, 2, 3, 7) == ("4", "4", "4", "done")
    tokens = int(last.group(4).replace(",", ""))
    assert tokens == _card_tokens(out) > 0  # every generated token was counted, as the card counts them
    assert float(last.group(5)) > 0
    assert "accounting (complete)" in run.stdout and f"card written to {out}" in run.stdout


def test_an_oracle_run_shows_episodes_without_tokens(tmp_path: Path) -> None:
    run = subprocess.run(
        [*FROSTGYM, "eval", "--env", "frostgym/Arithmetic-v0", "--agent", "oracle", "--episodes", "3",
         "--out", str(tmp_path / "card")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout
    lines = run.stdout.splitlines()
    assert lines[0].startswith("agent: oracle (")
    assert re.fullmatch(r"episodes 3/3 · \d+s elapsed · done", [x for x in lines if x.startswith("episodes")][-1])


def test_the_hf_agent_reports_each_decoding_step_as_it_is_made(model_dir: Path) -> None:
    from frostgym.agents.hf import HFAgent
    from frostgym.agents.sampling import SamplingParams

    agent = HFAgent.from_pretrained(model_dir, sampling=SamplingParams(max_new_tokens=16), batch_size=3)
    assert isinstance(agent, CountsTokens) and agent.on_tokens is None
    requests = [AgentRequest([{"role": "user", "content": f"Say {i}."}], f"e{i}", 0, seed=i) for i in range(5)]
    plain = agent.act(requests)
    calls: list[tuple[int, int]] = []
    agent.on_tokens = lambda tokens, replies: calls.append((tokens, replies))
    counted = agent.act(requests)
    assert [r.action for r in counted] == [r.action for r in plain]  # counting changes no reply
    assert sum(n for n, _ in calls) == sum(r.completion_tokens or 0 for r in counted)
    # Per step, not per call: two generate calls (3 + 2 prompts) of up to 16 steps each,
    # each step's tokens as (tokens, 0), each call's replies as (0, rows) once it is done.
    steps = [n for n, replies in calls if not replies]
    assert len(steps) > 2 and max(steps) <= 3
    assert [c for c in calls if c[1]] == [(0, 3), (0, 2)]


def test_the_openai_agent_reports_completion_tokens_from_usage() -> None:
    meter = TokenMeter()
    with ChatServer() as server:
        agent = OpenAIAgent(server.base_url, "echo", concurrency=3)
        assert isinstance(agent, CountsTokens)
        agent.on_tokens = meter.add
        agent.act([AgentRequest([{"role": "user", "content": f"q{i}"}], f"e{i}", 0, seed=i) for i in range(6)])
    assert meter.count == agent.usage["completion_tokens"] == 42  # the server reports 7 a reply
    assert meter.replies == 6


def _piped() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=200, force_terminal=False), buffer


def _wait_for(buffer: io.StringIO, text: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in buffer.getvalue():
        assert time.monotonic() < deadline, buffer.getvalue()
        time.sleep(0.01)


def test_a_slow_phase_says_what_it_does_and_that_it_is_alive() -> None:
    console, buffer = _piped()
    with phase(console, "converting a model (first use only)", "converted it", short="converting", interval=0.05):
        _wait_for(buffer, "converting: still working")  # the work outlasts a heartbeat, however loaded the machine
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "converting a model (first use only)..."
    assert re.fullmatch(r"converting: still working, \d+s elapsed, \d+s of CPU time", lines[1])
    assert re.fullmatch(r"converted it in \d+\.\ds", lines[-1])


def test_a_failed_phase_says_so_and_raises() -> None:
    console, buffer = _piped()
    with pytest.raises(RuntimeError), phase(console, "loading", "loaded", interval=30):
        raise RuntimeError("no weights")
    assert re.fullmatch(r"loading\.\.\.\nloading: failed after \d+\.\ds\n", buffer.getvalue())


def test_run_progress_lines_count_episodes_tokens_and_estimate_the_rest() -> None:
    console, buffer = _piped()
    meter = TokenMeter()
    meter.counting = True
    outcome: Any = None
    with RunProgress(console, meter, interval=0.05) as progress:
        progress.on_plan(8, 2)  # 2 done by an earlier session
        meter.add(1_200)
        _wait_for(buffer, "1,200 tokens")
        assert "0 replies · 1,200 tokens" in buffer.getvalue() and "estimate after the first reply" in buffer.getvalue()
        meter.add(0, 3)  # a batch of 3 replies is done: the 3 other episodes still need theirs
        _wait_for(buffer, "3 replies")
        assert re.search(
            r"episodes 2/8 · 3 replies · 1,200 tokens · [\d.]+ tok/s · \d+s elapsed · ~\d+s left", buffer.getvalue()
        )
        progress.on_outcome(outcome)
        _wait_for(buffer, "episodes 3/8")
        assert re.search(
            r"episodes 3/8 · 3 replies · 1,200 tokens · [\d.]+ tok/s · \d+s elapsed · ~\d+s left", buffer.getvalue()
        )
        for _ in range(5):
            progress.on_outcome(outcome)
    assert buffer.getvalue().splitlines()[-1].endswith("elapsed · done")
    assert buffer.getvalue().splitlines()[-1].startswith("episodes 8/8 · 3 replies · 1,200 tokens")
