"""Running untrusted SQL against a fixture database, safely and with bounded cost.

``mode=ro`` alone is not enough: ``ATTACH`` and ``VACUUM INTO`` still create files,
and ``PRAGMA query_only=0`` undoes ``query_only``. So every connection also has:
- an authorizer allow-list: reading tables, SELECT, recursive CTEs and functions,
  except the functions that touch files or extensions. Everything else is denied;
- ``SQLITE_LIMIT_ATTACHED = 0`` (no ATTACH, no VACUUM INTO), plus limits on value
  length and SQL length;
- a progress handler that interrupts the query at a monotonic deadline (it is
  checked every ``progress_ops`` VM instructions, so a runaway recursive CTE stops
  just past the deadline);
- one statement per call, and at most ``max_rows + 1`` rows fetched;
- temporary storage in memory (``PRAGMA temp_store = MEMORY``), with a bound.

Temporary storage. Sorts, DISTINCT, GROUP BY, window functions and materialized
subqueries build temporary b-trees. By default SQLite spills them to files in the
system temp directory (unlinked at once, so invisible there): one hostile sort can
write hundreds of MiB within its deadline. In memory there is no file, but also no bound
of SQLite's own: ``cache_size`` limits neither the sorter nor in-memory b-trees (a GROUP
BY over a cross join grows far past a small ``cache_size``), and
``hard_heap_limit`` is process-wide, so one query would starve every other connection
in the process. So the progress handler also stops a query whose memory grew by more
than ``max_memory_bytes`` since it started (status ``error``). It reads SQLite's own
heap counter, ``sqlite3_memory_used`` of the library the ``sqlite3`` module runs on;
where that library's symbols are hidden (python-build-standalone, as uv installs it,
links SQLite into libpython), the process's resident size, at most every millisecond.
A check comes every ``progress_ops`` (250) instructions, and a row of a hostile sort
takes several instructions and at most one value of ``max_value_bytes``, so a query
stops a few rows past the bound: on the hostile sorts, groupings and materialized
subqueries of ``tests/sql/test_sql_faults.py``, SQLite's heap and the process's resident
size both peak modestly above ``max_memory_bytes`` (after the query the freed heap is
handed back with ``malloc_trim``). Only where neither counter can be read is the
process-wide ``hard_heap_limit`` set, as a backstop (8 x ``max_memory_bytes``).

Signals. A Python signal handler runs on the main thread when the bytecode loop next
gets control. During a statement that is inside the progress handler or the
authorizer, and ``sqlite3`` discards what a callback raises: the statement just
stops, so Ctrl-C would turn into a ``timeout``. A try/except inside the callback does
not help, since the handler runs at the callback's first instruction, before any
``try``. So a call made on the main thread runs its statement on a worker thread (one
per process) and waits for it: a signal handler's exception (``KeyboardInterrupt``,
``SystemExit``, ...) comes out of that wait, cancels the statement (its next progress
check stops it) and propagates. Callbacks on other threads never run signal handlers.
"""

from __future__ import annotations

import ctypes
import os
import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal

from frostgym.sql.statements import leading_keyword, statements

QueryStatus = Literal["ok", "error", "timeout", "not_select", "too_many_rows", "empty"]
#: How a query's memory is measured: ``auto`` takes SQLite's heap counter where it can be
#: read, else the process's resident size (``process_rss``, Linux).
MemoryMeter = Literal["auto", "sqlite_heap", "process_rss"]
#: The deadline of queries we wrote (gold answers, template draws, the schema prompt):
#: long, so a loaded machine never turns them into failures; only a hang reaches it.
TRUSTED_TIMEOUT_S = 30.0

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33})  # 33: RECURSIVE
_DENIED_FUNCTIONS = frozenset(
    {"load_extension", "readfile", "writefile", "fts3_tokenizer", "edit", "zipfile", "sqlite_dbpage", "sqlar_compress"}
)
_READ_KEYWORDS = frozenset({"SELECT", "WITH", "VALUES"})


@dataclass(frozen=True)
class ExecutionLimits:
    timeout_s: float = 1.0
    max_rows: int = 10_000
    max_value_bytes: int = 1_000_000
    max_sql_chars: int = 20_000
    progress_ops: int = 250
    max_memory_bytes: int = 64 << 20  # growth during one query; gold queries need under 2 MiB
    memory_meter: MemoryMeter = "auto"


@dataclass(frozen=True)
class QueryResult:
    status: QueryStatus
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class _Meter:
    name: MemoryMeter
    read: Callable[[], int]
    interval_s: float  # the least time between two reads (reading /proc costs microseconds)


def _sqlite_heap() -> Callable[[], int] | None:
    """``sqlite3_memory_used`` of the SQLite the ``sqlite3`` module runs on, or None where
    its symbols are not reachable. A probe connection must move the counter, which also
    rules out a different copy of SQLite and a build without memory statistics."""
    path = getattr(sys.modules.get("_sqlite3"), "__file__", None)
    if not path:
        return None
    try:
        function = ctypes.CDLL(path).sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_int64
    function.argtypes = []
    before = int(function())
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE TABLE t(x)")
        moved = int(function()) != before
    finally:
        probe.close()
    return (lambda: int(function())) if moved else None


def _process_rss() -> Callable[[], int] | None:
    if not os.path.exists("/proc/self/statm"):
        return None
    page = os.sysconf("SC_PAGE_SIZE")

    def read() -> int:
        try:
            with open("/proc/self/statm", "rb") as statm:
                return int(statm.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            return 0  # unreadable: measure nothing rather than fail the query

    return read


@cache
def memory_meter(kind: MemoryMeter = "auto") -> _Meter | None:
    """The meter a connection checks its queries' memory with (None: none available)."""
    if kind in ("auto", "sqlite_heap"):
        heap = _sqlite_heap()
        if heap is not None:
            return _Meter("sqlite_heap", heap, 0.0)
        if kind == "sqlite_heap":
            raise ValueError("SQLite's heap counter cannot be read from this Python's sqlite3 module")
    rss = _process_rss()
    if rss is not None:
        return _Meter("process_rss", rss, 0.001)
    if kind == "process_rss":
        raise ValueError("the process's resident size cannot be read here (no /proc/self/statm)")
    return None


@cache
def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``: give freed heap back to the system (None elsewhere)."""
    try:
        function = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return partial(function, 0)


@dataclass
class _Query:
    """One statement's state, read by the callbacks on whichever thread runs it."""

    timeout_s: float
    deadline: float = float("inf")
    memory_base: int = 0
    memory_peak: int = 0
    next_sample: float = 0.0
    stopped: Literal["deadline", "memory", "cancelled"] | None = None
    denied: str | None = None
    cancelled: bool = False  # set by a waiting main thread that a signal interrupted


class SafeDatabase:
    """A read-only, locked-down connection to one database file. Shared by threads: each
    query holds a lock for its whole run."""

    def __init__(self, path: Path, limits: ExecutionLimits | None = None) -> None:
        self.path = path
        self.limits = limits or ExecutionLimits()
        self.meter = memory_meter(self.limits.memory_meter)
        self._query: _Query | None = None
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        # Pragmas go first: the authorizer denies PRAGMA to everything after it.
        self._conn.execute("PRAGMA query_only = 1")
        self._conn.execute("PRAGMA temp_store = MEMORY")  # temporary b-trees and sorts never become files
        if self.meter is None:  # no per-query measure: SQLite's process-wide cap, as a backstop
            backstop = 8 * self.limits.max_memory_bytes
            row = self._conn.execute("PRAGMA hard_heap_limit").fetchone()  # None before SQLite 3.31
            current = int(row[0]) if row else 0
            if current == 0 or current > backstop:
                self._conn.execute(f"PRAGMA hard_heap_limit = {backstop}")
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.limits.max_value_bytes)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, self.limits.max_sql_chars)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_WORKER_THREADS, 0)  # sorts stay on the measured thread
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._progress, self.limits.progress_ops)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
                self._deny(f"function {arg2}()")
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        self._deny(f"action {action}")
        return sqlite3.SQLITE_DENY

    def _deny(self, what: str) -> None:
        if self._query is not None:
            self._query.denied = what

    def _progress(self) -> int:
        query = self._query
        if query is None:
            return 0
        if query.cancelled:
            query.stopped = "cancelled"
            return 1
        now = time.monotonic()
        if now > query.deadline:
            query.stopped = "deadline"
            return 1
        meter = self.meter
        if meter is not None and now >= query.next_sample:
            query.next_sample = now + meter.interval_s
            query.memory_peak = max(query.memory_peak, meter.read())
            if query.memory_peak - query.memory_base > self.limits.max_memory_bytes:
                query.stopped = "memory"
                return 1
        return 0

    def run(self, sql: str, *, max_rows: int | None = None, timeout_s: float | None = None) -> QueryResult:
        """Execute one read-only statement; every failure is a status, never an exception.
        ``timeout_s`` overrides the limit (``TRUSTED_TIMEOUT_S`` for queries we wrote).

        A signal handler's exception is the one thing that does come out: on the main
        thread the statement runs on a worker thread, and the wait for it raises."""
        if not isinstance(sql, str) or not sql.strip():
            return QueryResult("empty", error="no query")
        if len(sql) > self.limits.max_sql_chars:
            return QueryResult("error", error=f"query longer than {self.limits.max_sql_chars} characters")
        parts = statements(sql)
        if not parts:
            return QueryResult("empty", error="no query")
        if len(parts) > 1:
            return QueryResult("error", error=f"only one statement per query ({len(parts)} given)")
        if leading_keyword(parts[0]) not in _READ_KEYWORDS:
            return QueryResult("not_select", error="only SELECT (or WITH ... SELECT) queries may run")
        limit = self.limits.max_rows if max_rows is None else max_rows
        query = _Query(self.limits.timeout_s if timeout_s is None else timeout_s)
        work = partial(self._execute, parts[0], limit, query)
        if threading.current_thread() is threading.main_thread():
            return _off_main_thread(work, query)
        return work()

    def _execute(self, sql: str, limit: int, query: _Query) -> QueryResult:
        with self._lock:
            if query.cancelled:  # its caller was interrupted while it waited for the lock
                return QueryResult("timeout", error="cancelled before it started")
            if self.meter is not None:
                query.memory_base = query.memory_peak = self.meter.read()
            query.deadline = time.monotonic() + query.timeout_s
            self._query = query
            cursor = self._conn.cursor()
            try:
                cursor.execute(sql)
                rows = cursor.fetchmany(limit + 1)
                columns = tuple(d[0] for d in cursor.description or ())
            except sqlite3.Error as error:
                return self._failure(error, query)
            except (ValueError, OverflowError, MemoryError) as error:
                return QueryResult("error", error=f"{type(error).__name__}: {error}")
            finally:
                cursor.close()
                self._query = None
                self._give_back(query)
        if len(rows) > limit:
            return QueryResult("too_many_rows", columns, _tuples(rows[:limit]), f"more than {limit} rows")
        return QueryResult("ok", columns, _tuples(rows))

    def _give_back(self, query: _Query) -> None:
        """After a query that grew by more than a quarter of the bound, hand the freed
        memory back: glibc keeps it otherwise, and each hostile query's growth comes on top
        of the last, so the process's peak climbs with every stopped query."""
        trim = _malloc_trim()
        if trim is not None and query.memory_peak - query.memory_base > self.limits.max_memory_bytes // 4:
            trim()

    def _failure(self, error: sqlite3.Error, query: _Query) -> QueryResult:
        message = str(error)
        if message == "interrupted":
            if query.stopped == "memory":
                mib = self.limits.max_memory_bytes / (1 << 20)
                return QueryResult("error", error=f"query needed more than {mib:g} MiB of memory")
            if query.stopped in ("deadline", "cancelled"):
                return QueryResult("timeout", error=f"query exceeded {query.timeout_s:g} s")
        if query.denied is not None:
            status: QueryStatus = "error" if query.denied.startswith("function") else "not_select"
            return QueryResult(status, error=f"not allowed: {query.denied}")
        return QueryResult("error", error=message)

    def close(self) -> None:
        self._conn.close()


_Job = tuple[Callable[[], QueryResult], list[QueryResult | BaseException], threading.Event]
_worker: tuple[int, queue.SimpleQueue[_Job]] | None = None  # (pid, its jobs); only the main thread offloads


def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
    while True:
        work, outcome, done = jobs.get()
        try:
            outcome.append(work())
        except BaseException as error:  # handed to the waiting thread, which raises it
            outcome.append(error)
        finally:
            done.set()


def _off_main_thread(work: Callable[[], QueryResult], query: _Query) -> QueryResult:
    """``work()`` on this process's SQL worker thread while the main thread waits: a
    signal handler's exception comes out of the wait instead of being swallowed inside a
    SQLite callback, and marks the query cancelled, so that its statement stops at the
    next progress check (or never starts). One long-lived thread (a new one after a fork),
    because handing a query to it costs a fraction of starting a thread per query."""
    global _worker
    if _worker is None or _worker[0] != os.getpid():
        jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(jobs,), name="frostgym-sql", daemon=True).start()
        _worker = (os.getpid(), jobs)
    outcome: list[QueryResult | BaseException] = []
    done = threading.Event()
    try:
        _worker[1].put((work, outcome, done))
        done.wait()
    except BaseException:
        query.cancelled = True
        raise
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _tuples(rows: Sequence[Any]) -> tuple[tuple[Any, ...], ...]:
    return tuple(tuple(r) for r in rows)


def format_result(result: QueryResult, *, max_rows: int = 20, max_chars: int = 2_000) -> str:
    """The result as a compact text table for the agent, with a note on what was cut."""
    if not result.ok and result.status != "too_many_rows":
        return f"Error ({result.status}): {result.error}"
    header = " | ".join(result.columns)
    lines = [header, "-" * min(len(header), 80)]
    for row in result.rows[:max_rows]:
        lines.append(" | ".join("NULL" if v is None else repr(v) if isinstance(v, bytes) else str(v) for v in row))
    text = "\n".join(lines)
    notes = []
    shown = min(len(result.rows), max_rows)
    if result.status == "too_many_rows":
        notes.append(f"{result.error}; showing the first {shown}")
    elif len(result.rows) > max_rows:
        notes.append(f"{len(result.rows)} rows; showing the first {shown}")
    else:
        notes.append(f"{len(result.rows)} row{'s' if len(result.rows) != 1 else ''}")
    if len(text) > max_chars:
        text = text[:max_chars]
        notes.append(f"output cut at {max_chars} characters")
    return f"{text}\n({'; '.join(notes)})"
