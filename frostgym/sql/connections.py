"""One locked-down connection per fixture database per process, shared by the task
generator, the envs and the grader (each query holds the connection's lock).

The schema prompt is cached for the process, so its queries run with the trusted
deadline and raise if they fail: a prompt must never freeze an error message (a loaded
machine's timeout) into every later observation."""

from __future__ import annotations

from functools import cache

from frostgym.sql.databases import DATABASES, database_path
from frostgym.sql.executor import TRUSTED_TIMEOUT_S, QueryResult, SafeDatabase, format_result


@cache
def shared_database(name: str) -> SafeDatabase:
    return SafeDatabase(database_path(name))


@cache
def schema_prompt(name: str, sample_rows: int = 3) -> str:
    """What the agent is told about a database: its description, every CREATE TABLE,
    and the first rows of each table."""
    tables = _trusted(name, "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
    parts = [f"Database: {name}. {DATABASES[name].description}", "", "Schema:"]
    parts += [f"{sql};" for _, sql in tables.rows]
    parts += ["", f"First {sample_rows} rows of each table:"]
    for table, _ in tables.rows:
        sample = _trusted(name, f'SELECT * FROM "{table}" LIMIT {sample_rows}')
        parts += [f"-- {table}", format_result(sample, max_rows=sample_rows, max_chars=1_500)]
    return "\n".join(parts)


def _trusted(name: str, sql: str) -> QueryResult:
    result = shared_database(name).run(sql, timeout_s=TRUSTED_TIMEOUT_S)
    if not result.ok:
        raise RuntimeError(f"schema query failed on {name} ({result.status}: {result.error}): {sql}")
    return result
