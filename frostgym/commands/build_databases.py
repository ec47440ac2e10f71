"""``frostgym build-databases``: rebuild the SQL fixture databases and compare them with the lock."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from frostgym.commands.common import console


def build_databases_cmd(
    out: Annotated[Path, typer.Option(help="Directory to build the SQL fixture databases into.")],
) -> None:
    """Rebuild every SQL fixture database from its package and compare with the lock:
    the content hash always, the file hash byte for byte where the SQLite version matches."""
    import sqlite3

    from frostgym.sql.databases import DATABASES, build_database, content_sha256, file_sha256, read_db_lock

    lock = read_db_lock()
    table = Table("database", "content sha256", "file sha256", "verdict")
    failed = False
    for name, spec in DATABASES.items():
        path = build_database(spec, out / f"{name}.sqlite")
        content, file = content_sha256(path), file_sha256(path)
        expected = lock[name]
        same_sqlite = expected["sqlite_version"] == sqlite3.sqlite_version
        ok = content == expected["content_sha256"] and (file == expected["file_sha256"] or not same_sqlite)
        verdict = "identical" if ok and same_sqlite else "same content" if ok else "MISMATCH"
        if ok and not same_sqlite:
            verdict += (
                f" (file bytes not compared: SQLite {sqlite3.sqlite_version}, locked with {expected['sqlite_version']})"
            )
        failed |= not ok
        table.add_row(name, content[:16], file[:16], verdict)
    console.print(table)
    if failed:
        raise typer.Exit(1)
