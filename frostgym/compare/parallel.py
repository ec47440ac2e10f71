"""Two large cards read at once: the candidate's records by a process of its own.

Why: reading a card (decoding, checking and reducing every record) is most of a comparison's
time, it is Python work on one core, and the two cards are independent. So for two large
cards the candidate's record files are read by a second process while this one reads the
base, and what crosses back is the candidate's columns (``EpisodeFacts``: arrays, a few MB
for 100k episodes), never its records. (Shipping a Python object per episode back would cost more than
the second core saves.)

It is a speed-up, never a second source of truth: the columns are taken only when the
process read the same ``card.json`` this process reads (its files' manifests, plan hash,
size and modification time) and finished without error; otherwise (it could not start,
died, or found anything wrong) this process reads the candidate itself, and raises what that
raises. Errors come in the order of a sequential read: the base's first.

Run as ``python -m frostgym.compare.parallel CARD_DIR`` by ``ReaderProcess.start`` (a fresh
interpreter: it inherits no threads, and never imports the caller's main module); it writes
the pickled columns to stdout and exits 0, or exits 1.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from frostgym.cards.store import gc_paused
from frostgym.compare.facts import EpisodeFacts
from frostgym.compare.reading import CardFacts, read_card_facts, read_plan, read_records

#: Cards whose record files both hold at least this many bytes are read at once: below,
#: starting the second process (mostly its imports) costs more than it saves.
PARALLEL_MIN_BYTES = 16 << 20
_RECORD_FILES = ("episodes.jsonl", "drops.jsonl")

Fingerprint = tuple[int, int, Any, Any]


def read_both(base: Path, cand: Path, *, min_bytes: int = PARALLEL_MIN_BYTES) -> tuple[CardFacts, CardFacts]:
    """Both cards' facts, as ``read_card_facts`` of each, one after the other, gives them
    (and raising what that raises, the base's errors first); when both cards' record files
    hold at least ``min_bytes`` and a second core is there, the candidate's are read by a
    ``ReaderProcess`` meanwhile."""
    parallel = _cores() > 1 and min(_record_bytes(base), _record_bytes(cand)) >= min_bytes
    reader = ReaderProcess.start(cand) if parallel else None
    try:
        base_facts = read_card_facts(base)
        if reader is None:
            return base_facts, read_card_facts(cand)
        with gc_paused():
            card, plan = read_plan(cand)
            read = reader.result(fingerprint(cand, card))
            facts, rows = read if read is not None else read_records(cand, card, plan)
        return base_facts, CardFacts(cand, card, plan, facts, rows)
    finally:
        if reader is not None:
            reader.stop()


class ReaderProcess:
    """A card's records read by a process of its own: ``start`` it, take its ``result``
    (or None: then read the card in this process), ``stop`` it on the way out."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process

    @classmethod
    def start(cls, directory: Path) -> ReaderProcess | None:
        """The process reading the card in ``directory``, or None when it cannot start."""
        root = str(Path(__file__).resolve().parents[2])  # where this frostgym is imported from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "frostgym.compare.parallel", str(directory)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            return None
        return cls(process)

    def result(self, expected: Fingerprint) -> tuple[EpisodeFacts, dict[str, int]] | None:
        """The card's columns and the row of each plan id, once the process is done: None
        when it failed, or read another ``card.json`` than the one ``expected`` describes
        (``fingerprint``)."""
        try:
            out, _ = self._process.communicate()
        except (OSError, ValueError):
            return None
        if self._process.returncode != 0:
            return None
        try:
            found, facts, rows = pickle.loads(out)
        except Exception:  # a truncated or foreign stream: read the card here instead
            return None
        if found != expected or not isinstance(facts, EpisodeFacts) or not isinstance(rows, dict):
            return None
        return facts, rows

    def stop(self) -> None:
        """End the process if it still runs (this process raised before taking its result)."""
        if self._process.poll() is None:
            with contextlib.suppress(OSError):
                self._process.kill()
        with contextlib.suppress(OSError, ValueError):
            self._process.communicate()


def fingerprint(directory: Path, card: Mapping[str, Any]) -> Fingerprint:
    """What tells two reads of a card's ``card.json`` apart: its size and modification time,
    its record files' manifests and its plan's hash."""
    stat = (directory / "card.json").stat()
    return stat.st_size, stat.st_mtime_ns, card.get("files"), card["plan"].get("sha256")


def _record_bytes(directory: Path) -> int:
    total = 0
    for name in _RECORD_FILES:
        with contextlib.suppress(OSError):
            total += (directory / name).stat().st_size
    return total


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def main(argv: Sequence[str]) -> int:
    """The reader process: read the card, write its fingerprint, columns and rows."""
    gc.disable()  # a short life of acyclic data
    directory = Path(argv[0])
    try:
        card, plan = read_plan(directory)
        facts, rows = read_records(directory, card, plan)
        out = pickle.dumps((fingerprint(directory, card), facts, rows), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # the caller reads the card itself and raises what that raises
        return 1
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
