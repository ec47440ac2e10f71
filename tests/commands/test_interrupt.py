"""Ctrl-C on a real ``frostgym eval`` against a model server on loopback whose replies hang:
the run stops at once (not after the request deadline), exits 130, keeps every episode that
was answered, and ``--resume`` asks the server only for the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.chat_server import Answer, ChatServer
from tests.cli_process import FROSTGYM, ROOT

EPISODES = 24
CONCURRENCY = 4


def _hangs(prompt: str) -> bool:
    return zlib.crc32(prompt.encode()) % 3 == 0


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


@pytest.mark.slow
def test_ctrl_c_stops_a_run_with_hanging_requests_at_once_and_resume_sends_only_the_rest(tmp_path: Path) -> None:
    hanging = threading.Event()  # set: the hanging prompts hang; cleared: everything answers
    hung: list[dict[str, Any]] = []  # the requests hanging now

    def respond(body: dict[str, Any]) -> Answer | None:
        if hanging.is_set() and _hangs(body["messages"][-1]["content"]):
            hung.append(body)
            server.stop.wait(120)
        return None

    out = tmp_path / "card"
    hanging.set()
    with ChatServer(respond) as server:
        command = [*FROSTGYM, "eval", "--env", "frostgym/Arithmetic-v0", "--episodes", str(EPISODES)]
        command += [
            "--agent",
            f"openai:{server.base_url}#echo",
            "--concurrency",
            str(CONCURRENCY),
            "--fixed-concurrency",
            "--out",
            str(out),
        ]
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}  # a hang below dumps every thread's stack on SIGABRT
        run = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            episodes = out / "episodes.jsonl"
            deadline = time.monotonic() + 120
            # stalled: every slot holds a hanging request and every answered episode is on the card
            while True:
                assert run.poll() is None, run.communicate()[0].decode()
                assert time.monotonic() < deadline, "the run did not stall on its hanging requests"
                if len(hung) == CONCURRENCY and _lines(episodes) == len(server.bodies):
                    break
                time.sleep(0.1)
            answered = _lines(episodes)
            assert 0 < answered < EPISODES
            run.send_signal(signal.SIGINT)
            interrupted_at = time.monotonic()
            try:
                output = run.communicate(timeout=60)[0].decode()
            except subprocess.TimeoutExpired:
                run.send_signal(signal.SIGABRT)
                stacks = run.communicate(timeout=30)[0].decode()[-8000:]
                pytest.fail(f"no exit 60 s after SIGINT; its threads:\n{stacks}")
            took = time.monotonic() - interrupted_at
        finally:
            if run.poll() is None:
                run.kill()
        assert run.returncode == 130, output
        assert took < 20, took  # the target is 2 s; the requests' own deadline is 120 s
        assert "Traceback" not in output and "--resume" in output
        card = json.loads((out / "card.json").read_text())
        assert card["status"] == "interrupted"
        assert _lines(out / "episodes.jsonl") == answered  # every answered episode is on the card
        assert _lines(out / "drops.jsonl") == 0  # the unanswered are not filed: a resume plays them

        hanging.clear()
        asked_before = len(server.bodies)
        resumed = subprocess.run([*command, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert len(server.bodies) - asked_before == EPISODES - answered  # only the unanswered, once each
    card = json.loads((out / "card.json").read_text())
    assert card["status"] == "complete" and card["accounting"]["completed"] == EPISODES
