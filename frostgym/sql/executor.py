"""Running untrusted SQL against a fixture database, safely and with bounded cost.

``mode=ro`` alone is not enough: ``ATTACH`` and ``VACUUM INTO`` still create files,
and ``PRAGMA query_only=0`` undoes ``query_only``. So every connection also has:
- an authorizer allow-list: reading tables, SELECT, recursive CTEs and functions,
  except the functions that touch files or extensions. Everything else is denied;
- ``SQLITE_LIMIT_ATTACHED = 0`` (no ATTACH, no VACUUM INTO), plus limits on value
  length and SQL length;
- a progress handler that interrupts the query at a monotonic deadline (it is
  checked every ``progress_ops`` VM instructions, so a runaway recursive CTE stops
  within about 1 ms of the deadline);
- one statement per call, and at most ``max_rows + 1`` rows fetched.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from frostgym.sql.statements import leading_keyword, statements

QueryStatus = Literal["ok", "error", "timeout", "not_select", "too_many_rows", "empty"]

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
    progress_ops: int = 1_000


@dataclass(frozen=True)
class QueryResult:
    status: QueryStatus
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class SafeDatabase:
    """A read-only, locked-down connection to one database file. Not shared between
    threads: each query holds a lock for its whole run."""

    def __init__(self, path: Path, limits: ExecutionLimits | None = None) -> None:
        self.path = path
        self.limits = limits or ExecutionLimits()
        self._deadline = 0.0
        self._denied: str | None = None
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        self._conn.execute("PRAGMA query_only = 1")  # before the authorizer, which denies PRAGMA
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.limits.max_value_bytes)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, self.limits.max_sql_chars)
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._past_deadline, self.limits.progress_ops)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action in _ALLOWED_ACTIONS:
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
                self._denied = f"function {arg2}()"
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        self._denied = f"action {action}"
        return sqlite3.SQLITE_DENY

    def _past_deadline(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def run(self, sql: str, *, max_rows: int | None = None) -> QueryResult:
        """Execute one read-only statement; every failure is a status, never an exception."""
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
        with self._lock:
            self._denied = None
            self._deadline = time.monotonic() + self.limits.timeout_s
            cursor = self._conn.cursor()
            try:
                cursor.execute(parts[0])
                rows = cursor.fetchmany(limit + 1)
                columns = tuple(d[0] for d in cursor.description or ())
            except sqlite3.Error as error:
                return self._failure(error)
            except (ValueError, OverflowError, MemoryError) as error:
                return QueryResult("error", error=f"{type(error).__name__}: {error}")
            finally:
                cursor.close()
        if len(rows) > limit:
            return QueryResult("too_many_rows", columns, _tuples(rows[:limit]), f"more than {limit} rows")
        return QueryResult("ok", columns, _tuples(rows))

    def _failure(self, error: sqlite3.Error) -> QueryResult:
        message = str(error)
        if message == "interrupted":
            return QueryResult("timeout", error=f"query exceeded {self.limits.timeout_s:g} s")
        if self._denied is not None:
            status: QueryStatus = "error" if self._denied.startswith("function") else "not_select"
            return QueryResult(status, error=f"not allowed: {self._denied}")
        return QueryResult("error", error=message)

    def close(self) -> None:
        self._conn.close()


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
