"""Append-only JSON Lines files and atomic JSON files: the card's storage layer.

Crash safety rests on three rules. Lines are only ever appended, each batch in one
``write`` of whole lines, so a ``kill -9`` can at worst leave one partial line at the
end, which ``read_jsonl(repair=True)`` cuts off (that episode is then re-run). Data
reaches the disk with ``fsync`` at most ``fsync_seconds`` after it was written, and
always at close, so a power cut loses at most that window, never a file. ``card.json``
is replaced atomically (temp file, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import gc
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: bulk JSON work allocates only acyclic data, and
    collections triggered by 10k records' worth of dicts cost several times the work."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class CardCorruptError(RuntimeError):
    """A card file does not parse or does not match its manifest."""


def _fallback(value: Any) -> Any:
    """What orjson cannot encode natively (numpy scalars, bytes, sets) is kept readable."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def dumps_line(obj: Any) -> bytes:
    """One JSON line; dataclasses serialize as their fields."""
    return orjson.dumps(obj, default=_fallback, option=orjson.OPT_APPEND_NEWLINE)


class JsonlAppender:
    """Appends records to a JSON Lines file in batches (see the module docstring)."""

    def __init__(self, path: Path, fsync_seconds: float = 1.0) -> None:
        self.path = path
        self.fsync_seconds = fsync_seconds
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: list[bytes] = []
        self._last_fsync = time.monotonic()
        self._unsynced = False

    def append(self, obj: Any) -> None:
        self._pending.append(dumps_line(obj))

    def commit(self) -> None:
        if self._pending:
            data = memoryview(b"".join(self._pending))
            self._pending.clear()
            while data:
                written = os.write(self._fd, data)
                data = data[written:]
            self._unsynced = True
        if self._unsynced and time.monotonic() - self._last_fsync >= self.fsync_seconds:
            self.sync()

    def sync(self) -> None:
        os.fsync(self._fd)
        self._unsynced = False
        self._last_fsync = time.monotonic()

    def close(self) -> None:
        self.commit()
        self.sync()
        os.close(self._fd)


@dataclass(frozen=True)
class JsonlContents:
    records: list[dict[str, Any]]
    sha256: str
    bytes: int
    repaired_bytes: int  # bytes of a partial last line that repair cut off

    def manifest(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "bytes": self.bytes, "lines": len(self.records)}


def read_jsonl(path: Path, *, repair: bool = False) -> JsonlContents:
    """Every record in a JSON Lines file. A partial last line (no newline: a crash
    mid-write) is an error unless ``repair``, which truncates the file before it."""
    data = path.read_bytes() if path.exists() else b""
    end = data.rfind(b"\n") + 1
    repaired = len(data) - end
    if repaired:
        if not repair:
            raise CardCorruptError(f"{path}: {repaired} bytes after the last complete line (interrupted write?)")
        with path.open("r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
        data = data[:end]
    records = []
    with gc_paused():
        for number, line in enumerate(data.splitlines(), start=1):
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError as error:
                raise CardCorruptError(f"{path}:{number}: not valid JSON ({error})") from error
    return JsonlContents(records, hashlib.sha256(data).hexdigest(), len(data), repaired)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Replace ``path`` so that readers see the old file or the new one, never a mix."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(orjson.dumps(obj, default=_fallback, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError as error:
        raise CardCorruptError(f"{path} is missing: not a card directory?") from error
    except orjson.JSONDecodeError as error:
        raise CardCorruptError(f"{path}: not valid JSON ({error})") from error
