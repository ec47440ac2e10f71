"""A large card's record files read back by a process of its own while the run writes them.

Why: close computes a card's checksums, accounting and views from the files on disk, and in
the run's own process that is Python work on the run's one core: at 10,000 oracle episodes
about a fifth of the run's time. This process tails the two files as the writer's disk
thread writes them, decoding each line's head once it is there, so at close only the last
lines and the tally are left, off the run's core.

It is a speed-up, never a second source of truth: the writer takes its summary only when
it read exactly the bytes the writer wrote (the same size, lines and sha256 for both files)
and computed it without error; otherwise (the process died, lagged, read other bytes, or
found a line it cannot read) the writer reads the files in its own process, as for a small
card, and raises what that raises. The process writes nothing of the card: only the CRC-32
of each line it read, to the file's ``store.crc_sidecar``, which the writer's journal then
leaves out (taking them was the one part of writing that held the run's GIL); a resume
after a crash reads them there to name an edited line. It exits when the writer's end of
its pipe closes (a writer killed with it), so it never outlives a run's card.

Run by ``ReadBack.start`` as a fresh interpreter (it inherits none of the run's threads),
at nice 19, on ``CARD_JSON PLAN_JSON EPISODES_JSONL DROPS_JSONL``, without ``site`` and importing
only the card modules (``_LAUNCH``).
While it reads it says how far it got (``{"read": bytes}`` lines on stdout, which the writer
drains every ``card.DRAIN_SECONDS``); it answers the writer's one request (a JSON line on stdin) with
one JSON line, its summary or why it has none.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

from frostgym.cards.store import JsonArrayFile, crc_sidecar, decode_lines, file_manifest, read_json
from frostgym.cards.tally import Tally, excluded_count
from frostgym.core.episode import Head, RecordKind, head_from_line
from frostgym.core.errors import CardCorruptError

# ``subprocess`` is imported where the process is started: the process itself starts none,
# and importing it was about a sixth of its start.
if TYPE_CHECKING:
    import subprocess

#: Plans at least this large get a read-back process: below, starting one (~0.25 s of a
#: core, mostly imports) costs more than it saves.
READBACK_MIN_EPISODES = 2000
#: How often the process looks for new lines while the run writes.
POLL_SECONDS = 0.02
#: The most bytes of a file one look reads: a process far behind the run (a loaded machine,
#: where it yields its core) catches up a block at a time instead of holding the whole
#: backlog and its heads at once (150 MB behind on a 60,000-episode card).
READ_BYTES = 4 << 20
#: At close, a process with more than this many bytes left to read is left behind: it
#: lags (a loaded machine), and reading the files in the writer's process is then quicker.
MAX_BYTES_BEHIND = 8 << 20
#: At close, how long the writer waits for the summary before reading the files itself.
FINISH_SECONDS = 60.0
#: The process's nice value: it yields its core to the run's threads.
NICENESS = 19
KINDS: tuple[RecordKind, RecordKind] = ("episode", "drop")


class Tail:
    """A JSON Lines file read as it grows: its whole lines decoded, hashed and CRC'd, the
    CRCs also appended to the file's ``crc_sidecar`` as they are taken (the writer's journal
    leaves them out while this process runs). The heads it decodes are handed on, not kept:
    a tally keeps of each only what its task's entry reads, until the task has all its
    records, and the memory is used again (a fresh page costs a fault, which on a VM that
    hands freed pages back to its host costs about 3 us: kept, a 10,000-episode card's heads
    were 6,000 of them)."""

    def __init__(self, path: Path, decode: Callable[[bytes], Head]) -> None:
        self.path = path
        self._decode = decode
        self._file: IO[bytes] | None = None
        self._sidecar: IO[bytes] | None = None
        self.rest = b""  # bytes after the last newline read so far
        self.crcs = bytearray()  # 4 bytes per line read
        self.hasher = hashlib.sha256()
        self.bytes = 0

    def read(self, limit: int = READ_BYTES) -> list[Head]:
        """The heads of the whole lines written since the last call, in its next ``limit``
        bytes at most (a line longer than that is read over several calls). Raises ``CardCorruptError`` for a line that
        is not a record's head (as ``read_jsonl`` does), and ``OSError`` when the file cannot
        be opened."""
        heads: list[Head] = []
        if self._file is None:
            with contextlib.suppress(OSError):  # only a hint for a resume: without it, ranges are named
                self._sidecar = crc_sidecar(self.path).open("wb")  # from line 1: a new session starts it over
            self._file = self.path.open("rb")
        data = self._file.read(limit)
        if not data:
            return heads
        data = self.rest + data
        end = data.rfind(b"\n") + 1
        self.rest = data[end:]
        if end:
            self.hasher.update(memoryview(data)[:end])
            taken = len(self.crcs)
            decode_lines(self.path, data, end, self._decode, heads, self.crcs)
            self.bytes += end
            if self._sidecar is not None:
                try:
                    self._sidecar.write(self.crcs[taken:])
                    self._sidecar.flush()
                except OSError:  # a full disk: the hint stops there, the card is not hurt
                    self._sidecar = None
        return heads

    def manifest(self) -> dict[str, Any]:
        """The manifest of the whole lines read so far."""
        return file_manifest(self.hasher.hexdigest(), self.bytes, len(self.crcs) // 4, self.crcs.hex())


def _read(tails: Mapping[RecordKind, Tail], tally: Tally, *, to_end: bool = False) -> None:
    """What the files hold since the last read, up to ``READ_BYTES`` of each (all of it,
    a block at a time, ``to_end``), into ``tally``."""
    for kind, tail in tails.items():
        while (read := tail.read()) or (to_end and tail.bytes + len(tail.rest) < _size(tail)):
            tally.add(kind, read)
            if not to_end:
                break


def _size(tail: Tail) -> int:
    """How many bytes ``tail``'s file holds now (what it read, when it cannot tell)."""
    try:
        return tail.path.stat().st_size
    except OSError:
        return tail.bytes + len(tail.rest)


def _finish(tails: Mapping[RecordKind, Tail], tally: Tally, request: Mapping[str, Any]) -> dict[str, Any]:
    """The reply to the writer's request: the files' manifests and the tally's result when
    both files hold exactly what the writer says it wrote; else why not."""
    _read(tails, tally, to_end=True)
    files = {}
    for kind, tail in tails.items():
        manifest = tail.manifest()
        wrote = request["files"][kind]
        got = {key: manifest[key] for key in ("bytes", "lines", "sha256")}
        if tail.rest or got != wrote:
            return {"ok": False, "why": f"{tail.path}: read {got}, the writer wrote {wrote}"}
        files[kind] = manifest
    return {"ok": True, "files": files, **tally.result(complete=request["complete"])}


def main(argv: Sequence[str]) -> int:
    """The read-back process: tail the files until the writer's request, answer it, exit."""
    gc.disable()  # a short life of acyclic data
    card_json, plan_json, episodes, drops = (Path(a) for a in argv)
    # Both as the writer wrote them before starting this process; the plan is read a block at a
    # time, alongside the records (``Tally``), never held.
    config = read_json(card_json)["config"]
    tally = Tally(JsonArrayFile(plan_json), config["ks"], excluded_count(config))
    tails = {
        kind: Tail(path, partial(head_from_line, kind=kind))
        for kind, path in zip(KINDS, (episodes, drops), strict=True)
    }
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    failure: str | None = None
    read = 0
    while not select.select([stdin], [], [], POLL_SECONDS)[0]:
        if failure is None:
            try:
                _read(tails, tally)
            except CardCorruptError as error:
                failure = str(error)
            if read != (read := sum(t.bytes for t in tails.values())):  # how far it got, for the lag rule
                stdout.write(orjson.dumps({"read": read}, option=orjson.OPT_APPEND_NEWLINE))
                stdout.flush()
    line = stdin.readline()
    if not line:  # the writer is gone (killed?): the sidecars take the CRCs of its last lines, for a resume
        if failure is None:
            with contextlib.suppress(CardCorruptError):
                _read(tails, tally, to_end=True)
        return 0
    try:
        reply = {"ok": False, "why": failure} if failure else _finish(tails, tally, orjson.loads(line))
    except (CardCorruptError, ValueError, KeyError, TypeError) as error:
        reply = {"ok": False, "why": f"{type(error).__name__}: {error}"}
    stdout.write(orjson.dumps(reply, option=orjson.OPT_APPEND_NEWLINE))
    stdout.flush()
    return 0


#: How the process starts (``python -S``, see ``_import_roots``): with ``frostgym`` and
#: ``gymnasium`` as bare packages, so that importing this module runs neither's
#: ``__init__`` (registering every env, numpy): it needs only the card modules. Why it
#: matters: the process starts while the run runs, and CPU spent on the other core slows
#: the run's core too (measured on a 2-vCPU VM: a fixed loop took a median 20-25% more CPU
#: time with the other core busy), and its imports were most of its CPU (0.27 s of 0.44 s
#: for a 10,000-episode card; 0.06 s this way). Should an import here ever need what an
#: ``__init__`` does, the process fails and the writer reads the files itself, as for a
#: small card (slower, never wrong).
_LAUNCH = """
import importlib.util, os, sys, types
for name in ("frostgym", "gymnasium"):
    package = types.ModuleType(name)
    package.__path__ = list(importlib.util.find_spec(name).submodule_search_locations)
    sys.modules[name] = package
from frostgym.cards.readback import main
os._exit(main(sys.argv[1:]))  # its replies are flushed: nothing to tear down but memory
"""


def _import_roots() -> list[str]:
    """Where the process finds what it imports, which ``-S`` (no ``site``: its start-up,
    with the editable-install finder, was a third of the process's import time) leaves off
    its path: this ``frostgym``'s directory and those of ``orjson``, ``msgspec`` and
    ``gymnasium`` (which may be elsewhere than the standard library)."""
    roots = [str(Path(__file__).resolve().parents[2])]
    for name in ("orjson", "msgspec", "gymnasium"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            roots.append(str(Path(spec.origin).parents[1]))
    return list(dict.fromkeys(roots))


class ReadBack:
    """The writer's side of a read-back process: ``start`` it once the files exist,
    ``drain`` it every so often, ``ask`` once every line is written and take its
    ``summary`` (``finish`` does both, and stops it), and ``stop`` it on the way out."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._buffer = b""
        self._asked = False
        #: Why ``summary`` returned None (for diagnostics: the card is right either way).
        self.refused: str | None = None

    @classmethod
    def start(cls, card_json: Path, plan_json: Path, episodes: Path, drops: Path) -> ReadBack:
        """Start the process on a card's ``card.json``, ``plan.json`` and record files.
        Raises ``OSError`` when it cannot be started."""
        import subprocess

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*_import_roots(), os.environ.get("PYTHONPATH", "")])}
        process = subprocess.Popen(
            [sys.executable, "-S", "-c", _LAUNCH, *(str(p) for p in (card_json, plan_json, episodes, drops))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        # Only on a core nothing else wants: run beside the writer's disk thread, it would
        # take the core from that thread while it holds the GIL, and the run would wait.
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, process.pid, NICENESS)
        _reap_ended()
        return cls(process)

    def finish(self, wrote: Mapping[str, Mapping[str, Any]], *, complete: bool) -> dict[str, Any] | None:
        """``ask``, then ``summary``, then ``stop``."""
        try:
            self.ask(wrote, complete=complete)
            return self.summary()
        finally:
            self.stop()

    def drain(self) -> None:
        """Take what the process said so far off its pipe, keeping only its last line, so
        that it never waits on a full pipe however long the run (a card calls this every
        ``DRAIN_SECONDS``: one ``select``). Never raises."""
        assert self._process.stdout is not None
        with contextlib.suppress(OSError, ValueError):  # it ended: ``ask`` finds out
            fd = self._process.stdout.fileno()
            while select.select([fd], [], [], 0)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                self._buffer += chunk
        said, newline, rest = self._buffer.rpartition(b"\n")
        if newline:
            self._buffer = said.rpartition(b"\n")[2] + newline + rest

    def ask(self, wrote: Mapping[str, Mapping[str, Any]], *, complete: bool) -> None:
        """Ask for the summary of the files, given what the writer ``wrote`` to each
        (``episode`` and ``drop``: ``bytes``, ``lines``, ``sha256``) once all of it is
        written; the process reads the rest and computes it meanwhile. A process that said
        it lags more than ``MAX_BYTES_BEHIND`` (or said nothing yet) is not asked."""
        behind = sum(wrote[kind]["bytes"] for kind in KINDS)
        try:
            self.drain()
            while (progress := self._line(time.monotonic())) is not None:  # what it said so far
                behind = sum(wrote[kind]["bytes"] for kind in KINDS) - progress.get("read", 0)
            if behind > MAX_BYTES_BEHIND:
                self.refused = f"it lagged ({behind} bytes left to read)"
                return
            assert self._process.stdin is not None
            request = {"files": {kind: dict(wrote[kind]) for kind in KINDS}, "complete": complete}
            self._process.stdin.write(orjson.dumps(request, option=orjson.OPT_APPEND_NEWLINE))
            self._process.stdin.flush()
            self._asked = True
        except (OSError, ValueError) as error:  # it died
            self.refused = f"{type(error).__name__}: {error}"

    def summary(self) -> dict[str, Any] | None:
        """The summary ``ask`` asked for, whose ``files`` (``episode`` and ``drop``) hold
        the files' manifests beside ``tally``'s keys; None when it is not to be had or not
        to be trusted (the process died, lags, read other bytes than were written, or found
        a line it cannot read; ``refused`` says which): then the caller reads the files
        itself. The process ends by itself once it answered; call ``stop`` when done with it
        (then it is reaped without waiting, where stopping it at once would mean a thread to
        wait for its exit)."""
        try:
            if not self._asked:
                return None
            deadline = time.monotonic() + FINISH_SECONDS
            while (reply := self._line(deadline)) is not None and "ok" not in reply:
                pass  # progress said before the request
            if reply is None or reply["ok"] is not True:
                self.refused = "it did not answer" if reply is None else str(reply.get("why"))
                return None
            return reply
        except (OSError, ValueError) as error:
            self.refused = f"{type(error).__name__}: {error}"
            return None

    def _line(self, deadline: float) -> dict[str, Any] | None:
        """The process's next JSON object line, or None when it ended or said nothing more
        by ``deadline`` (now: only what it already said). Raises ``ValueError`` for
        anything else."""
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            if not select.select([fd], [], [], max(deadline - time.monotonic(), 0))[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply = orjson.loads(line)
        if not isinstance(reply, dict):
            raise ValueError(f"not a JSON object: {line[:80]!r}")
        return reply

    def stop(self) -> None:
        """End the process (it writes nothing the card needs: nothing is lost) and close its pipes,
        without waiting: a process still exiting (freeing a run's worth of memory takes the
        kernel some milliseconds, and it runs at nice 19) is reaped once it has ended, by a
        later ``start`` or ``stop`` (``_reap_ended``), not by a thread, whose start alone
        cost close 2-4 ms."""
        if self._process.poll() is None:
            self._process.kill()
            with _EXITING_LOCK:
                _EXITING.append(self._process)
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                pipe.close()
        _reap_ended()


#: Read-back processes stopped while still running, not yet reaped (``ReadBack.stop``).
_EXITING: list[subprocess.Popen[bytes]] = []
_EXITING_LOCK = threading.Lock()


def _reap_ended() -> None:
    """Reap the stopped processes that have ended since (``poll`` does, without waiting)."""
    with _EXITING_LOCK:
        _EXITING[:] = [process for process in _EXITING if process.poll() is None]
