"""Read a card once for its report: its facts, and its record lines written out as the
trajectory browser's chunks.

Why chunks: a 100,000-episode card holds hundreds of MB of trajectories, and a viewer that
loads them all at once is what inspect's log viewer is faulted for (it runs out of memory
on big logs). The record lines are grouped ``CHUNK_RECORDS`` at a time in row order (the
facts' order: episodes, then drops), gzip-compressed and written as small scripts
(``data/c<card>/chunk-<n>.js``) that hand their bytes to the page only when it asks for
them. Scripts, not JSON files: a page opened from disk may load a script beside it, but
may not ``fetch`` a file. The lines are the card's own bytes, so what the browser shows is
what the card holds, checked on the way against the card's manifest
(``frostgym.compare.reading``).
"""

from __future__ import annotations

import base64
import gzip
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frostgym.compare.reading import CardFacts, read_card_facts
from frostgym.core.episode import DropRecord, Record

#: Records per chunk: ~1.3 MB of JSON for math episodes, a fraction of that gzipped, so
#: opening an episode decodes one small file, and a 100,000-episode card is 200 files.
CHUNK_RECORDS = 500
#: gzip level of the chunks: 6 (zlib's default) is within a few percent of 9's size.
GZIP_LEVEL = 6


@dataclass(frozen=True)
class ReportCard:
    """One card as its report reads it: ``facts`` (what views and plots count), and per row
    (in the facts' order) what the facts leave out."""

    #: The card's name in the report (its directory's name, made unique).
    label: str
    #: Its number in the report: its data lives in ``data/c<number>/``.
    number: int
    facts: CardFacts
    #: Per row: the drop's stage (None for a completed episode).
    stages: tuple[str | None, ...]
    #: Per row: characters the agent wrote over all its turns (its replies' length, for
    #: agents that report no token counts).
    reply_chars: tuple[int, ...]
    #: Chunk files written: row r is record ``r % CHUNK_RECORDS`` of chunk ``r // CHUNK_RECORDS``.
    chunks: int


def read_report_card(directory: Path, label: str, number: int, data_dir: Path) -> ReportCard:
    """Read the card in ``directory`` (complete, matching its manifest: as ``frostgym
    compare`` reads it, raising the same errors) and write its chunks under
    ``data_dir/c<number>/``."""
    out = data_dir / f"c{number}"
    out.mkdir(parents=True, exist_ok=True)
    stages: list[str | None] = []
    chars: list[int] = []
    writer = _ChunkWriter(out, number)

    def observe(line: bytes, record: Record) -> None:
        stages.append(record.stage if isinstance(record, DropRecord) else None)
        chars.append(sum(_reply_chars(step.action) for step in record.steps))
        writer.add(line)

    try:
        facts = read_card_facts(directory, observe)
    finally:
        chunks = writer.close()
    return ReportCard(label, number, facts, tuple(stages), tuple(chars), chunks)


def chunk_script(card: int, chunk: int, records: list[bytes]) -> bytes:
    """One chunk file: a call that hands the page ``records`` (card lines, one JSON record
    each), newline-separated and gzipped, as base64. Lines, not a JSON array: the page
    searches a record's text without parsing it, and parses only the record it opens."""
    payload = gzip.compress(b"\n".join(records), compresslevel=GZIP_LEVEL, mtime=0)
    return b'frostgymChunk(%d,%d,"%s");\n' % (card, chunk, base64.b64encode(payload))


def _reply_chars(action: Any) -> int:
    if isinstance(action, str):
        return len(action)
    return 0 if action is None else len(str(action))


class _ChunkWriter:
    """Groups lines into chunks, compressing each on a worker thread (zlib lets go of the
    GIL), while the card is read on this one; chunks are written in order."""

    def __init__(self, directory: Path, card: int) -> None:
        self._directory = directory
        self._card = card
        self._lines: list[bytes] = []
        self._written = 0
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="frostgym-report-chunk")
        self._pending: list[Future[None]] = []

    def add(self, line: bytes) -> None:
        self._lines.append(line)
        if len(self._lines) == CHUNK_RECORDS:
            self._flush()

    def close(self) -> int:
        """Write the last chunk, wait for every one, and return how many there are."""
        try:
            if self._lines:
                self._flush()
            for future in self._pending:
                future.result()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
        return self._written

    def _flush(self) -> None:
        path = self._directory / f"chunk-{self._written}.js"
        lines, self._lines = self._lines, []
        self._pending.append(self._pool.submit(_write_chunk, path, self._card, self._written, lines))
        self._written += 1
        if len(self._pending) > 8:  # bounded: at most a few chunks of lines held at once
            self._pending.pop(0).result()


def _write_chunk(path: Path, card: int, chunk: int, lines: list[bytes]) -> None:
    path.write_bytes(chunk_script(card, chunk, lines))
