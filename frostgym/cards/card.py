"""The rollout card: a directory that is the evidence of one evaluation run.

- ``card.json``: the manifest: config, provenance, the plan's hash and size, accounting,
  checksums, views;
- ``plan.json``: the plan's entries, one compact JSON array whose sha256 is the plan's;
- ``episodes.jsonl``: one full trajectory per completed episode;
- ``drops.jsonl``: one record per episode that was not scored normally.

``card.json`` and ``plan.json`` are written before the first episode (status ``running``),
and ``card.json`` is rewritten at the end. Why the plan has a file of its own
(``frostgym.card/4``): it is most of the manifest (3 MB of a 10,000-episode card's, 300 MB
of a 1,000,000-episode one's), which close and every resume rewrote unchanged; now they
rewrite a few kilobytes, and ``card.json`` stays small enough to read. ``read_card_json``
puts the entries back under ``plan.episodes``, so a card read is the same for every schema.

Accounting, checksums and views are always recomputed from the two JSON Lines files as they
are on disk, never carried in memory, so the card cannot claim what its
episodes do not show. For a large plan a second process reads the files back while the run
writes them (``frostgym.cards.readback``), so close has only the last lines left to read.

A writer's memory does not grow with its plan or with the episodes it records: the plan is
written to ``plan.json`` as it is generated and read back from there (``PlanFile``), and
every file is read in blocks (``fold_jsonl``, ``JsonArrayFile``) into tallies that keep only
the tasks under way (``Tally``), so a 1,000,000-episode run needs what a 10,000-episode one
does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import IO, Any, Literal, NoReturn

import orjson

from frostgym.cards.readback import READBACK_MIN_EPISODES, ReadBack
from frostgym.cards.store import (
    STREAM_CHUNK,
    DiskThread,
    FoldedJsonl,
    JsonArrayFile,
    JsonlAppender,
    JsonlContents,
    TornLine,
    chain_checkpoints,
    crc_sidecar,
    cut_torn_line,
    dumps_line,
    fill_unknown_crcs,
    fold_jsonl,
    fsync_directory,
    gc_paused,
    json_bytes,
    manifest_problem,
    parse_jsonl,
    read_json,
    read_jsonl,
    stream_jsonl,
    write_atomic,
    write_json_atomic,
    write_synced,
)
from frostgym.cards.tally import Tally, check_ids, excluded_count
from frostgym.core.episode import (
    Drop,
    DropRecord,
    EpisodeRecord,
    Head,
    Record,
    decode_line,
    drop_record,
    head_from_line,
)
from frostgym.core.errors import CardCorruptError, CardLockedError, CardMismatchError
from frostgym.run.plan import SEEDING, PlanFile, PlannedEpisode
from frostgym.version import __version__

CARD_SCHEMA = "frostgym.card/4"
#: Manifest versions ``load_card`` reads: /2 added per-line checksums and the checkpoint; /3
#: stores an episode's final grade once (``EpisodeRecord.encode``), which /2 readers would
#: not put back on the step that ended it; /4 keeps the plan's entries in ``PLAN_FILE``
#: (``card.json`` holds their sha256 and count), where /1-/3 held them in ``card.json``.
READABLE_SCHEMAS = frozenset({"frostgym.card/1", "frostgym.card/2", "frostgym.card/3", CARD_SCHEMA})
CARD_FILE = "card.json"
PLAN_FILE = "plan.json"
EPISODES_FILE = "episodes.jsonl"
DROPS_FILE = "drops.jsonl"
LOCK_FILE = ".lock"
#: How many times (10 ms apart) a runner refused a card reads an empty lock file for the
#: holder's pid: the holder writes it just after taking the lock (a writer older than the pid
#: never does).
LOCK_PID_READS = 10
RECORD_FILES = (EPISODES_FILE, DROPS_FILE)
#: While a session runs: one line per fsync, the checksums of both files as then synced
#: (with the CRCs of the lines since the line before, or, while a read-back process takes
#: those, null: they are in its ``crc_sidecar``), so a resume after a crash verifies every
#: line up to the last fsync, not only those before the session began.
JOURNAL_FILE = ".checkpoints.jsonl"
CardStatus = Literal["running", "interrupted", "complete"]
#: The ``card.json`` keys ``close`` computes from the files on disk; absent while running.
SUMMARY_KEYS: tuple[str, ...] = ("updated_at", "files", "graders", "accounting", "views")
#: While a session runs, ``card.json`` holds instead the checksums of what the two files
#: held when it began: a resume after a crash verifies the files still begin with that.
CHECKPOINT_KEY = "checkpoint"
#: Lines go to the disk thread in hand-overs of at least this many bytes, or this often: a
#: kill -9 loses what was not handed over (at most ``FLUSH_SECONDS`` of episodes, which a
#: resume runs again). Each hand-over costs the run's thread a few GIL hand-offs to that
#: thread (it holds the GIL only between its calls that let go of it: writing, hashing), and
#: the lines wait in a buffer that is reused (``JsonlAppender``) and whose every new page
#: costs the run a page fault. For the oracle's 10,000 math episodes (25 MB), 2 MiB
#: hand-overs cost the run's thread 61-72 waits for the GIL and 4.3-4.7 ms off its core,
#: against 95-119 and 5.9-9.1 ms for 1 MiB ones, for some 1,900 page faults (8 MiB ones
#: cost 9,000); the card cost 0.2-2.4 points less all in, in five alternating sittings of
#: 12-15 runs a side. Near the plan's end lines are handed over at every commit
#: (``CardWriter._in_last_stretch``), so that close finds few left for the read-back process.
FLUSH_BYTES = 2 << 20
#: The episode file's buffers: a hand-over and a batch or two more.
BUFFER_BYTES = FLUSH_BYTES + (FLUSH_BYTES >> 2)
FLUSH_SECONDS = 0.25
#: How often the read-back process's pipe is drained of what it says (its progress, a few
#: dozen bytes at most every ``readback.POLL_SECONDS``: the pipe holds a minute of it).
DRAIN_SECONDS = 1.0
#: A card is built under this prefix beside its directory and renamed into place.
_STAGING = ".creating-"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class CardWriter:
    """Owns one card directory while a run (or a resumed run) writes to it: the runner's
    ``EpisodeSink`` for a card. Open one with ``create`` or ``resume`` (not the constructor),
    ``add`` each outcome and ``commit`` at each batch boundary, and ``close`` it once, as
    ``complete`` or ``interrupted``. It holds an exclusive lock on the directory until
    ``close``: a second writer on the same card gets ``CardLockedError`` naming the first's
    pid. ``done`` holds the plan ids the card already records (a resume plays only the
    others), and ``plan`` the plan's entries, read back from a file (``PlanFile``) until
    ``close``.

    Lines are written and synced by a thread of the writer's own (``DiskThread``), at most
    ``fsync_seconds`` apart, each sync followed by a checkpoint a resume after a crash
    verifies; a write that failed is raised by the next ``commit``.
    """

    def __init__(
        self,
        directory: Path,
        card: dict[str, Any],
        plan: PlanFile,
        done: set[str],
        fsync_seconds: float,
        lock: int | None = None,
        verified: Mapping[str, JsonlContents[Any] | FoldedJsonl] | None = None,
        read_back: bool | None = None,
        staging: tuple[Path, bytes] | None = None,
    ) -> None:
        """``card``: ``card.json``'s content, without the plan's entries (``plan``, spooled
        as ``plan.json`` holds them: for a new card, that file itself); ``verified``: the two
        files as a resume read and checked them (new card: none); ``read_back``: as
        ``create`` takes it; ``staging``: for a new card, the directory it is built in and
        its ``card.json`` (``store.json_bytes``), which the disk thread puts in place first
        (``_publish``)."""
        self.directory = directory
        self.card = card
        self.plan = plan
        self.done = done  # plan ids already recorded (non-empty on resume)
        self._lock = _lock(directory) if lock is None else lock
        verified = verified or {}
        self._fsync_seconds = fsync_seconds
        self._last_sync = self._last_flush = self._last_drain = time.monotonic()
        self._closed = False
        self._read_back: ReadBack | None = None
        #: Whether close took its summary from the read-back process (it read exactly what
        #: was written); if not, why not (None: there was none).
        self.read_back_used = False
        self.read_back_refused: str | None = None
        self._planned = card["plan"]["count"]
        self._written = 0  # outcomes added this session (``sessions[-1].written`` at close)
        wants_read_back = self._planned >= READBACK_MIN_EPISODES if read_back is None else read_back
        if wants_read_back and staging is None:
            self._start_read_back()
        # With a read-back process, the CRC of each line is its to take (``crc_sidecar``); a
        # new card's is started once the card is in place (``_publish``).
        line_crcs = self._read_back is None if staging is None else not wants_read_back
        where = directory if staging is None else staging[0]
        #: Where a new card is built until ``_publish`` puts it in place (None from then on).
        self._staging = None if staging is None else staging[0]
        self._disk = DiskThread()
        self._episodes = JsonlAppender(
            where / EPISODES_FILE,
            verified.get(EPISODES_FILE),
            self._disk,
            line_crcs=line_crcs,
            buffer_bytes=BUFFER_BYTES,
        )
        self._drops = JsonlAppender(where / DROPS_FILE, verified.get(DROPS_FILE), self._disk, line_crcs=line_crcs)
        self._journal = JsonlAppender(where / JOURNAL_FILE)  # written by jobs on the disk thread
        if staging is not None:
            self._disk.submit(partial(self._publish, staging[1], wants_read_back))

    def _start_read_back(self) -> bool:
        """Start the read-back process on the card in place; False when it cannot be started
        (then close reads the files in this process, as for a small card)."""
        with contextlib.suppress(OSError):
            self._read_back = ReadBack.start(
                *(self.directory / name for name in (CARD_FILE, PLAN_FILE, EPISODES_FILE, DROPS_FILE))
            )
        return self._read_back is not None

    def _publish(self, card_json: bytes, read_back: bool) -> None:
        """A new card's first job on the disk thread: its ``plan.json`` (written by
        ``create`` as the plan was generated) synced and its ``card.json`` written and synced
        in the staging directory, which is then renamed into place, and the read-back process
        started on it. Every line is written by a later job on the same thread, so none
        reaches a file before the card is in place, and a crash leaves either no card or a
        whole one.

        Why on this thread and not in ``create``: syncing the 3 MB plan of a 10,000-episode
        card, the renames and starting the process are milliseconds that the run need not
        wait for. A failure here (another process created the directory meanwhile, a full
        disk) is raised by the next ``commit``, and ``close`` then removes the staging
        directory."""
        staging = self._staging
        assert staging is not None  # only a new card is published, once
        os.fsync(self.plan.fileno())  # nothing reads the staging directory
        write_synced(staging / CARD_FILE, card_json)
        fsync_directory(staging)
        try:
            os.rename(staging, self.directory)  # replaces an empty directory in one step
        except OSError as error:
            raise FileExistsError(f"{self.directory} is not empty: another run created it ({error.strerror})") from None
        self._staging = None
        fsync_directory(self.directory.parent)
        if read_back and not self._start_read_back():
            self._episodes.keep_line_crcs()  # no line was written yet: the journal has them all
            self._drops.keep_line_crcs()

    # -- opening --------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        directory: Path,
        *,
        config: dict[str, Any],
        plan: Iterable[PlannedEpisode],
        provenance: dict[str, Any],
        fsync_seconds: float = 1.0,
        read_back: bool | None = None,
    ) -> CardWriter:
        """A new card at ``directory`` for ``plan`` (its entries are generated as they are
        written to ``plan.json``: ``frostgym.run.plan.iter_plan``), with ``config`` (``card_config``: its
        ``identity`` is what a resume must match) and ``provenance`` (agent, envs, packages,
        git, host) in ``card.json``. The directory is built beside ``directory`` and renamed
        into place, so a crash while creating leaves either no card or a whole one (with its
        plan), never a directory nothing can use. ``read_back``:
        whether a process of its own reads the files back while the run writes them, so
        close has little left to read (``frostgym.cards.readback``; None: when the plan has
        at least ``READBACK_MIN_EPISODES`` episodes). Raises ``FileExistsError`` when
        ``directory`` is not empty (or, when another process creates a card there
        meanwhile, the first ``commit`` does), ``TypeError`` for a value in ``config`` or
        ``provenance`` that no JSON holds, and ``CardLockedError`` when another process holds
        it, and what generating the plan raises (nothing of the card left). The card is put
        in place by the writer's disk thread, before any of its lines (``_publish``):
        ``wait_until_in_place`` waits for that."""
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise FileExistsError(f"{directory} is not empty: pass --resume to finish the card there, or a new --out")
        card = {
            "schema": CARD_SCHEMA,
            "status": "running",
            "frostgym_version": __version__,
            "created_at": _now(),
            "config": config,
            "seeding": {"run_seed": config["identity"]["seed"], **SEEDING},
            "plan": {"sha256": "", "count": 0},  # its entries: ``plan.json``; these once it is written
            **provenance,
            "sessions": [{"started_at": _now(), "ended_at": None, "resumed": False, "written": 0}],
            CHECKPOINT_KEY: {name: parse_jsonl(Path(name), b"").manifest() for name in RECORD_FILES},
        }
        json_bytes(card)  # a value no JSON holds is refused here, before any file
        directory.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned_builds(directory)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}{_STAGING}", dir=directory.parent))
        lock = _lock(staging)
        handle: IO[bytes] | None = None
        try:
            for name in RECORD_FILES:
                (staging / name).touch()
            handle = (staging / PLAN_FILE).open("w+b")
            spooled = PlanFile.write(plan, handle)  # nothing reads the staging directory
            card["plan"] = {"sha256": spooled.sha256, "count": len(spooled)}
            writer = cls(
                directory,
                card,
                spooled,
                set(),
                fsync_seconds,
                lock,
                read_back=read_back,
                staging=(staging, json_bytes(card)),
            )
        except BaseException:
            if handle is not None:
                handle.close()
            os.close(lock)
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return writer

    @classmethod
    def resume(
        cls,
        directory: Path,
        *,
        config: dict[str, Any],
        plan: Iterable[PlannedEpisode],
        fsync_seconds: float = 1.0,
        read_back: bool | None = None,
    ) -> CardWriter:
        """Reopen the card at ``directory`` to finish its plan. ``config``'s identity and
        ``plan`` (generated as it is spooled to a file beside the card's, for its hash:
        ``frostgym.run.plan.iter_plan``) must be the card's (``CardMismatchError`` naming what differs); its
        execution options and ks replace the card's. The two files must hold exactly what
        the card recorded at its last close (or begin with what they held when the crashed
        session began, up to its last checkpoint): an edited, shortened or deleted file is
        refused with ``CardCorruptError`` naming the file and line, as is a directory with
        no card. The only damage mended is a partial last line left by a crash, which is
        cut off (that episode runs again). ``CardLockedError`` when another process holds it.
        ``read_back`` as for ``create``."""
        if not (directory / CARD_FILE).exists():
            raise CardCorruptError(f"{directory} holds no card ({CARD_FILE} is missing): start it without --resume")
        card = read_card_json(directory, entries=False)
        stored, asked = card["config"]["identity"], config["identity"]
        if stored != asked:
            changed = sorted(k for k in set(stored) | set(asked) if stored.get(k) != asked.get(k))
            detail = ", ".join(f"{k}: card has {stored.get(k)!r}, asked {asked.get(k)!r}" for k in changed)
            raise CardMismatchError(f"{directory} was planned with different options ({detail})")
        spooled = PlanFile.write(plan, tempfile.TemporaryFile(dir=directory))  # noqa: SIM115 (it closes it)
        try:
            lock, contents, done = cls._reopen(directory, card, spooled)
        except BaseException:
            spooled.close()
            raise
        digest = spooled.sha256
        card["plan"] = {"sha256": digest, "count": len(spooled)}  # card.json's: the entries are plan.json's
        card["config"]["execution"] = config["execution"]
        card["config"]["ks"] = config["ks"]
        card["status"] = "running"
        card["schema"] = CARD_SCHEMA
        for stale in SUMMARY_KEYS:  # recomputed at close
            card.pop(stale, None)
        card[CHECKPOINT_KEY] = {name: c.manifest() for name, c in contents.items()}
        card["sessions"].append({"started_at": _now(), "ended_at": None, "resumed": True, "written": 0})
        write_json_atomic(directory / CARD_FILE, card)  # the new checkpoint first, then the old journal goes
        (directory / JOURNAL_FILE).unlink(missing_ok=True)
        return cls(directory, card, spooled, done, fsync_seconds, lock, contents, read_back)

    @staticmethod
    def _reopen(
        directory: Path, card: Mapping[str, Any], plan: PlanFile
    ) -> tuple[int, dict[str, FoldedJsonl], set[str]]:
        """``resume``'s checks of the card at ``directory`` (``card``: its manifest, without
        the plan's entries) against ``plan``, the plan recomputed: its lock, its files as
        verified and the plan ids they record. An older card's ``plan.json`` is written."""
        if card["plan"]["sha256"] != plan.sha256:
            if card["schema"] == CARD_SCHEMA:
                read_card_json(directory)  # an edited plan.json is named as such (that reads all of it)
            raise CardMismatchError(f"{directory}: the plan recomputed from its options differs (package change?)")
        if card["schema"] == CARD_SCHEMA and card["plan"]["count"] != len(plan):  # as read_card_json refuses it
            raise CardCorruptError(
                f"{directory / PLAN_FILE} does not hold the {card['plan']['count']} entries card.json counts"
            )
        lock = _lock(directory)  # before repairing: another runner may still be writing
        try:
            contents, recorded = _verified_files(directory, card)
            check_ids(recorded, (p.plan_id for p in plan))
        except BaseException:
            os.close(lock)
            raise
        if card["schema"] != CARD_SCHEMA:  # an older card, whose card.json held the entries: /4 from here
            write_atomic(directory / PLAN_FILE, plan.data())  # their sha256 is the card's (checked above)
        return lock, contents, set(recorded)

    # -- the EpisodeSink interface ---------------------------------------------------------
    def add(self, outcome: Record) -> None:
        """Queue one outcome for the next commit. An outcome whose content no JSON can
        hold (nothing should produce one: envs sanitize what they return) becomes an
        ``infra_error`` drop without its trajectory, naming why: one episode's content
        never stops the run or leaves the card unwritable."""
        try:
            if isinstance(outcome, EpisodeRecord):
                self._episodes.append_line(outcome.encode(dumps_line))
            else:
                self._drops.append(outcome)
        except (TypeError, ValueError, RecursionError) as error:
            self._drops.append(_unwritable(outcome, error))
        self._written += 1

    def commit(self) -> None:
        """A batch boundary: hand the lines added since the last hand-over to the disk
        thread once they are ``FLUSH_BYTES`` or ``FLUSH_SECONDS`` old (near the plan's
        end, at every commit), and every ``fsync_seconds`` a checkpoint. Raises the error of
        a write that failed since the last commit (a full disk); the run stops there, and
        ``close`` can still close the card as ``interrupted``."""
        now = time.monotonic()
        due = now - self._last_sync >= self._fsync_seconds
        if (
            due
            or now - self._last_flush >= FLUSH_SECONDS
            or self._episodes.pending_bytes >= FLUSH_BYTES
            or self._in_last_stretch()
        ):
            self._last_flush = now
            self._episodes.flush()
            self._drops.flush()
        if due:
            self._last_sync = now
            self._disk.submit(self._checkpoint)
        if self._read_back is not None and now - self._last_drain >= DRAIN_SECONDS:
            self._last_drain = now
            self._read_back.drain()
        self._disk.check()

    def _in_last_stretch(self) -> bool:
        """Whether what is left of the plan is no more than the lines waiting to be handed
        over: then the run ends before the next regular hand-over, and handing them over now
        leaves close half as many for the read-back process to decode (at every commit from
        here the rest is halved again, down to the last commit's lines)."""
        pending = self._episodes.pending_lines + self._drops.pending_lines
        return pending > 0 and self._planned - len(self.done) - self._written <= pending

    def _checkpoint(self) -> None:
        """On the disk thread: both files durable, then the journal entry saying up to where."""
        if self._episodes.unsynced or self._drops.unsynced:
            self._episodes.sync()
            self._drops.sync()
            self._journal.append({EPISODES_FILE: self._episodes.checkpoint(), DROPS_FILE: self._drops.checkpoint()})
            self._journal.flush()
            self._journal.sync()

    def _sync(self) -> None:
        self._episodes.sync()
        self._drops.sync()

    # -- closing ---------------------------------------------------------------------------
    def close(self, status: CardStatus, agent: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write and sync what is left, then rewrite ``card.json`` (status ``status``, the
        agent's ``describe()``) with the summary ``summarize_card`` computes from the files
        on disk, release the card and return ``card.json``'s content (the plan's entries are
        ``plan.json``'s: ``read_card_json`` and ``load_card`` put them in). A second call
        returns it again. Raises ``OSError`` when the last writes or ``card.json`` cannot be
        written (the card stays resumable), and ``CardCorruptError`` as ``summarize_card``
        does."""
        if self._closed:
            return self.card
        self.wait_until_in_place()
        self._closed = True
        try:
            try:
                self._episodes.flush()
                self._drops.flush()
                self._disk.wait()
                if self._read_back is not None:  # it reads the last lines while they are synced
                    wrote = {"episode": self._episodes.wrote(), "drop": self._drops.wrote()}
                    self._read_back.ask(wrote, complete=status == "complete")
                self._disk.submit(self._sync)
                self._disk.wait()
            finally:
                self._disk.close()
            self._episodes.close()
            self._drops.close()
            if agent is not None:
                self.card["agent"] = dict(agent)
            self.card["sessions"][-1]["written"] = self._written
            self.card["sessions"][-1]["ended_at"] = _now()
            summary = self._read_back_summary(status)
            if summary is None:
                self._stop_read_back()  # of no more use: it would only take the core reading here needs
                # An interrupted run may have been cut mid-write (a full disk): that partial
                # line is an episode the resume runs again, not damage.
                torn: TornLine = "repair" if status != "complete" else "error"
                summary = _summarize(self.directory, JsonArrayFile(self.directory / PLAN_FILE), self.card, status, torn)
            self.card.update(summary)
            self.card.pop(CHECKPOINT_KEY, None)
            write_json_atomic(self.directory / CARD_FILE, self.card)
            self._journal.close()
            superseded = [self.directory / JOURNAL_FILE, *(crc_sidecar(self.directory / n) for n in RECORD_FILES)]
            for path in superseded:  # the checksums in card.json supersede them
                path.unlink(missing_ok=True)
        finally:
            self._stop_read_back()  # last: a process that answered has ended by now, and is reaped at once
            self.plan.close()
        os.close(self._lock)
        return self.card

    def wait_until_in_place(self) -> None:
        """Return once the card is in place at ``directory``: ``create`` returns before (its
        disk thread puts the card there, before any of its lines: ``_publish``). Raises what
        putting it there raised (``FileExistsError``: another process created a card there
        meanwhile; ``OSError``), the writer then closed and nothing of the card left."""
        if self._staging is not None:
            self._disk.settle()  # ``_publish`` is the first job
            if self._staging is not None:
                self._closed = True
                self._abandon(self._staging)

    def _abandon(self, staging: Path) -> NoReturn:
        """Close a card that was never put in place (``_publish`` failed): its thread
        stopped, its files closed, its staging directory removed, and the failure raised."""
        failure = self._disk.failure
        self._disk.close()
        for appender in (self._episodes, self._drops, self._journal):
            appender.close()
        self.plan.close()
        os.close(self._lock)
        assert failure is not None  # only a failed ``_publish`` leaves a card unplaced
        shutil.rmtree(staging, ignore_errors=True)
        raise failure

    def _stop_read_back(self) -> None:
        if self._read_back is not None:
            self._read_back.stop()

    def _read_back_summary(self, status: CardStatus) -> dict[str, Any] | None:
        """``summarize_card``'s result as the read-back process computed it from the files
        on disk, when there is one and it read exactly what was written; else None."""
        if self._read_back is None:
            return None
        reply = self._read_back.summary()
        if reply is None:
            self.read_back_refused = self._read_back.refused
            return None
        self.read_back_used = True
        files = reply["files"]
        return {
            "status": status,
            "updated_at": _now(),
            "files": {EPISODES_FILE: files["episode"], DROPS_FILE: files["drop"]},
            **{key: reply[key] for key in ("graders", "accounting", "views")},
        }


def _lock(directory: Path) -> int:
    """An exclusive lock on the card, so two runners never append to the same files. The
    lock file then holds this process's pid, so that a runner refused the card can name the
    process writing it. Raises ``CardLockedError`` (naming that pid) when another process
    holds the lock."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _lock_holder(fd)
        os.close(fd)
        who = "another frostgym process" if pid is None else f"another frostgym process, pid {pid}"
        raise CardLockedError(
            f"{directory} is being written by {who}: wait for it to end (or stop it), then run the command again",
            pid,
        ) from None
    with contextlib.suppress(OSError):  # a full disk: the lock holds all the same, only unnamed
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _lock_holder(fd: int) -> int | None:
    """The pid the lock file open at ``fd`` names, or None. Its holder writes it just after
    taking the lock, so an empty file is read again for a moment."""
    for _ in range(LOCK_PID_READS):
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return None
        if text:
            return int(text) if text.isdigit() else None
        time.sleep(0.01)
    return None


def _unwritable(outcome: Record, error: BaseException) -> DropRecord:
    reason = f"the episode's record could not be written ({type(error).__name__}: {error})"
    return drop_record(
        outcome,
        Drop("infra_error", "runner", reason),
        attempts=outcome.attempts,
        episode_id=outcome.episode_id,
        started_at=outcome.started_at,
        wall_seconds=outcome.wall_seconds,
    )


def _verified_files(directory: Path, card: Mapping[str, Any]) -> tuple[dict[str, FoldedJsonl], list[str]]:
    """Both files, checked against what ``card.json`` recorded: at the last close
    (``files``: they must hold exactly that) or when the crashed session began
    (``checkpoint``: they must begin with it), and the plan ids of their records (each
    decoded as far as its head, which is checked, and let go). A partial last line is cut
    off."""
    recorded = card.get("files") or card.get(CHECKPOINT_KEY)  # neither: a frostgym.card/1 card killed while running
    closed = "files" in card
    if not closed and recorded is not None:  # a crash: what the session had synced is in its journal
        journal = directory / JOURNAL_FILE
        entries = read_jsonl(journal, torn="ignore").records
        per_file = {name: [e.get(name) if isinstance(e, dict) else e for e in entries] for name in recorded}
        chained = {name: chain_checkpoints(recorded[name], per_file[name], journal) for name in recorded}
        recorded = {name: fill_unknown_crcs(m, crc_sidecar(directory / name)) for name, m in chained.items()}
    contents = {}
    plan_ids: list[str] = []
    for name, decode in HEAD_DECODERS.items():
        path = directory / name
        read = fold_jsonl(path, decode, lambda heads: plan_ids.extend(h.plan_id for h in heads), torn="ignore")
        if recorded is not None and (problem := manifest_problem(path, recorded[name], read, exact=closed)):
            raise CardCorruptError(
                f"{problem}: refusing to resume over it (restore the file, or start a new card with a new --out)"
            )
        if read.repaired_bytes:
            cut_torn_line(path, read.bytes)
        contents[name] = read
    return contents, plan_ids


def _remove_abandoned_builds(directory: Path) -> None:
    """Delete what a run killed while creating ``directory`` left beside it: a staging
    directory whose lock nobody holds (or that never got one and is a minute old)."""
    for staging in directory.parent.glob(f".{directory.name}{_STAGING}*"):
        try:
            fd = os.open(staging / LOCK_FILE, os.O_RDWR)
        except FileNotFoundError:
            if time.time() - staging.stat().st_mtime > 60:
                shutil.rmtree(staging, ignore_errors=True)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # another process is creating a card there right now
        finally:
            os.close(fd)
        shutil.rmtree(staging, ignore_errors=True)


def summarize_card(
    directory: Path, card: Mapping[str, Any], status: CardStatus, *, torn: TornLine = "error"
) -> dict[str, Any]:
    """What ``close`` adds to ``card.json`` (``SUMMARY_KEYS`` and ``status``), computed
    from the two record files on disk as they are now: their checksums, the accounting, the
    versions of the graders that scored the completed episodes, and every score view. Each
    record is read only as far as its head (``head_from_line``). ``card`` is the manifest
    (its plan and ``config.ks`` are read); a partial last line is handled as ``torn`` says
    (``ignore`` to look at a card whose run was killed). Raises ``CardCorruptError`` for a
    line that is not a record, a plan id recorded twice or not planned, a task with more
    records than the plan has episodes of it (a record's task edited), or ``status``
    ``complete`` with planned episodes not recorded."""
    return _summarize(directory, card["plan"]["episodes"], card, status, torn)


def _summarize(
    directory: Path,
    plan: Iterable[Mapping[str, Any]],
    card: Mapping[str, Any],
    status: CardStatus,
    torn: TornLine,
) -> dict[str, Any]:
    """``summarize_card`` of the card whose plan entries are ``plan`` (iterated more than
    once: ``Tally``), the record files read a block at a time into its tally."""
    with gc_paused():
        tally = Tally(plan, card["config"]["ks"], excluded_count(card["config"]))
        episodes = fold_jsonl(
            directory / EPISODES_FILE, HEAD_DECODERS[EPISODES_FILE], partial(tally.add, "episode"), torn=torn
        )
        drops = fold_jsonl(directory / DROPS_FILE, HEAD_DECODERS[DROPS_FILE], partial(tally.add, "drop"), torn=torn)
        return _summary(episodes, drops, tally, status)


def _summary(episodes: FoldedJsonl, drops: FoldedJsonl, tally: Tally, status: CardStatus) -> dict[str, Any]:
    return {
        "status": status,
        "updated_at": _now(),
        "files": {EPISODES_FILE: episodes.manifest(), DROPS_FILE: drops.manifest()},
        **tally.result(complete=status == "complete"),
    }


def read_card_json(directory: Path, *, entries: bool = True) -> dict[str, Any]:
    """``card.json`` with its plan's entries under ``plan.episodes`` (read from
    ``plan.json``, or from ``card.json`` itself in cards older than ``frostgym.card/4``),
    checked to hold what resume, replay and summary read from it, so an edited manifest is
    named in one line instead of surfacing as a ``KeyError``. Raises ``CardCorruptError``
    for a missing or unreadable file, one of the wrong shape, and a ``plan.json`` whose
    sha256 is not the plan's (edited).

    Without ``entries``, a ``frostgym.card/4`` card's ``plan.json`` is only hashed, a block
    at a time, and checked against its sha256 (``plan.episodes`` is then absent): what a
    reader that needs none of the entries reads (a resume, which recomputes them; the
    summary after a run), in the memory of a block where the entries of a
    1,000,000-episode plan take a gigabyte."""
    path = directory / CARD_FILE
    card = read_json(path)
    if problem := _manifest_shape_problem(card):
        raise CardCorruptError(f"{path}: {problem} (edited, or not a frostgym card?)")
    assert isinstance(card, dict)
    plan = card["plan"]
    if "episodes" not in plan:
        if not entries:
            _check_plan_file(directory / PLAN_FILE, plan["sha256"])
            return card
        plan["episodes"] = _read_plan_entries(directory / PLAN_FILE, plan["sha256"], plan["count"])
    plan.setdefault("count", len(plan["episodes"]))  # older cards count none
    if not all(isinstance(p, dict) and isinstance(p.get("plan_id"), str) for p in plan["episodes"]):
        raise CardCorruptError(f"{path}: a plan entry without a plan_id (edited, or not a frostgym card?)")
    return card


def _check_plan_file(path: Path, sha256: str) -> None:
    """``_read_plan_entries``'s checks of the file's sha256, without reading it whole."""
    hasher = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(STREAM_CHUNK):
                hasher.update(block)
    except FileNotFoundError as error:
        raise CardCorruptError(f"{path} is missing: the card's plan is not there") from error
    if hasher.hexdigest() != sha256:
        raise CardCorruptError(f"{path} does not match the plan's sha256 in card.json: edited after the run?")


def _read_plan_entries(path: Path, sha256: str, count: int) -> list[Any]:
    """The entries ``plan.json`` holds, checked against the sha256 and count ``card.json``
    recorded for them."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as error:
        raise CardCorruptError(f"{path} is missing: the card's plan is not there") from error
    if hashlib.sha256(data).hexdigest() != sha256:
        raise CardCorruptError(f"{path} does not match the plan's sha256 in card.json: edited after the run?")
    try:
        entries = orjson.loads(data)  # valid JSON as written, unless card.json's hash was edited to match
    except orjson.JSONDecodeError as error:
        raise CardCorruptError(f"{path} is not JSON ({error}): edited after the run?") from error
    if not isinstance(entries, list) or len(entries) != count:
        raise CardCorruptError(f"{path} does not hold the {count} entries card.json counts")
    return entries


def _manifest_shape_problem(card: Any) -> str | None:
    if not isinstance(card, dict):
        return "not a JSON object"
    if card.get("schema") not in READABLE_SCHEMAS:
        return f"schema is {card.get('schema')!r}, not one of {sorted(READABLE_SCHEMAS)}"
    config, plan = card.get("config"), card.get("plan")
    if not isinstance(config, dict) or not isinstance(config.get("identity"), dict):
        return "no config.identity object"
    if not isinstance(config.get("ks"), list):
        return "no config.ks list"
    if not (isinstance(plan, dict) and isinstance(plan.get("sha256"), str)):
        return "no plan with its sha256"
    if card["schema"] == CARD_SCHEMA:
        count = plan.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0 or "episodes" in plan:
            return "no plan count, or plan entries, which plan.json holds"
    elif not isinstance(plan.get("episodes"), list):
        return "no plan entries"
    if not isinstance(card.get("sessions"), list) or not card["sessions"]:
        return "no sessions"
    for key in ("files", CHECKPOINT_KEY):
        if key not in card:
            continue
        manifests = card[key]
        for name in RECORD_FILES:
            entry = manifests.get(name) if isinstance(manifests, dict) else None
            if not isinstance(entry, dict) or not entry.keys() >= _MANIFEST_FIELDS:
                return f"{key}.{name} lacks its checksums ({', '.join(sorted(_MANIFEST_FIELDS))})"
    return None


_MANIFEST_FIELDS = frozenset({"sha256", "bytes", "lines"})


def load_card(directory: Path, *, verify: bool = True) -> tuple[dict[str, Any], list[EpisodeRecord], list[DropRecord]]:
    """(``card.json``, completed episodes, drops) of the card in ``directory``, every line
    decoded to its typed record and checked (``decode_line``). With ``verify``, the files must match the checksums in
    ``card.json``; a card still running (or whose run was killed) has none yet, and its
    partial last line, if any, is left unread. Raises ``CardCorruptError`` naming the file
    and line (no card there, an edited file, a line that is not a record, a plan id
    recorded twice or not in the plan)."""
    if not (directory / CARD_FILE).exists():
        raise CardCorruptError(f"{directory} holds no card ({CARD_FILE} is missing)")
    card = read_card_json(directory)
    closed = "files" in card
    torn: TornLine = "error" if closed else "ignore"
    episodes = read_jsonl(directory / EPISODES_FILE, torn=torn, decode=_episode)
    drops = read_jsonl(directory / DROPS_FILE, torn=torn, decode=_drop)
    if verify and closed:
        for name, contents in ((EPISODES_FILE, episodes), (DROPS_FILE, drops)):
            if problem := manifest_problem(directory / name, card["files"][name], contents, exact=True):
                raise CardCorruptError(
                    f"{problem} (it does not match the checksum in card.json: edited after the run?)"
                )
    plan_ids = {p["plan_id"] for p in card["plan"]["episodes"]}
    check_ids([r.plan_id for r in episodes.records] + [r.plan_id for r in drops.records], plan_ids)
    return card, episodes.records, drops.records


def load_card_summary(directory: Path) -> tuple[dict[str, Any], list[DropRecord]]:
    """(``card.json``, drops) of the closed card in ``directory``: what its summary shows
    (``frostgym.cards.summary.print_summary``), read without its episodes or its plan's
    entries (``read_card_json`` without ``entries``), so it takes the memory of the drops
    whatever the card's size, where ``load_card`` holds every record. The drops are
    decoded and checked, and their file checked against ``card.json``'s checksums, as
    ``load_card`` does. Raises ``CardCorruptError`` as ``load_card`` does for them."""
    if not (directory / CARD_FILE).exists():
        raise CardCorruptError(f"{directory} holds no card ({CARD_FILE} is missing)")
    card = read_card_json(directory, entries=False)
    closed = "files" in card
    drops = read_jsonl(directory / DROPS_FILE, torn="error" if closed else "ignore", decode=_drop)
    if closed and (problem := manifest_problem(directory / DROPS_FILE, card["files"][DROPS_FILE], drops, exact=True)):
        raise CardCorruptError(f"{problem} (it does not match the checksum in card.json: edited after the run?)")
    return card, drops.records


def stream_records(
    directory: Path, card: Mapping[str, Any], plan_ids: Container[str]
) -> Iterator[tuple[bytes, Record]]:
    """Every record of the closed card in ``directory`` (``card``: its ``read_card_json``),
    episodes then drops, in file order, as (its line, the typed record), streamed
    (``store.stream_jsonl``): what a reader that reduces each record as it comes (compare,
    report) reads, without holding them all. Each record is decoded and checked as
    ``load_card`` does (``decode_line``), each file against its manifest, and each plan id
    against ``plan_ids`` and the ids before it. Raises ``CardCorruptError`` naming the file
    (and line) for any of these."""
    seen: set[str] = set()
    for name, decode in RECORD_DECODERS.items():
        path = directory / name
        for line, record in stream_jsonl(path, decode, card["files"].get(name)):
            plan_id = record.plan_id
            if plan_id not in plan_ids:
                raise CardCorruptError(f"{path}: episode {plan_id!r} is not in the card's plan")
            if plan_id in seen:
                raise CardCorruptError(f"{path}: episode {plan_id!r} is recorded twice")
            seen.add(plan_id)
            yield line, record


def _episode(line: bytes) -> EpisodeRecord:
    record = decode_line(line, "episode")
    assert isinstance(record, EpisodeRecord)
    return record


def _drop(line: bytes) -> DropRecord:
    record = decode_line(line, "drop")
    assert isinstance(record, DropRecord)
    return record


def _episode_head(line: bytes) -> Head:
    return head_from_line(line, "episode")


def _drop_head(line: bytes) -> Head:
    return head_from_line(line, "drop")


#: How every reader decodes each record file: whole records, checked.
RECORD_DECODERS: dict[str, Callable[[bytes], Record]] = {EPISODES_FILE: _episode, DROPS_FILE: _drop}
#: How resume and close read each record file: only as far as each record's head.
HEAD_DECODERS: dict[str, Callable[[bytes], Head]] = {EPISODES_FILE: _episode_head, DROPS_FILE: _drop_head}
