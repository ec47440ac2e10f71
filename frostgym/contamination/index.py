"""The eval side, indexed: what a scan of training documents looks each window up in.

Why its own module: the index is built once from a few thousand tasks and then consulted
for every window of a gigabyte, by every worker. It holds the vocabulary, per window length
the set of gram hashes (``HashSet``), the table of which tasks hold each gram (``GramTable``),
the shingle hashes of the MinHash prefilter and the MinHash LSH.

A task's grams are the distinct windows of ``ngram`` tokens of its text; a task shorter
than that has one gram, its whole text, when it has at least ``min_gram_tokens`` tokens,
and none below. A gram that more than ``max_gram_tasks`` tasks hold is an instruction their
family repeats (``... give the result as a fraction in lowest terms``), no evidence about
any one task: it is left out of every task's grams. A task left with no gram has an n-gram
overlap of 0, and only MinHash can flag it. Its shingles are ``ngrams.shingles`` of its text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from frostgym.contamination.evalset import EvalTask
from frostgym.contamination.minhash import NearDuplicates
from frostgym.contamination.ngrams import Hashes, HashSet, Vocabulary, shingles, text_windows, tokens
from frostgym.contamination.report import Parameters

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class GramTable:
    """Which tasks hold each gram, as compressed rows: gram ``g`` (``hashes[g]``, sorted) is
    held by ``holders[starts[g]:starts[g + 1]]`` (task indices); each (gram, task) pair is
    one *incidence*, numbered by its position there. ``counts[t]``: task ``t``'s grams."""

    hashes: Hashes
    starts: Ints
    holders: Ints
    counts: Ints

    def incidences(self, grams: Hashes) -> tuple[Ints, Ints]:
        """For each of ``grams`` (hashes in the table), its incidences, and for each
        incidence the position in ``grams`` it came from."""
        rows = np.searchsorted(self.hashes, grams)
        first, sizes = self.starts[rows], self.starts[rows + 1] - self.starts[rows]
        source = np.repeat(np.arange(len(grams), dtype=np.int64), sizes)
        offsets = np.arange(len(source), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        return np.repeat(first, sizes) + offsets, source


@dataclass(frozen=True)
class ScanIndex:
    """What scanning a chunk of training documents needs (a worker holds one).

    ``grams``: window length -> the gram hashes of that length; ``shingle_hashes``: the
    hashes of the eval side's ``parameters.shingle``-token windows."""

    parameters: Parameters
    vocabulary: Vocabulary
    grams: Mapping[int, HashSet]
    table: GramTable
    shingle_hashes: HashSet
    near: NearDuplicates


@dataclass(frozen=True)
class EvalIndex:
    """The tasks, in the order of their indices, and the scan's index of them."""

    tasks: Sequence[EvalTask]
    scan: ScanIndex


def build_index(tasks: Sequence[EvalTask], parameters: Parameters) -> EvalIndex:
    """Index ``tasks`` for a scan with ``parameters``."""
    task_tokens = [tokens(task.text) for task in tasks]
    vocabulary = Vocabulary(task_tokens)
    gram_parts: list[Hashes] = []
    owner_parts: list[Ints] = []
    lengths = np.zeros(len(tasks), dtype=np.int64)
    shingle_parts: list[Hashes] = []
    for index, toks in enumerate(task_tokens):
        ids = vocabulary.lookup(toks)
        lengths[index] = length = _gram_length(len(toks), parameters)
        if length:
            grams = text_windows(vocabulary.values, ids, length)
            gram_parts.append(grams)
            owner_parts.append(np.full(len(grams), index, dtype=np.int64))
        if len(toks) >= parameters.shingle:
            shingle_parts.append(text_windows(vocabulary.values, ids, parameters.shingle))
    table = _gram_table(_joined(gram_parts, np.uint64), _joined(owner_parts, np.int64), len(tasks), parameters)
    row_lengths = lengths[table.holders[table.starts[:-1]]]  # each task's grams have one length
    scan = ScanIndex(
        parameters=parameters,
        vocabulary=vocabulary,
        grams={int(n): HashSet(table.hashes[row_lengths == n]) for n in np.unique(row_lengths)},
        table=table,
        shingle_hashes=HashSet(_joined(shingle_parts, np.uint64)),
        near=NearDuplicates(
            [shingles(toks, parameters.shingle) for toks in task_tokens],
            num_perm=parameters.num_perm,
            threshold=parameters.lsh_threshold,
        ),
    )
    return EvalIndex(tasks=tasks, scan=scan)


def _joined(parts: list[npt.NDArray[Any]], dtype: type[np.generic]) -> npt.NDArray[Any]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _gram_table(grams: Hashes, owners: Ints, task_count: int, parameters: Parameters) -> GramTable:
    """The (gram, task) incidences, sorted, less the grams of more than ``max_gram_tasks``
    tasks."""
    order = np.lexsort((owners, grams))
    grams, owners = grams[order], owners[order]
    _, holders = np.unique(grams, return_counts=True)
    keep = np.repeat(holders <= parameters.max_gram_tasks, holders)
    grams, owners = grams[keep], owners[keep]
    hashes, first = np.unique(grams, return_index=True)
    return GramTable(
        hashes=hashes,
        starts=np.append(first, len(grams)).astype(np.int64),
        holders=owners,
        counts=np.bincount(owners, minlength=task_count).astype(np.int64),
    )


def _gram_length(token_count: int, parameters: Parameters) -> int:
    """The window length of a text's grams: ``ngram``, or its whole length when shorter but
    at least ``min_gram_tokens``; 0 when it has no gram."""
    if token_count >= parameters.ngram:
        return parameters.ngram
    return token_count if token_count >= parameters.min_gram_tokens else 0
