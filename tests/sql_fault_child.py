"""Helpers for the SQL fault tests: a watcher that interrupts the main thread while it is
inside a given module (the SQL executor, the database builder), and child-process entry
points the tests run with ``python -m tests.sql_fault_child MODE ...``:

- ``eval ARGS...``: ``frostgym eval ARGS`` with the watcher sending one SIGINT while the
  main thread is inside the SQL executor;
- ``build NAME``: ``database_path(NAME)`` into an empty ``FROSTGYM_CACHE``, with one
  SIGINT while the build or the verification runs;
- ``temp``: hostile sorts and groupings on a locked-down connection while a thread
  watches ``$SQLITE_TMPDIR`` and this process's open files; prints a JSON report.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

EXECUTOR_FILE = str(Path(__file__).resolve().parents[1] / "frostgym" / "sql" / "executor.py")
DATABASES_FILE = str(Path(__file__).resolve().parents[1] / "frostgym" / "sql" / "databases.py")


def _innermost_frame_in(filename: str) -> FrameType | None:
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return frame
        frame = frame.f_back
    return None


class InterruptInside:
    """Send ``signum`` once to the main thread the first time it has stayed at one
    instruction of ``filename`` for at least ``dwell_s``: that is, while it waits in a
    C call made from there (a running SQLite statement), not while Python code runs.

    ``fired`` says whether the signal was sent. Leaving the block stops the watcher, so
    no signal arrives after it; put the block inside the ``try`` that expects it."""

    def __init__(self, filename: str = EXECUTOR_FILE, *, signum: int = signal.SIGINT, dwell_s: float = 0.0005):
        self.filename = filename
        self.signum = signum
        self.dwell_s = dwell_s
        self.fired = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="interrupt-inside", daemon=True)

    def _watch(self) -> None:
        seen: tuple[int, int] | None = None
        since = 0.0
        main = threading.main_thread().ident or 0
        while not self._stop.is_set():
            frame = _innermost_frame_in(self.filename)
            spot = None if frame is None else (id(frame), frame.f_lasti)
            now = time.monotonic()
            if spot is None or spot != seen:
                seen, since = spot, now
            elif now - since >= self.dwell_s:
                signal.pthread_kill(main, self.signum)
                self.fired.set()
                return
            time.sleep(0.0001)

    def __enter__(self) -> InterruptInside:
        self._thread.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()


def _eval(argv: list[str]) -> None:
    from frostgym.cli import main

    sys.argv = ["frostgym", "eval", *argv]
    watcher = InterruptInside(EXECUTOR_FILE, dwell_s=0.0003)
    # Start once the run is under way (some episodes recorded), so the signal lands mid-run.
    episodes = Path(argv[argv.index("--out") + 1]) / "episodes.jsonl"

    def start_when_running() -> None:
        while not episodes.exists() or episodes.read_bytes().count(b"\n") < 8:
            time.sleep(0.002)
        watcher.__enter__()

    threading.Thread(target=start_when_running, daemon=True).start()
    main()


def _build(name: str) -> None:
    from frostgym.sql.databases import database_path

    with InterruptInside(DATABASES_FILE, dwell_s=0.002) as watcher:
        try:
            database_path(name)
        except KeyboardInterrupt:
            print(json.dumps({"interrupted": True, "fired": watcher.fired.is_set()}))
            return
    print(json.dumps({"interrupted": False, "fired": watcher.fired.is_set()}))


HOSTILE = {
    "sort": "SELECT a.name, b.name FROM track a, track b ORDER BY a.name || b.name",
    "wide_sort": "SELECT printf('%.*c', 500000, 'x') || a.id || b.id AS x FROM track a, track b ORDER BY x",
    "blob_sort": "SELECT randomblob(400000) AS x FROM track a, track b ORDER BY x",
    "group_by": "SELECT COUNT(*) FROM (SELECT a.name || b.name AS k, COUNT(*) FROM track a, track b GROUP BY k)",
    "distinct": "SELECT COUNT(*) FROM (SELECT DISTINCT a.name || b.name || a.id FROM track a, track b)",
    "window": "SELECT COUNT(*) FROM (SELECT ROW_NUMBER() OVER (ORDER BY a.name || b.name) FROM track a, track b)",
    "materialized": (
        "WITH t AS MATERIALIZED (SELECT printf('%.*c', 500000, 'x') || a.id || b.id AS x FROM track a, track b) "
        "SELECT COUNT(*) FROM t"
    ),
}


def _vm_hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _temp(meter: str | None) -> None:
    """Run every hostile query with default limits (but the given memory meter) while a
    thread records every file this process opens under ``$SQLITE_TMPDIR`` (SQLite unlinks
    its temp files at once, so the directory alone would show nothing)."""
    from frostgym.sql.databases import database_path
    from frostgym.sql.executor import ExecutionLimits, SafeDatabase

    tmp = os.environ["SQLITE_TMPDIR"]
    limits = ExecutionLimits() if meter is None else ExecutionLimits(memory_meter=meter)  # type: ignore[arg-type]
    db = SafeDatabase(database_path("chinook"), limits)
    assert db.run("SELECT COUNT(*) FROM track").ok  # warm: page cache and schema loaded
    seen: dict[str, int] = {}
    listed: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            listed.update(os.listdir(tmp))
            for fd in os.listdir("/proc/self/fd"):
                try:
                    target = os.readlink(f"/proc/self/fd/{fd}")
                    size = os.stat(f"/proc/self/fd/{fd}").st_size
                except OSError:
                    continue
                if target.startswith(tmp):
                    seen[target] = max(seen.get(target, 0), size)
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    report: dict[str, Any] = {"queries": {}, "hwm_before": _vm_hwm_bytes()}
    for name, sql in HOSTILE.items():
        started = time.perf_counter()
        result = db.run(sql)
        report["queries"][name] = {
            "status": result.status,
            "error": result.error,
            "seconds": time.perf_counter() - started,
            "hwm": _vm_hwm_bytes(),
        }
    stop.set()
    watcher.join()
    report.update(
        temp_files=len(seen),
        temp_bytes=max(seen.values(), default=0),
        listed=sorted(listed),
        usable=db.run("SELECT COUNT(*) FROM genre").rows == ((25,),),
        sqlite_version=sqlite3.sqlite_version,
    )
    print(json.dumps(report))


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "eval":
        _eval(rest)
    elif mode == "build":
        _build(rest[0])
    elif mode == "temp":
        _temp(rest[0] if rest else None)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
