"""Append-only JSON Lines files and atomic JSON files: the card's storage layer.

Crash safety rests on three rules. Lines are only ever appended, each batch in one
``write`` of whole lines, so a ``kill -9`` can at worst leave one partial line at the
end, which ``read_jsonl(torn="repair")`` cuts off (that episode is then re-run). Data
reaches the disk with ``fsync`` at most ``fsync_seconds`` after it was written, and
always at close, so a power cut loses at most that window, never a file. ``card.json``
is replaced atomically (temp file, fsync, rename, fsync of the directory).

Speed: writes, checksums and fsyncs run on a thread of their own (``DiskThread``), and
reading a file back hashes it on a second thread while its lines are decoded, so a card
costs the run it records as little of its one core as it can.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import os
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

import msgspec
import orjson

from frostgym.core.errors import CardCorruptError
from frostgym.core.messages import clean_text

# ``concurrent.futures`` is imported where a ``DiskThread`` is made: the read-back process
# imports this module but runs no thread, and that import (with ``logging``) was about a
# twelfth of its start.
if TYPE_CHECKING:
    from concurrent.futures import Future

#: What to do with a partial last line (a write cut short by a crash): refuse it, cut it
#: off the file (a resume re-runs that episode), or read around it without writing.
TornLine = Literal["error", "repair", "ignore"]
T = TypeVar("T")


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


def _fallback(value: Any) -> Any:
    """What the encoders cannot write natively (numpy scalars, odd objects) is kept readable."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


_ENCODER = msgspec.json.Encoder(enc_hook=_fallback)


def dumps_line(obj: Any) -> bytes:
    """One JSON line; records (``msgspec.Struct``) and dataclasses serialize as their fields,
    in declaration order. What the fast encoder refuses (lone surrogates, integers past 64
    bits, nesting past its limit, keys that are not strings or numbers) takes the slow
    encoder, with lone surrogates replaced by U+FFFD, so a degenerate value costs speed,
    not the record. Only what no JSON can hold (nesting past Python's recursion limit, a
    cycle) still raises."""
    try:
        return _ENCODER.encode(obj) + b"\n"
    except (TypeError, ValueError, OverflowError, RecursionError):  # UnicodeEncodeError is a ValueError
        text = json.dumps(obj, ensure_ascii=False, default=_slow_fallback)
        return clean_text(text)[0].encode("utf-8") + b"\n"


def _slow_fallback(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.asdict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return _fallback(value)


class DiskThread:
    """One thread that runs a card's writes, checksums and fsyncs, in the order they were
    asked for, so the run does not wait for the disk: ``os.write``, ``os.fsync`` and
    hashlib let go of the GIL, so on a second core they cost the run nothing.

    The first job that raises stops every later one, and its error is raised in the
    caller's thread by the next ``check`` (a card checks at every commit) or by ``wait``,
    once. At most ``MAX_PENDING`` jobs wait at a time: past that ``submit`` waits for the
    oldest, which bounds the batches held in memory when the disk is slower than the run.
    """

    MAX_PENDING = 64

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._executor = ThreadPoolExecutor(1, thread_name_prefix="frostgym-card-disk")
        self._jobs: deque[Future[None]] = deque()
        self._failure: BaseException | None = None
        self._reported = False

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` after every job submitted before it; raises what ``check`` raises."""
        self.check()
        if len(self._jobs) >= self.MAX_PENDING:
            self._jobs.popleft().result()
        self._jobs.append(self._executor.submit(self._guarded, job))

    def _guarded(self, job: Callable[[], None]) -> None:
        if self._failure is None:
            try:
                job()
            except BaseException as error:  # kept for the caller's thread, which raises it
                self._failure = error

    def check(self) -> None:
        """Raise the error of a failed job, if one failed and it was not raised yet."""
        while self._jobs and self._jobs[0].done():
            self._jobs.popleft()
        if self._failure is not None and not self._reported:
            self._reported = True
            raise self._failure

    def wait(self) -> None:
        """Return once every job submitted so far has run (or been skipped after a failure);
        raises what ``check`` raises."""
        self.settle()
        self.check()

    def settle(self) -> None:
        """Return once every job submitted so far has run (or been skipped after a failure),
        raising nothing: ``check`` still raises a failure not raised yet."""
        while self._jobs:
            self._jobs.popleft().result()

    @property
    def failure(self) -> BaseException | None:
        """The error of the first job that failed (None: none did), raised by now or not."""
        return self._failure

    def close(self) -> None:
        """Wait for the jobs and end the thread; an error not raised yet is not raised."""
        self._executor.shutdown(wait=True)
        self._jobs.clear()


class JsonlAppender:
    """Appends records to a JSON Lines file in batches (see the module docstring), and
    keeps the running checksums of the whole file (what was there when it opened, plus
    every line it appended) so a card can record a checkpoint at each fsync.

    Lines are copied, as they are appended, into a buffer that is handed whole to the
    writing job and then reused. Why: the job then writes and hashes one block with the GIL
    let go, where a list of lines had to be joined first (holding the GIL while a fresh
    8 MiB block was allocated and filled); each line's ``bytes`` is freed at once, so the
    run's next record reuses its memory.

    With a ``DiskThread``, ``flush`` hands each batch to it, and ``sync`` and
    ``checkpoint`` must be called from jobs on it; without one, everything runs in the
    caller's thread. ``line_crcs=False`` leaves out the CRC-32 of each line (``checkpoint``
    then says None): a card does so when its read-back process takes them
    (``crc_sidecar``), because per line they are the one part of writing that holds the
    GIL, which the run's thread then waits for."""

    def __init__(
        self,
        path: Path,
        start: JsonlContents[Any] | FoldedJsonl | None = None,
        disk: DiskThread | None = None,
        *,
        line_crcs: bool = True,
        buffer_bytes: int = 64 << 10,
    ) -> None:
        """``start``: what the file already holds, as a resume read and verified it (its
        running checksum goes on from there without reading the file again); without it
        the file is read (a new card's files are empty). ``buffer_bytes``: the buffers'
        size, best a little more than is flushed at once: a buffer that a line does not fit
        grows by half (or to fit it), and each new page of buffer costs the run's thread a
        page fault."""
        self.path = path
        if start is None:
            start = read_jsonl(path)
        self._disk = disk
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._line_crcs = line_crcs
        self._buffer = bytearray(buffer_bytes)
        self._used = 0  # bytes of the buffer holding lines appended since the last flush
        self._lengths: list[int] = []  # of those lines
        self._spare: deque[bytearray] = deque()  # buffers written out, handed back by the jobs
        self.unsynced = False
        self._sha256 = start.hasher.copy()
        self._bytes = start.bytes
        self._lines = start.lines
        self._new_crcs = bytearray()  # 4 bytes per line appended since the last checkpoint()

    def append(self, obj: Any) -> None:
        """Serialize ``obj`` now (``dumps_line``: its errors are raised here) for the next flush."""
        self.append_line(dumps_line(obj))

    @property
    def pending_bytes(self) -> int:
        """How many bytes were appended since the last flush."""
        return self._used

    @property
    def pending_lines(self) -> int:
        """How many lines were appended since the last flush."""
        return len(self._lengths)

    def append_line(self, line: bytes) -> None:
        """Queue ``line`` (one JSON value and its newline, as ``dumps_line`` makes) for the next flush."""
        start = self._used
        end = start + len(line)
        if end > len(self._buffer):
            self._grow(end)
        self._buffer[start:end] = line
        self._used = end
        self._lengths.append(end - start)

    def _grow(self, needed: int) -> None:
        buffer = bytearray(max(needed, len(self._buffer) * 3 // 2))
        buffer[: self._used] = memoryview(self._buffer)[: self._used]
        self._buffer = buffer

    def flush(self) -> None:
        """Write what was appended, in one ``write`` (on the disk thread when there is one)."""
        if not self._lengths:
            return
        buffer, used, lengths = self._buffer, self._used, self._lengths
        self._buffer = self._spare_buffer(len(buffer))
        self._used = 0
        self._lengths = []
        if self._disk is None:
            self._write(buffer, used, lengths)
        else:
            self._disk.submit(partial(self._write, buffer, used, lengths))

    def _spare_buffer(self, size: int) -> bytearray:
        """A written-out buffer at least ``size`` long, else a new one of that size."""
        while self._spare:
            buffer = self._spare.popleft()
            if len(buffer) >= size:
                return buffer
        return bytearray(size)

    def _write(self, buffer: bytearray, used: int, lengths: list[int]) -> None:
        view = memoryview(buffer)
        _write_all(self._fd, view[:used])
        self._sha256.update(view[:used])
        self._bytes += used
        self._lines += len(lengths)
        if self._line_crcs:
            start = 0
            for length in lengths:
                self._new_crcs += zlib.crc32(view[start : start + length - 1]).to_bytes(4, "big")
                start += length
        self.unsynced = True
        self._spare.append(buffer)  # deque appends are atomic: the caller's thread takes it back

    def sync(self) -> None:
        """fsync what was written since the last one (nothing to do when nothing was)."""
        if self.unsynced:
            os.fsync(self._fd)
            self.unsynced = False

    def keep_line_crcs(self) -> None:
        """Take the CRC-32 of each line from the next write on (a card whose read-back
        process, which was to take them, could not start). Call it from a job on the disk
        thread, or before any line is appended."""
        self._line_crcs = True

    def checkpoint(self) -> dict[str, Any]:
        """The file's manifest as written so far, with the CRCs of only the lines appended
        since the last checkpoint (a journal entry; ``chain_checkpoints`` joins them), or
        None for them when it takes none (``line_crcs``)."""
        entry = file_manifest(
            self._sha256.hexdigest(), self._bytes, self._lines, self._new_crcs.hex() if self._line_crcs else None
        )
        self._new_crcs.clear()
        return entry

    def wrote(self) -> dict[str, Any]:
        """The whole file as written so far: its ``bytes``, ``lines`` and ``sha256``
        (from the disk thread's jobs, or once they have all run)."""
        return {"bytes": self._bytes, "lines": self._lines, "sha256": self._sha256.hexdigest()}

    def close(self) -> None:
        """Close the file; flush and sync it first when there is no disk thread (with one,
        the card does that on it before closing)."""
        if self._disk is None:
            self.flush()
            self.sync()
        os.close(self._fd)


#: In a journal's chained ``line_crc32``, a line whose CRC-32 the writer did not take
#: (``JsonlAppender(line_crcs=False)``): ``fill_unknown_crcs`` puts in what a sidecar holds.
UNKNOWN_CRC = "?" * 8


def chain_checkpoints(start: Mapping[str, Any], entries: list[Any], where: Path) -> dict[str, Any]:
    """The manifest after ``entries`` (journal checkpoints, oldest first, each with the
    CRCs of its new lines, or None for them) that followed the manifest ``start``."""
    manifest = dict(start)
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, Mapping) or not {"sha256", "bytes", "lines", "line_crc32"} <= entry.keys():
            raise CardCorruptError(f"{where} entry {number} is not a checkpoint (edited?)")
        crcs = entry["line_crc32"]
        if crcs is None:
            lines, before = entry["lines"], manifest["lines"]
            if type(lines) is not int or type(before) is not int or lines < before:
                raise CardCorruptError(f"{where} entry {number} is not a checkpoint (edited?)")
            crcs = UNKNOWN_CRC * (lines - before)
        manifest = file_manifest(
            entry["sha256"], entry["bytes"], entry["lines"], manifest.get("line_crc32", "") + str(crcs)
        )
    return manifest


def crc_sidecar(path: Path) -> Path:
    """Where a card's read-back process keeps the CRC-32 of each line of ``path`` it read
    (4 bytes a line, big-endian, from the first line on) while the run writes it: the
    journal's checkpoints leave those CRCs out then (``JsonlAppender(line_crcs=False)``),
    and a resume after a crash takes them from here to name an edited line. Only a hint:
    the journal's sha256 decides whether the file is what was written; a missing or short
    sidecar only makes the message name a range of lines."""
    return path.with_name(f".{path.name}.crc32")


def fill_unknown_crcs(manifest: Mapping[str, Any], sidecar: Path) -> dict[str, Any]:
    """``manifest`` with the CRCs it lacks (``UNKNOWN_CRC``) taken from ``sidecar``, as far
    as it holds them."""
    known: str = manifest.get("line_crc32", "")
    if UNKNOWN_CRC[0] not in known:
        return dict(manifest)
    try:
        hints = sidecar.read_bytes().hex()
    except OSError:
        return dict(manifest)
    chunks = [known[i : i + 8] for i in range(0, len(known), 8)]
    covered = len(hints) // 8
    filled = [hints[8 * i : 8 * i + 8] if c == UNKNOWN_CRC and i < covered else c for i, c in enumerate(chunks)]
    return {**manifest, "line_crc32": "".join(filled)}


def file_manifest(sha256: str, size: int, lines: int, line_crc32: str | None) -> dict[str, Any]:
    """A record file's manifest as ``card.json``'s ``files`` holds it, and a journal's
    checkpoint (whose ``line_crc32`` has only the lines since the last one, or None)."""
    return {"sha256": sha256, "bytes": size, "lines": lines, "line_crc32": line_crc32}


@dataclass(frozen=True)
class JsonlContents(Generic[T]):
    """A JSON Lines file as read: its records (as the reader decoded them) and its manifest."""

    records: list[T]
    sha256: str
    bytes: int
    line_crc32: str  # 8 hex digits per line: locates an edited line, the sha256 proves the file
    repaired_bytes: int  # bytes of a partial last line that repair cut off (or ignore left unread)
    hasher: Any = field(repr=False, compare=False)  # the sha256 state over those bytes, to append from

    @property
    def lines(self) -> int:
        return len(self.records)

    def manifest(self) -> dict[str, Any]:
        return file_manifest(self.sha256, self.bytes, len(self.records), self.line_crc32)


@overload
def read_jsonl(path: Path, *, torn: TornLine = "error") -> JsonlContents[Any]: ...
@overload
def read_jsonl(path: Path, *, torn: TornLine = "error", decode: Callable[[bytes], T]) -> JsonlContents[T]: ...
def read_jsonl(path: Path, *, torn: TornLine = "error", decode: Callable[[bytes], Any] = orjson.loads) -> Any:
    """Every record in a JSON Lines file (a missing file has none), each line decoded by
    ``decode`` (plain JSON by default; a card reads its records with their typed decoders).
    A partial last line (no newline: a crash mid-write) is handled as ``torn`` says. Raises
    ``CardCorruptError`` naming the file and the first line ``decode`` refuses (its
    ``ValueError``), or the partial line when ``torn`` is ``"error"``."""
    data = path.read_bytes() if path.exists() else b""
    return parse_jsonl(path, data, torn=torn, decode=decode)


@overload
def parse_jsonl(path: Path, data: bytes, *, torn: TornLine = "error") -> JsonlContents[Any]: ...
@overload
def parse_jsonl(
    path: Path, data: bytes, *, torn: TornLine = "error", decode: Callable[[bytes], T]
) -> JsonlContents[T]: ...
def parse_jsonl(
    path: Path, data: bytes, *, torn: TornLine = "error", decode: Callable[[bytes], Any] = orjson.loads
) -> Any:
    """``read_jsonl`` on bytes already read from ``path``. The sha256 is computed on a second
    thread (hashlib lets go of the GIL) while the lines are decoded and their CRCs taken."""
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
    whole = memoryview(data)[:end]
    hashing = _Sha256(whole)
    records: list[Any] = []
    crcs = bytearray()
    try:
        decode_lines(path, data, end, decode, records, crcs)
    finally:
        hasher = hashing.result()
    return JsonlContents(records, hasher.hexdigest(), end, crcs.hex(), repaired, hasher)


def decode_lines(
    path: Path, data: bytes, end: int, decode: Callable[[bytes], T], records: list[T], crcs: bytearray
) -> None:
    """Decode the whole lines of ``data[:end]`` (it ends with a newline) onto ``records``,
    and their CRC-32s onto ``crcs`` (4 bytes each); lines are numbered on from those whose
    CRCs ``crcs`` already holds. Raises ``CardCorruptError`` naming the first line
    ``decode`` refuses (its ``ValueError``)."""
    crc32 = zlib.crc32
    find = data.find
    start = 0
    number = len(crcs) // 4
    with gc_paused():
        while start < end:
            stop = find(b"\n", start)
            line = data[start:stop]
            number += 1
            crcs += crc32(line).to_bytes(4, "big")
            try:
                records.append(decode(line))
            except ValueError as error:  # orjson.JSONDecodeError is one
                raise CardCorruptError(f"{path} line {number}: {_problem(error)}") from error
            start = stop + 1


def _problem(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):  # orjson's and the record decoders' are one
        return f"not valid JSON ({error})"
    return f"{error} (edited, or not a frostgym card?)"


#: Bytes ``stream_jsonl`` reads at a time.
STREAM_CHUNK = 1 << 22
#: Bytes ``fold_jsonl`` decodes at a time (a block's heads take about its size).
FOLD_BLOCK = 1 << 20
#: Bytes of a JSON array ``JsonArrayFile`` decodes at a time: ``orjson.loads`` peaks at about
#: 12 times its input besides what it returns (a 4 MiB block of a plan: 65 MB; 256 KiB: 4 MB).
ARRAY_BLOCK = 256 << 10


def stream_jsonl(
    path: Path, decode: Callable[[bytes], T], recorded: Mapping[str, Any] | None
) -> Iterator[tuple[bytes, T]]:
    """Each line of a closed card's record file and what ``decode`` makes of it, streamed
    ``STREAM_CHUNK`` bytes at a time, so a reader that reduces each record as it comes (a
    comparison, a report) never holds the file; the file's sha256 and size are checked
    against ``recorded`` (its manifest in ``card.json``) once it has been read through.
    Raises ``CardCorruptError`` for a missing file the manifest lists lines of, a line
    ``decode`` refuses (its ``ValueError``: a ``json.JSONDecodeError`` is named as not
    JSON), a torn last line, and a file that does not match the manifest."""
    if not path.exists():
        if recorded and recorded.get("lines"):
            raise CardCorruptError(f"{path} is missing; the card lists {recorded['lines']} records in it")
        return
    digest = hashlib.sha256()
    size = 0
    rest = b""
    number = 0
    with path.open("rb") as handle:
        while chunk := handle.read(STREAM_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                number += 1
                try:
                    record = decode(line)
                except json.JSONDecodeError as error:
                    raise CardCorruptError(f"{path}: line {number} is not JSON: {error}") from None
                except ValueError as error:
                    raise CardCorruptError(f"{path}: line {number}: {error}") from None
                yield line, record
    if rest.strip():
        raise CardCorruptError(f"{path}: line {number + 1} is torn (no newline); resume or close the card first")
    if recorded is not None and (recorded.get("sha256") != digest.hexdigest() or recorded.get("bytes") != size):
        raise CardCorruptError(f"{path} does not match the card's manifest (edited after the card was written?)")


@dataclass(frozen=True)
class FoldedJsonl:
    """A JSON Lines file as ``fold_jsonl`` read it: what ``JsonlContents`` says of it
    (its manifest, and the sha256 state to append from), without its records."""

    sha256: str
    bytes: int
    lines: int
    line_crc32: str
    repaired_bytes: int
    hasher: Any = field(repr=False, compare=False)

    def manifest(self) -> dict[str, Any]:
        return file_manifest(self.sha256, self.bytes, self.lines, self.line_crc32)


def fold_jsonl(
    path: Path,
    decode: Callable[[bytes], T],
    take: Callable[[list[T]], None],
    *,
    torn: TornLine = "error",
    block: int = FOLD_BLOCK,
) -> FoldedJsonl:
    """``read_jsonl``, each block of decoded records (``block`` bytes of whole lines at a
    time) handed to ``take`` instead of kept: what a reader that reduces the records as they
    come (a card's close) reads, in the memory of one block whatever the file's size. The
    same checks, in the same order, and the same manifest as ``read_jsonl``: a partial last
    line is handled as ``torn`` says before any line is decoded."""
    if not path.exists():
        return FoldedJsonl(hashlib.sha256().hexdigest(), 0, 0, "", 0, hashlib.sha256())
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        end = _whole_lines_end(handle, size)
        repaired = size - end
        if repaired:
            if torn == "error":
                raise CardCorruptError(
                    f"{path}: {repaired} bytes after the last complete line: a write was cut short "
                    "(finish the run with --resume, which cuts them off)"
                )
            if torn == "repair":
                cut_torn_line(path, end)
        hasher = hashlib.sha256()
        crcs = bytearray()
        rest = b""
        handle.seek(0)
        done = 0
        while done < end:
            chunk = handle.read(min(block, end - done))
            if not chunk:  # shortened meanwhile: what is left reads as a torn line
                break
            done += len(chunk)
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if not cut:
                continue
            hashing = _Sha256(memoryview(data)[:cut], hasher)
            records: list[T] = []
            try:
                decode_lines(path, data, cut, decode, records, crcs)
            finally:
                hashing.result()
            take(records)
        if rest:
            raise CardCorruptError(f"{path} changed while it was read")
    return FoldedJsonl(hasher.hexdigest(), end - len(rest), len(crcs) // 4, crcs.hex(), repaired, hasher)


def _whole_lines_end(handle: IO[bytes], size: int) -> int:
    """Where the last whole line of the open file ``handle`` (``size`` bytes) ends: just
    after its last newline, 0 when it has none."""
    step = 1 << 16
    position = size
    while position > 0:
        start = max(0, position - step)
        handle.seek(start)
        found = handle.read(position - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        position = start
        step *= 2
    return 0


class JsonArrayFile:
    """The values of a file holding one JSON array (a card's ``plan.json``), read from the
    file each time it is iterated, ``block`` bytes at a time: what a reader that goes through
    a plan once or twice (a card's tally) iterates, in the memory of a block whatever the
    plan's size, where ``read_json`` of a 1,000,000-episode plan (300 MB) takes gigabytes.

    The array is cut between two of its values, at a ``},{`` after which the values before
    it parse as an array on their own: in any other place (in a string, in a nested value)
    they do not, and the array is cut at an earlier one. So every value it yields is what
    ``orjson.loads`` of the whole file holds, and a file that is not a JSON array is refused
    as ``read_json`` refuses it. Raises ``CardCorruptError`` for a missing file or one that
    is not valid JSON (naming it), ``ValueError`` for one holding JSON other than an array."""

    def __init__(self, path: Path, *, block: int = ARRAY_BLOCK) -> None:
        self.path = path
        self._block = block

    def __iter__(self) -> Iterator[Any]:
        try:
            handle = self.path.open("rb")
        except FileNotFoundError as error:
            raise CardCorruptError(f"{self.path} is missing: not a card directory?") from error
        with handle:
            buffer = handle.read(self._block)
            if not buffer.startswith(b"["):  # not as a card writes it: read as a whole
                yield from self._array(buffer + handle.read())
                return
            buffer = buffer[1:]
            while chunk := handle.read(self._block):
                buffer += chunk
                cut = buffer.rfind(b"},{")
                while cut >= 0:
                    try:
                        values = orjson.loads(b"[" + buffer[: cut + 1] + b"]")
                    except orjson.JSONDecodeError:  # not between two values: an earlier one
                        cut = buffer.rfind(b"},{", 0, cut)
                        continue
                    yield from values
                    buffer = buffer[cut + 2 :]
                    break
            yield from self._array(b"[" + buffer)

    def _array(self, data: bytes) -> list[Any]:
        try:
            values = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raise CardCorruptError(f"{self.path}: not valid JSON ({error})") from error
        if not isinstance(values, list):
            raise ValueError(f"{self.path} does not hold a JSON array")
        return values


class _Sha256:
    """The sha256 of ``data``, computed on a thread of its own when ``data`` is big enough
    for that to pay (a thread costs about 0.1 ms; hashing runs at about 2 GB/s)."""

    THREAD_BYTES = 1 << 20

    def __init__(self, data: memoryview, hasher: Any = None) -> None:
        """``hasher``: a sha256 to update with ``data`` (a new one by default)."""
        self._hasher: Any = hashlib.sha256() if hasher is None else hasher
        self._data = data
        self._thread: threading.Thread | None = None
        if len(data) >= self.THREAD_BYTES:
            self._thread = threading.Thread(target=self._run, name="frostgym-sha256", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        self._hasher.update(self._data)

    def result(self) -> Any:
        """The hasher, once it has taken ``data``."""
        if self._thread is None:
            self._hasher.update(self._data)
        else:
            self._thread.join()
        return self._hasher


def cut_torn_line(path: Path, size: int) -> None:
    """Truncate ``path`` to ``size`` bytes, its complete lines, durably."""
    with path.open("r+b") as f:
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


def manifest_problem(
    path: Path, recorded: Mapping[str, Any], contents: JsonlContents[Any] | FoldedJsonl, *, exact: bool
) -> str | None:
    """How ``contents`` (read from ``path``) departs from the ``recorded`` manifest, naming
    the first line that differs; None when the file holds exactly the recorded lines
    (``exact``) or begins with them (lines appended since, as a crashed session leaves)."""
    lines = contents.lines
    if contents.bytes >= recorded["bytes"] and _prefix_sha256(path, contents, recorded["bytes"]) == recorded["sha256"]:
        if exact and contents.bytes > recorded["bytes"]:
            return f"{path}: {lines - recorded['lines']} lines were appended after the card was closed"
        return None
    if not path.exists():
        return f"{path} is missing; the card recorded {recorded['lines']} lines in it"
    known = recorded.get("line_crc32", "")  # cards written before frostgym.card/2 have none
    unknown: list[int] = []
    for number in range(min(lines, recorded["lines"], len(known) // 8)):
        crc = known[8 * number : 8 * number + 8]
        if crc == UNKNOWN_CRC:
            unknown.append(number + 1)
        elif crc != contents.line_crc32[8 * number : 8 * number + 8]:
            return f"{path} line {number + 1} differs from what the card recorded"
    if lines < recorded["lines"]:
        return f"{path} has {lines} lines; the card recorded {recorded['lines']} (lines were removed)"
    if unknown:  # its read-back process's CRCs of those lines are gone: only the range is known
        return f"{path} differs from what the card recorded in a line from {unknown[0]} to {unknown[-1]}"
    return f"{path} does not match the checksum the card recorded"


def _prefix_sha256(path: Path, contents: JsonlContents[Any] | FoldedJsonl, size: int) -> str:
    if size == contents.bytes:
        return contents.sha256
    hasher = hashlib.sha256()
    with path.open("rb") as f:
        while size > 0 and (block := f.read(min(size, STREAM_CHUNK))):
            hasher.update(block)
            size -= len(block)
    return hasher.hexdigest()


def _write_all(fd: int, data: memoryview) -> None:
    """``os.write`` all of ``data`` to ``fd``, however many calls that takes."""
    while data:
        data = data[os.write(fd, data) :]


def write_json_atomic(path: Path, obj: Any) -> None:
    """Replace ``path`` with ``obj`` as pretty JSON, so that readers see the old file or
    the new one, never a mix."""
    write_atomic(path, json_bytes(obj))


def json_bytes(obj: Any) -> bytes:
    """``obj`` as pretty JSON, as ``write_json_atomic`` writes it. Raises what orjson
    raises for a value no JSON can hold, before anything is written."""
    return orjson.dumps(obj, default=_fallback, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, synced, so that readers see the old file or the new
    one, never a mix (and after a power cut, the new one only once this returned)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write_synced(tmp, data)
        tmp.replace(path)
    except BaseException:  # a full disk: leave the old file and no debris
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_synced(path: Path, data: bytes) -> None:
    """Create (or truncate) ``path`` and write ``data`` to it, synced: for a file in a
    directory nothing reads yet (a card being built), where no reader can see it half
    written. Its directory entry is durable once the directory is synced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, memoryview(data))
        os.fsync(fd)
    finally:
        os.close(fd)


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
