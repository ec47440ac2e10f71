"""One chunk of training documents against the eval index: what a worker process does.

Why its own module: this is the hot loop of a check, run once per chunk of a gigabyte, in
as many processes as there are cores; it must hold no state between chunks, so that the
merged result cannot depend on how the input was cut or how many workers ran.

For a chunk, the documents' tokens are laid end to end (a separator between documents, so
no window spans two) and every window length is hashed at once by numpy
(``ngrams.window_hashes``); a window is looked up by binary search in the eval side's
sorted hashes. What comes back is small: per task hit, its best share of grams in one
document and the grams seen, and for the few documents that pass the shingle prefilter
(``Parameters.prefilter``), the tasks their MinHash signature is near, with the estimated
similarity. A chunk that is one window of a long document (``windows``) gives its grams
seen and its MinHash neighbours only: shares are per document, so the merge takes them once
it has united the hits of all the document's windows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from frostgym.contamination.index import GramTable, ScanIndex
from frostgym.contamination.ngrams import SEPARATOR, Hashes, shingles, tokens, window_hashes
from frostgym.contamination.reading import Chunk, parse_chunk
from frostgym.contamination.windows import Part

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


@dataclass
class ChunkResult:
    """What a chunk gave. ``best_tasks``/``best_shares``/``best_lines``: for each task with
    a gram in the chunk, the highest share of its grams one document held, and that
    document's line (the first, on a tie); ``seen``: the gram incidences
    (``GramTable``) found; ``near``: per task index, its best (similarity, line).
    ``window_of``: for a window of a long document, its line (0: not one), and ``closes``
    whether it is the document's last; such a result has ``seen`` but no ``best_*``."""

    lines: int = 0
    documents: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    examples: list[tuple[int, str]] = field(default_factory=list)
    best_tasks: Ints = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    best_shares: Floats = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    best_lines: Ints = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    seen: Ints = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    minhashed: int = 0
    near: dict[int, tuple[float, int]] = field(default_factory=dict)
    window_of: int = 0
    closes: bool = False


def scan_chunk(index: ScanIndex, chunk: Chunk, text_field: str) -> ChunkResult:
    """Parse ``chunk`` (``reading.parse_chunk``) and scan its documents (or its window)."""
    if chunk.part is not None:
        return scan_part(index, chunk.first, chunk.part)
    parsed = parse_chunk(chunk, text_field)
    result = scan_documents(index, parsed.documents)
    result.lines = parsed.lines
    result.skipped = parsed.skipped
    result.examples = parsed.examples
    return result


def scan_documents(index: ScanIndex, documents: list[tuple[int, str]]) -> ChunkResult:
    """Scan ``documents`` ((line, text) pairs, lines ascending) against ``index``."""
    result = ChunkResult(documents=len(documents))
    if not documents:
        return result
    laid: list[bytes] = []
    starts: list[int] = []
    for _, text in documents:
        starts.append(len(laid))
        laid += tokens(text)
        laid.append(SEPARATOR)
    starts.append(len(laid))  # where a next document would start: ends are starts[1:] - 1
    _scan(index, laid, starts, [line for line, _ in documents], result)
    return result


def scan_part(index: ScanIndex, line: int, part: Part) -> ChunkResult:
    """Scan one window of the long document on ``line``: the grams it holds (``seen``) and
    its MinHash neighbours; the document is counted with its last window."""
    result = ChunkResult(lines=int(part.last), documents=int(part.last), window_of=line, closes=part.last)
    laid = [*part.tokens(), SEPARATOR]
    _scan(index, laid, [0, len(laid)], [line], result)
    return result


def _scan(index: ScanIndex, laid: list[bytes], starts: list[int], numbers: list[int], result: ChunkResult) -> None:
    """Scan the documents laid end to end in ``laid`` (document ``d``'s tokens from
    ``starts[d]``, a separator after each; its line ``numbers[d]``) into ``result``."""
    begin = np.array(starts, dtype=np.int64)
    lines = np.array(numbers, dtype=np.int64)
    ids = index.vocabulary.lookup(laid)
    shingle = index.parameters.shingle
    windows = window_hashes(index.vocabulary.values, ids, [*index.grams, shingle])

    found_docs: list[Ints] = []
    found_grams: list[Hashes] = []
    for length, grams in index.grams.items():
        hashes, valid = windows[length]
        at = grams.members(hashes, valid)
        found_docs.append(np.searchsorted(begin, at, side="right") - 1)
        found_grams.append(hashes[at])
    if found_docs and result.window_of:
        incidences, _ = index.table.incidences(np.unique(np.concatenate(found_grams)))
        result.seen = np.unique(incidences)
    elif found_docs:
        _tally(index.table, lines, np.concatenate(found_docs), np.concatenate(found_grams), result)

    hashes, valid = windows[shingle]
    at = index.shingle_hashes.members(hashes, valid)
    if len(at) == 0:
        return
    doc_of = np.searchsorted(begin, at, side="right") - 1  # ascending, as ``at`` is
    docs, first = np.unique(doc_of, return_index=True)
    bounds = [*first.tolist(), len(at)]  # a document's hits are one slice of ``at``
    for doc, low, high in zip(docs.tolist(), bounds, bounds[1:], strict=False):
        start, end = starts[doc], starts[doc + 1] - 1  # end: the separator
        windows_of_doc = hashes[start : end - shingle + 1]
        members = len(np.unique(hashes[at[low:high]]))
        if members < index.parameters.prefilter * len(np.unique(windows_of_doc)):
            continue
        result.minhashed += 1
        line = int(lines[doc])
        for task, similarity in index.near.similar(shingles(laid[start:end], shingle)):
            best = result.near.get(task)
            if best is None or similarity > best[0]:
                result.near[task] = (similarity, line)


def _tally(table: GramTable, lines: Ints, docs: Ints, grams: Hashes, result: ChunkResult) -> None:
    """From the (document, gram) hits of a chunk: each task's best share in one document,
    and the incidences seen, all in numpy (a gram many tasks hold multiplies the work)."""
    order = np.lexsort((grams, docs))
    docs, grams = docs[order], grams[order]
    distinct = np.ones(len(docs), dtype=np.bool_)
    distinct[1:] = (docs[1:] != docs[:-1]) | (grams[1:] != grams[:-1])
    docs, grams = docs[distinct], grams[distinct]
    incidences, source = table.incidences(grams)
    result.seen = np.unique(incidences)
    task_count = len(table.counts)
    keys, found = np.unique(docs[source] * task_count + table.holders[incidences], return_counts=True)
    key_docs, key_tasks = keys // task_count, keys % task_count
    shares = found / table.counts[key_tasks]
    order = np.lexsort((key_docs, -shares, key_tasks))  # per task: the highest share, then the first line
    first = np.ones(len(order), dtype=np.bool_)
    first[1:] = key_tasks[order][1:] != key_tasks[order][:-1]
    picked = order[first]
    result.best_tasks, result.best_shares, result.best_lines = (
        key_tasks[picked],
        shares[picked],
        lines[key_docs[picked]],
    )


# -- in a worker process -----------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def init_worker(index: ScanIndex, text_field: str) -> None:
    """A worker's initializer: keep the index it scans against."""
    _WORKER["index"] = index
    _WORKER["text_field"] = text_field


def scan_in_worker(chunk: Chunk) -> ChunkResult:
    """``scan_chunk`` with the index ``init_worker`` kept."""
    return scan_chunk(_WORKER["index"], chunk, _WORKER["text_field"])
