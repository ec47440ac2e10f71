"""Near duplicates by MinHash: which eval tasks a training document is nearly equal to.

Why its own module: the n-gram count (``frostgym.contamination.ngrams``) misses a leak whose
every 13-word window was touched by an edit (a word changed every ten); the Jaccard
similarity of the two texts' word shingles does not. Comparing every document with every
task is out of reach for a gigabyte, so the tasks' MinHash signatures (``datasketch``,
128 permutations, seed 1) go into a ``MinHashLSH`` built on the eval side, and a
document is compared only with the tasks its signature collides with there; the
similarity reported is datasketch's estimate (``MinHash.jaccard``), whose standard error
is about 0.04 at 0.5 with 128 permutations.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
from datasketch import LeanMinHash, MinHash, MinHashLSH

#: Permutations per signature: the estimate's standard error is sqrt(J(1-J)/NUM_PERM).
NUM_PERM = 128
#: The Jaccard similarity above which the LSH is tuned to return a pair (datasketch picks
#: bands and rows for it); pairs below it are mostly not returned, and reported as 0.
LSH_THRESHOLD = 0.5
_SEED = 1


class NearDuplicates:
    """An LSH of the eval tasks' shingle sets (``ngrams.shingles``), keyed by task index.

    ``task_shingles[i]`` is task ``i``'s set; a task without shingles (no token) is never
    returned. Raises ``ValueError`` for a ``threshold`` outside (0, 1)."""

    def __init__(
        self, task_shingles: Sequence[Collection[bytes]], *, num_perm: int = NUM_PERM, threshold: float = LSH_THRESHOLD
    ) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"the LSH threshold must be in (0, 1), got {threshold}")
        self.num_perm = num_perm
        self.threshold = threshold
        self._template = MinHash(num_perm=num_perm, seed=_SEED)
        self.lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        signatures: dict[int, LeanMinHash] = {}
        with self.lsh.insertion_session() as session:
            for index, shingle_set in enumerate(task_shingles):
                if shingle_set:
                    signatures[index] = signature = self.signature(shingle_set)
                    session.insert(index, signature, check_duplication=False)
        # Every task's signature values, one row per task (a task without any: never queried),
        # so a document is compared with all its candidates at once.
        self.values = np.zeros((len(task_shingles), num_perm), dtype=self._template.hashvalues.dtype)
        for index, signature in signatures.items():
            self.values[index] = signature.hashvalues

    def signature(self, shingle_set: Collection[bytes]) -> LeanMinHash:
        """The MinHash signature of a set of shingles (the same permutations for every set)."""
        minhash = MinHash(
            num_perm=self.num_perm,
            permutations=self._template.permutations,
            scheme=self._template.scheme,
        )
        minhash.update_batch(list(shingle_set))  # the minimum is the same in any order
        return LeanMinHash(minhash)

    def similar(self, shingle_set: Collection[bytes]) -> list[tuple[int, float]]:
        """The tasks whose signatures collide with this set's in the LSH, each with the
        estimated Jaccard similarity (``MinHash.jaccard``'s: the share of equal signature
        values), by task index."""
        if not shingle_set:
            return []
        signature = self.signature(shingle_set)
        candidates = np.array(sorted(self.lsh.query(signature)), dtype=np.int64)
        if len(candidates) == 0:
            return []
        equal = np.count_nonzero(self.values[candidates] == signature.hashvalues, axis=1)
        return list(zip(candidates.tolist(), (equal / self.num_perm).tolist(), strict=True))
