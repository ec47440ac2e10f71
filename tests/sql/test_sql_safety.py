"""The executor against untrusted SQL: nothing written, nothing attached, bounded time and rows."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from frostgym.sql.connections import shared_database
from frostgym.sql.databases import database_path
from frostgym.sql.executor import ExecutionLimits, SafeDatabase, format_result
from frostgym.sql.statements import leading_keyword, mask, orders_rows, statements


@pytest.fixture(scope="module")
def db() -> SafeDatabase:
    return shared_database("chinook")


@pytest.mark.parametrize(
    ("sql", "status"),
    [
        ("ATTACH DATABASE '{tmp}/a.db' AS a", "not_select"),
        ("VACUUM INTO '{tmp}/b.db'", "not_select"),
        ("PRAGMA query_only = 0", "not_select"),
        ("SELECT * FROM pragma_table_info('track')", "not_select"),
        ("WITH x AS (SELECT 1) INSERT INTO genre(name) SELECT 'x' FROM x", "not_select"),
        ("CREATE TEMP TABLE t AS SELECT 1", "not_select"),
        ("SELECT load_extension('{tmp}/x.so')", "error"),
        ("SELECT writefile('{tmp}/c.txt', 'x')", "error"),
        ("SELECT 1; SELECT 2", "error"),
        ("SELECT zeroblob(5000000)", "error"),
    ],
)
def test_escapes_are_refused_and_write_nothing(db: SafeDatabase, tmp_path: Path, sql: str, status: str) -> None:
    result = db.run(sql.format(tmp=tmp_path))
    assert result.status == status, result
    assert list(tmp_path.iterdir()) == []
    assert db.run("SELECT COUNT(*) FROM genre").rows == ((25,),)  # still intact and usable


def test_runaway_recursive_cte_stops_at_the_deadline() -> None:
    db = SafeDatabase(database_path("chinook"), ExecutionLimits(timeout_s=0.3))
    started = time.perf_counter()
    result = db.run("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT MAX(x) FROM c")
    elapsed = time.perf_counter() - started
    assert result.status == "timeout"
    assert 0.25 < elapsed < 1.5
    assert db.run("SELECT 1").ok  # the connection survives the interrupt


def test_row_budget_bounds_an_enormous_result(db: SafeDatabase) -> None:
    started = time.perf_counter()
    result = db.run("SELECT a.id, b.id FROM track a, track b", max_rows=100)
    assert result.status == "too_many_rows" and len(result.rows) == 100
    assert time.perf_counter() - started < 1.0
    assert "more than 100 rows" in format_result(result)


def test_database_file_is_untouched(db: SafeDatabase) -> None:
    path = database_path("chinook")
    before = path.stat().st_mtime_ns, path.read_bytes()
    for sql in ("DELETE FROM track", "UPDATE track SET name = 'x'", "DROP TABLE track", "VACUUM"):
        assert db.run(sql).status == "not_select"
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


def test_statement_shape() -> None:
    assert statements("SELECT ';' -- ; \n; ;") == ["SELECT ';' -- ;"]
    assert leading_keyword("/* x */ -- y\n with t as (select 1) select * from t") == "WITH"
    assert orders_rows("SELECT a FROM t ORDER BY a")
    assert not orders_rows("SELECT a FROM (SELECT a FROM t ORDER BY a)")
    assert not orders_rows("SELECT a, ROW_NUMBER() OVER (ORDER BY a) FROM t")
    assert not orders_rows("SELECT 'order by' FROM t -- order by")
    assert orders_rows("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1")
    assert len(mask("SELECT 'it''s'")) == len("SELECT 'it''s'")


def test_format_result_cuts_rows_and_characters(db: SafeDatabase) -> None:
    text = format_result(db.run("SELECT id, name FROM track ORDER BY id LIMIT 50"), max_rows=5, max_chars=10_000)
    assert text.count("\n") == 7 and "50 rows; showing the first 5" in text
    assert "output cut" in format_result(db.run("SELECT name FROM track"), max_rows=10_000, max_chars=300)
