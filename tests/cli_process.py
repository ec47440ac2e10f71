"""The ``frostgym`` command as a user runs it, in a process of its own: for tests that check
what it prints and how it exits, and what a run does when its backend dies under it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FROSTGYM = [sys.executable, "-c", "from frostgym.cli import main; main()"]


def run_cli(*args: str, timeout: float = 120, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``frostgym ARGS`` through its console entry point, stdout and stderr captured;
    ``env`` replaces the environment (default: this one)."""
    return subprocess.run(
        [*FROSTGYM, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ if env is None else env),
    )


def kill_backend_mid_run(
    command: Sequence[str],
    card: Path,
    kill: Callable[[], None],
    *,
    env: Mapping[str, str] | None = None,
    started_bytes: int = 100_000,
    timeout: float = 240,
) -> tuple[int, str, float]:
    """Start ``command`` (a ``frostgym eval`` writing ``card``), call ``kill`` once its
    episodes file holds ``started_bytes``, and return its exit code, its output (stdout and
    stderr together) and the seconds it ran on after the kill."""
    evaluating = subprocess.Popen(
        list(command),
        cwd=ROOT,
        env=None if env is None else dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        episodes = card / "episodes.jsonl"
        deadline = time.monotonic() + 120
        while not (episodes.exists() and episodes.stat().st_size > started_bytes):
            assert evaluating.poll() is None, evaluating.communicate()[0].decode()
            assert time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.05)
        kill()
        killed = time.monotonic()
        output = evaluating.communicate(timeout=timeout)[0].decode()
        return evaluating.returncode, output, time.monotonic() - killed
    finally:
        if evaluating.poll() is None:
            evaluating.kill()
