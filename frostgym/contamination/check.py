"""A whole contamination check: index the eval side, stream the training side through the
scanners, merge what they found into one figure set per task.

Why its own module: it is the only place that knows the order of things. The eval side is
small (thousands of tasks), so it is what gets indexed; the training side is streamed once,
in chunks (``reading``), each scanned on its own (``scan``), in this process or in worker
processes with a few chunks in flight, so memory stays bounded whatever the file's size.
Chunk results are merged in input order and each merge is a maximum or a union, so the
report is the same for any number of workers and any chunk size. The windows of a long
document (``windows``) come in order too; their grams are united until its last one, and
only then are its per-task shares taken, so a document's share does not depend on where it
was cut.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np

from frostgym.contamination.evalset import EvalTask
from frostgym.contamination.index import EvalIndex, build_index
from frostgym.contamination.reading import MAX_EXAMPLES, Chunk, TrainingSource
from frostgym.contamination.report import Parameters, Report, TaskOverlap, TrainingInfo, summarize
from frostgym.contamination.scan import (
    ChunkResult,
    init_worker,
    scan_chunk,
    scan_documents,
    scan_in_worker,
    scan_part,
)
from frostgym.contamination.windows import WINDOW, windows

#: Chunks in flight per worker: one being scanned, one waiting, so no worker idles.
IN_FLIGHT_PER_WORKER = 2


class _Merge:
    """The figures of every task so far: gram incidences seen anywhere, best per-document
    n-gram share and best MinHash similarity, each with its line (0: none); ``open``: the
    incidences seen so far in the long document whose windows are coming in."""

    def __init__(self, index: EvalIndex) -> None:
        self.index = index
        count = len(index.tasks)
        self.seen = np.zeros(len(index.scan.table.holders), dtype=np.bool_)
        self.open = np.zeros(len(index.scan.table.holders), dtype=np.bool_)
        self.best_doc = np.zeros(count, dtype=np.float64)
        self.best_doc_line = np.zeros(count, dtype=np.int64)
        self.best_near = [0.0] * count
        self.best_near_line = [0] * count
        self.lines = self.documents = self.minhashed = 0
        self.skipped: Counter[str] = Counter()
        self.examples: list[tuple[int, str]] = []

    def add(self, result: ChunkResult) -> None:
        self.lines += result.lines
        self.documents += result.documents
        self.minhashed += result.minhashed
        self.skipped.update(result.skipped)
        self.examples += result.examples[: MAX_EXAMPLES - len(self.examples)]
        self.seen[result.seen] = True
        if result.window_of:
            self.open[result.seen] = True
            if result.closes:
                self._close(result.window_of)
        better = result.best_shares > self.best_doc[result.best_tasks]  # strictly: the first line keeps a tie
        tasks = result.best_tasks[better]
        self.best_doc[tasks] = result.best_shares[better]
        self.best_doc_line[tasks] = result.best_lines[better]
        for task, (similarity, line) in result.near.items():
            if similarity > self.best_near[task]:
                self.best_near[task], self.best_near_line[task] = similarity, line

    def _close(self, line: int) -> None:
        """The long document on ``line`` has ended: each task's share of its grams in it."""
        table = self.index.scan.table
        found = np.bincount(table.holders[self.open], minlength=len(self.index.tasks))
        tasks = np.flatnonzero(found)
        shares = found[tasks] / table.counts[tasks]
        better = shares > self.best_doc[tasks]
        self.best_doc[tasks[better]] = shares[better]
        self.best_doc_line[tasks[better]] = line
        self.open[:] = False

    def overlaps(self, parameters: Parameters) -> list[TaskOverlap]:
        table = self.index.scan.table
        covered = np.bincount(table.holders[self.seen], minlength=len(self.index.tasks))
        found = []
        for number, task in enumerate(self.index.tasks):
            grams = int(table.counts[number])
            coverage = round(int(covered[number]) / grams, 6) if grams else 0.0
            per_doc = round(float(self.best_doc[number]), 6)
            near = round(self.best_near[number], 6)
            line = int(self.best_doc_line[number]) if per_doc >= near else self.best_near_line[number]
            found.append(
                TaskOverlap(
                    env=task.env,
                    split=task.split,
                    task_id=task.task_id,
                    ngrams=grams,
                    ngram_overlap=per_doc,
                    ngram_coverage=coverage,
                    minhash_similarity=near,
                    contaminated=parameters.flags(per_doc, near),
                    train_line=line or None,
                )
            )
        return found


def check_training(
    source: TrainingSource,
    tasks: Sequence[EvalTask],
    parameters: Parameters | None = None,
    *,
    workers: int = 1,
    on_chunk: Callable[[ChunkResult], None] | None = None,
) -> Report:
    """Check every task of ``tasks`` against the training data of ``source``. ``workers``
    processes scan the chunks (1: this process); ``on_chunk`` is called after each chunk is
    merged (progress). Raises ``ContaminationInputError`` for input that cannot be read at
    all (a bad line is skipped and counted instead), ``ValueError`` for ``workers`` < 1."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    parameters = parameters or Parameters()
    index = build_index(tasks, parameters)
    merge = _Merge(index)
    for result in _scan_all(index, source.chunks(), source.text_field, workers):
        merge.add(result)
        if on_chunk is not None:
            on_chunk(result)
    training = TrainingInfo(
        path=str(source.path),
        format=source.format,
        bytes=source.size,
        sha256=source.sha256,
        lines=merge.lines,
        documents=merge.documents,
        skipped=dict(sorted(merge.skipped.items())),
        skipped_examples=tuple(merge.examples),
        minhashed=merge.minhashed,
    )
    overlaps = merge.overlaps(parameters)
    return Report(parameters, training, summarize(overlaps), overlaps)


def check_texts(
    texts: Iterable[str], tasks: Sequence[EvalTask], parameters: Parameters | None = None, *, batch: int = 20_000
) -> list[TaskOverlap]:
    """Check ``tasks`` against training texts held in memory (numbered from 1), in this
    process: the figures ``check_training`` gives for a file of these texts."""
    parameters = parameters or Parameters()
    index = build_index(tasks, parameters)
    merge = _Merge(index)
    pending: list[tuple[int, str]] = []
    for number, text in enumerate(texts, start=1):
        if len(text) > WINDOW:  # cut into windows, as the readers do
            merge.add(scan_documents(index.scan, pending))
            pending = []
            for part in windows(text):
                merge.add(scan_part(index.scan, number, part))
            continue
        pending.append((number, text))
        if len(pending) == batch:
            merge.add(scan_documents(index.scan, pending))
            pending = []
    merge.add(scan_documents(index.scan, pending))
    return merge.overlaps(parameters)


def default_workers() -> int:
    """The cores this process may use, at most 8."""
    return max(1, min(8, len(os.sched_getaffinity(0))))


def _scan_all(index: EvalIndex, chunks: Iterator[Chunk], text_field: str, workers: int) -> Iterator[ChunkResult]:
    """Each chunk's result, in input order."""
    if workers == 1:
        for chunk in chunks:
            yield scan_chunk(index.scan, chunk, text_field)
        return
    # fork: a worker starts at once with the index already in its memory (shared until
    # written), and a script that calls this needs no ``if __name__ == "__main__"`` guard
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ProcessPoolExecutor(workers, context, initializer=init_worker, initargs=(index.scan, text_field)) as pool:
        in_flight: deque[Future[ChunkResult]] = deque()
        for chunk in chunks:
            in_flight.append(pool.submit(scan_in_worker, chunk))
            if len(in_flight) >= workers * IN_FLIGHT_PER_WORKER:
                yield in_flight.popleft().result()
        while in_flight:
            yield in_flight.popleft().result()
