"""SQL under outside faults: a signal during a query, and queries that need a lot of
temporary storage.

A signal's Python handler runs on the main thread whenever the bytecode loop gets
control, which inside a running SQLite statement means inside the progress handler or
the authorizer, and ``sqlite3`` discards any exception a callback raises: Ctrl-C became
a ``timeout`` grade (or a skipped template draw, so a train task id changed its
question). These tests deliver real signals while real queries run and require the
exception to come out. The temp-storage tests watch the files a child process opens
while hostile sorts run in it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.envs.sql import sql_source
from frostgym.envs.sql.templates import _draft
from frostgym.sql.connections import shared_database
from frostgym.sql.databases import database_path
from frostgym.sql.executor import ExecutionLimits, SafeDatabase
from tests.conftest import make_env
from tests.sql_fault_child import DATABASES_FILE, EXECUTOR_FILE, HOSTILE, InterruptInside

ROOT = Path(__file__).resolve().parents[2]
RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT MAX(x) FROM c"

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signal handlers run on the main thread only"
)


@pytest.fixture(autouse=True)
def _python_sigint_handler() -> Iterator[None]:
    """Ctrl-C as a plain Python process has it, here and in the children these tests start:
    a test that ran earlier in the same worker may have left SIGINT ignored or replaced (a
    child inherits an ignored SIGINT, and Python then installs no handler of its own)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _handler(signum: int, handler: Callable[[int, FrameType | None], Any]) -> Iterator[None]:
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)


# -- item 2: a signal during a query interrupts; it is never a grade -------------------------
def test_sigint_during_a_query_raises_keyboard_interrupt_not_timeout() -> None:
    db = SafeDatabase(database_path("chinook"), ExecutionLimits(timeout_s=5.0))
    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt), InterruptInside(EXECUTOR_FILE, dwell_s=0.1) as watcher:
        db.run(RUNAWAY)  # before the fix: QueryResult(status='timeout')
    assert watcher.fired.is_set()
    assert time.perf_counter() - started < 3.0  # not held until the 5 s deadline
    # The connection is usable at once, and the next query gets its own full deadline.
    assert db.run("SELECT COUNT(*) FROM genre").rows == ((25,),)
    short = SafeDatabase(database_path("chinook"), ExecutionLimits(timeout_s=0.3))
    assert short.run(RUNAWAY).status == "timeout"
    assert short.run("SELECT 1").ok


def test_a_signal_handler_that_exits_is_not_swallowed_either() -> None:
    def exit_on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    db = SafeDatabase(database_path("chinook"), ExecutionLimits(timeout_s=5.0))
    with (
        _handler(signal.SIGTERM, exit_on_term),
        pytest.raises(SystemExit) as exited,
        InterruptInside(EXECUTOR_FILE, signum=signal.SIGTERM, dwell_s=0.1),
    ):
        db.run(RUNAWAY)
    assert exited.value.code == 128 + signal.SIGTERM


def test_sigint_during_exploration_and_grading_interrupts_the_step() -> None:
    env = make_env("frostgym/SQL-v0", max_turns=4)
    env.reset(seed=0)
    with pytest.raises(KeyboardInterrupt), InterruptInside(EXECUTOR_FILE, dwell_s=0.05):
        env.step(f"<sql>{RUNAWAY}</sql>")  # before the fix: "Error (timeout): query exceeded 1 s"
    with pytest.raises(KeyboardInterrupt), InterruptInside(EXECUTOR_FILE, dwell_s=0.05):
        env.step(f"<answer>{RUNAWAY}</answer>")  # before the fix: graded "timeout"
    # The shared connection is not left cancelled: the oracle's answer still matches.
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(env.oracle_action())
    assert terminated and reward == 1.0, info["grade"]


def test_a_train_task_is_the_same_after_an_interrupted_generation() -> None:
    """Templates draw values with queries; a query cut short must raise, never make the
    source move on to the next draw (a different question under the same task id)."""
    source = sql_source()
    interrupted = tried = 0
    for i in range(7_000, 7_400):  # until enough signals landed in a query (a template's is short)
        expected = source.task("train", i)
        tried += 1
        try:
            with InterruptInside(EXECUTOR_FILE, dwell_s=0.0002) as watcher:
                got = source.task("train", i)
            assert not watcher.fired.is_set(), "a signal was sent during generation and nothing was raised"
        except KeyboardInterrupt:
            interrupted += 1
            got = source.task("train", i)
        assert got == expected, (i, got.prompt, expected.prompt)
        if interrupted >= 8:
            break
    assert interrupted >= 8, f"only {interrupted} of {tried} generations were interrupted"


def test_a_template_query_that_fails_raises_instead_of_skipping_the_draw() -> None:
    """Only an empty answer rejects a draw; a query that did not run (error, timeout,
    interrupt) must not, or the task under that id would depend on the machine's load."""
    with pytest.raises(RuntimeError, match="no_such_column"):
        _draft("chinook", "q?", "SELECT no_such_column FROM track", "easy", ())
    with pytest.raises(ValueError, match="empty"):
        _draft("chinook", "q?", "SELECT name FROM track WHERE id < 0", "easy", ())


@pytest.mark.slow
def test_sigint_mid_eval_leaves_an_interrupted_card_that_resume_finishes(tmp_path: Path) -> None:
    out = tmp_path / "card"
    args = ["--env", "frostgym/SQL-v0", "--agent", "oracle", "--episodes", "60", "--seed", "3"]
    args += ["--batch-size", "4", "--out", str(out)]
    child = subprocess.run(
        [sys.executable, "-m", "tests.sql_fault_child", "eval", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    card, episodes, drops = load_card(out)
    assert child.returncode == 130, (card["status"], child.stdout[-1500:], child.stderr[-1500:])
    assert card["status"] == "interrupted"
    assert drops == [], [d.drop.error for d in drops]
    assert all(e.reward == 1.0 for e in episodes), [e.grade for e in episodes if e.reward != 1.0]
    assert len(episodes) < 60
    result = CliRunner().invoke(app, ["eval", *args, "--resume"])
    assert result.exit_code == 0, result.output
    card, episodes, drops = load_card(out)
    assert card["status"] == "complete" and drops == [] and len(episodes) == 60
    assert all(e.reward == 1.0 and e.grade is not None and e.grade["label"] is None for e in episodes)


@pytest.mark.slow
def test_an_interrupted_database_build_leaves_nothing_half_done(tmp_path: Path) -> None:
    env = {**os.environ, "FROSTGYM_CACHE": str(tmp_path)}
    child = subprocess.run(
        [sys.executable, "-m", "tests.sql_fault_child", "build", "chinook"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert json.loads(child.stdout.splitlines()[-1]) == {"interrupted": True, "fired": True}
    folder = tmp_path / "sql"
    assert not folder.exists() or [p.name for p in folder.iterdir() if p.name.startswith(".")] == []
    probe = "from frostgym.sql.databases import database_path; print(database_path('chinook'))"
    again = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert Path(again.stdout.strip()).parent == folder
    assert DATABASES_FILE.endswith("databases.py")


# -- item 9: temporary storage stays in memory, within a bound ---------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("meter", [None, "process_rss"])
def test_hostile_sorts_write_no_temp_files_and_stay_within_the_memory_bound(tmp_path: Path, meter: str | None) -> None:
    """SQLite reads ``SQLITE_TMPDIR``/``TMPDIR`` once per process, hence the child."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "SQLITE_TMPDIR": str(tmp), "TMPDIR": str(tmp)}
    command = [sys.executable, "-m", "tests.sql_fault_child", "temp", *([meter] if meter else [])]
    child = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    report = json.loads(child.stdout.splitlines()[-1])
    assert report["temp_files"] == 0 and report["listed"] == [], report
    assert list(tmp.iterdir()) == []
    limits = ExecutionLimits()
    bound = limits.max_memory_bytes + (64 << 20)  # the bound, a check interval's rows, allocator overhead
    hwm = report["hwm_before"]
    for name in HOSTILE:
        outcome = report["queries"][name]
        assert outcome["status"] in ("error", "timeout"), (name, outcome)
        if outcome["status"] == "error":
            assert "memory" in outcome["error"], (name, outcome)
        assert outcome["seconds"] < limits.timeout_s + 2.0, (name, outcome)
        assert outcome["hwm"] - hwm < bound, (name, outcome["hwm"] - hwm, bound)
    memory_errors = [n for n in HOSTILE if report["queries"][n]["status"] == "error"]
    assert {"wide_sort", "blob_sort", "materialized"} <= set(memory_errors), report["queries"]
    assert report["usable"]


def test_ordinary_queries_are_far_below_the_memory_bound() -> None:
    """The bound leaves every gold query (and a large legitimate one) untouched."""
    db = shared_database("chinook")
    assert db.run("SELECT length(group_concat(name)) FROM track").ok
    result = db.run("SELECT a.id FROM track a JOIN invoice_line l ON l.track_id = a.id ORDER BY a.name, l.id")
    assert result.ok and len(result.rows) == 2240
