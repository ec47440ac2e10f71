"""Append-only JSON Lines files and atomic JSON files: the card's storage layer.

Crash safety rests on three rules. Lines are only ever appended, each batch in one
``write`` of whole lines, so a ``kill -9`` can at worst leave one partial line at the
end, which ``read_jsonl(torn="repair")`` cuts off (that episode is then re-run). Data
reaches the disk with ``fsync`` at most ``fsync_seconds`` after it was written, and
always at close, so a power cut loses at most that window, never a file. ``card.json``
is replaced atomically (temp file, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import time
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from frostgym.core.episode import record_problem
from frostgym.core.errors import FrostgymError
from frostgym.core.messages import clean_text

#: What to do with a partial last line (a write cut short by a crash): refuse it, cut it
#: off the file (a resume re-runs that episode), or read around it without writing.
TornLine = Literal["error", "repair", "ignore"]
RecordKind = Literal["episode", "drop"]


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


class CardCorruptError(FrostgymError, RuntimeError):
    """A card file does not parse, holds a line that is not a record, or does not match
    the checksums its manifest recorded. The message names the file and line."""


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
    """One JSON line; dataclasses serialize as their fields. What orjson refuses (lone
    surrogates, integers past 64 bits, nesting past 254) takes the slow encoder, with lone
    surrogates replaced by U+FFFD, so a degenerate value costs speed, not the record. Only
    what no JSON can hold (nesting past Python's recursion limit, a cycle) still raises."""
    try:
        return orjson.dumps(obj, default=_fallback, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        text = json.dumps(obj, ensure_ascii=False, default=_slow_fallback)
        return clean_text(text)[0].encode("utf-8") + b"\n"


def _slow_fallback(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return _fallback(value)


class JsonlAppender:
    """Appends records to a JSON Lines file in batches (see the module docstring), and
    keeps the running checksums of the whole file (what was there when it opened, plus
    every line it appended) so a card can record a checkpoint at each fsync."""

    def __init__(self, path: Path, fsync_seconds: float = 1.0, start: JsonlContents | None = None) -> None:
        """``start``: what the file already holds, as a resume read and verified it (its
        running checksum goes on from there without reading the file again); without it
        the file is read (a new card's files are empty)."""
        self.path = path
        self.fsync_seconds = fsync_seconds
        if start is None:
            start = parse_jsonl(path, path.read_bytes() if path.exists() else b"")
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: list[bytes] = []
        self._last_fsync = time.monotonic()
        self._unsynced = False
        self._sha256 = start.hasher.copy()
        self._bytes = start.bytes
        self._lines = len(start.records)
        self._new_crcs = bytearray()  # 4 bytes per line appended since the last checkpoint()

    def append(self, obj: Any) -> None:
        self._pending.append(dumps_line(obj))

    def commit(self) -> bool:
        """Write what was appended in one ``write``; fsync when it is due. True if it synced."""
        if self._pending:
            batch = b"".join(self._pending)
            for line in self._pending:
                self._new_crcs += zlib.crc32(line[:-1]).to_bytes(4, "big")
            self._lines += len(self._pending)
            self._pending.clear()
            data = memoryview(batch)
            while data:
                written = os.write(self._fd, data)
                data = data[written:]
            self._sha256.update(batch)
            self._bytes += len(batch)
            self._unsynced = True
        if self._unsynced and time.monotonic() - self._last_fsync >= self.fsync_seconds:
            self.sync()
            return True
        return False

    def sync(self) -> None:
        """fsync what was written since the last one (nothing to do when nothing was)."""
        if self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False
        self._last_fsync = time.monotonic()

    def checkpoint(self) -> dict[str, Any]:
        """The file's manifest as written so far, with the CRCs of only the lines appended
        since the last checkpoint (a journal entry; ``chain_checkpoints`` joins them)."""
        entry = {
            "sha256": self._sha256.hexdigest(),
            "bytes": self._bytes,
            "lines": self._lines,
            "line_crc32": self._new_crcs.hex(),
        }
        self._new_crcs.clear()
        return entry

    def close(self) -> None:
        self.commit()
        self.sync()
        os.close(self._fd)


def chain_checkpoints(start: Mapping[str, Any], entries: list[Any], where: Path) -> dict[str, Any]:
    """The manifest after ``entries`` (journal checkpoints, oldest first, each with the
    CRCs of its new lines) that followed the manifest ``start``."""
    manifest = dict(start)
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, Mapping) or not {"sha256", "bytes", "lines", "line_crc32"} <= entry.keys():
            raise CardCorruptError(f"{where} entry {number} is not a checkpoint (edited?)")
        manifest = {
            "sha256": entry["sha256"],
            "bytes": entry["bytes"],
            "lines": entry["lines"],
            "line_crc32": manifest.get("line_crc32", "") + str(entry["line_crc32"]),
        }
    return manifest


@dataclass(frozen=True)
class JsonlContents:
    records: list[dict[str, Any]]
    sha256: str
    bytes: int
    line_crc32: str  # 8 hex digits per line: locates an edited line, the sha256 proves the file
    repaired_bytes: int  # bytes of a partial last line that repair cut off (or ignore left unread)
    hasher: Any = field(repr=False, compare=False)  # the sha256 state over those bytes, to append from

    def manifest(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "bytes": self.bytes, "lines": len(self.records), "line_crc32": self.line_crc32}


def read_jsonl(path: Path, *, torn: TornLine = "error", kind: RecordKind | None = None) -> JsonlContents:
    """Every record in a JSON Lines file (a missing file has none). A partial last line
    (no newline: a crash mid-write) is handled as ``torn`` says. With ``kind``, each line
    must be an episode or drop record (``record_problem``); the first that is not raises
    ``CardCorruptError`` naming the file and line."""
    data = path.read_bytes() if path.exists() else b""
    return parse_jsonl(path, data, torn=torn, kind=kind)


def parse_jsonl(path: Path, data: bytes, *, torn: TornLine = "error", kind: RecordKind | None = None) -> JsonlContents:
    """``read_jsonl`` on bytes already read from ``path``."""
    end = data.rfind(b"\n") + 1
    repaired = len(data) - end
    if repaired:
        if torn == "error":
            raise CardCorruptError(
                f"{path}: {repaired} bytes after the last complete line: a write was cut short "
                "(finish the run with --resume, which cuts them off)"
            )
        if torn == "repair":
            cut_torn_line(path, end)
        data = data[:end]
    records = []
    crcs = []
    with gc_paused():
        for number, line in enumerate(data.splitlines(), start=1):
            crcs.append(zlib.crc32(line))
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise CardCorruptError(f"{path} line {number}: not valid JSON ({error})") from error
            if kind is not None and (problem := record_problem(record, kind)):
                raise CardCorruptError(f"{path} line {number}: {problem} (edited, or not a frostgym card?)")
            records.append(record)
    digests = b"".join(crc.to_bytes(4, "big") for crc in crcs).hex()
    hasher = hashlib.sha256(data)
    return JsonlContents(records, hasher.hexdigest(), len(data), digests, repaired, hasher)


def cut_torn_line(path: Path, size: int) -> None:
    """Truncate ``path`` to ``size`` bytes, its complete lines, durably."""
    with path.open("r+b") as f:
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


def manifest_problem(path: Path, recorded: Mapping[str, Any], contents: JsonlContents, *, exact: bool) -> str | None:
    """How ``contents`` (read from ``path``) departs from the ``recorded`` manifest, naming
    the first line that differs; None when the file holds exactly the recorded lines
    (``exact``) or begins with them (lines appended since, as a crashed session leaves)."""
    lines = len(contents.records)
    if contents.bytes >= recorded["bytes"] and _prefix_sha256(path, contents, recorded["bytes"]) == recorded["sha256"]:
        if exact and contents.bytes > recorded["bytes"]:
            return f"{path}: {lines - recorded['lines']} lines were appended after the card was closed"
        return None
    if not path.exists():
        return f"{path} is missing; the card recorded {recorded['lines']} lines in it"
    known = recorded.get("line_crc32", "")  # cards written before frostgym.card/2 have none
    for number in range(min(lines, recorded["lines"]) if known else 0):
        if known[8 * number : 8 * number + 8] != contents.line_crc32[8 * number : 8 * number + 8]:
            return f"{path} line {number + 1} differs from what the card recorded"
    if lines < recorded["lines"]:
        return f"{path} has {lines} lines; the card recorded {recorded['lines']} (lines were removed)"
    return f"{path} does not match the checksum the card recorded"


def _prefix_sha256(path: Path, contents: JsonlContents, size: int) -> str:
    if size == contents.bytes:
        return contents.sha256
    with path.open("rb") as f:
        return hashlib.sha256(f.read(size)).hexdigest()


def write_json_atomic(path: Path, obj: Any) -> None:
    """Replace ``path`` so that readers see the old file or the new one, never a mix."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(orjson.dumps(obj, default=_fallback, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:  # a full disk, an unencodable value: leave the old file and no debris
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def fsync_directory(path: Path) -> None:
    """Make a rename or a new entry in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError as error:
        raise CardCorruptError(f"{path} is missing: not a card directory?") from error
    except orjson.JSONDecodeError as error:
        raise CardCorruptError(f"{path}: not valid JSON ({error})") from error
