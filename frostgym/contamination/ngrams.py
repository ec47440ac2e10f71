"""Normalised word tokens and hashed word windows: the one meaning of "the same words".

Why its own module: the eval side (a few thousand task prompts) and the training side (a
file of a gigabyte) must cut text into tokens and hash windows of them identically, and the
training side must do it at C speed. So a text is normalised once (Unicode NFKC, lowercase,
every character that is neither a letter, a digit, ``_`` nor an arithmetic operator
turned into a space, each operator a token of its own, split on whitespace:
``"Compute (3/2) - 1/2!"`` is ``compute 3 / 2 - 1 / 2``), and a window of ``L`` tokens
is hashed by numpy over a whole chunk of documents at once: token ids -> 64-bit token values
-> ``sum(value[i + k] * coefficient[k]) + salt[L]`` (mod 2**64), a tabulation-style hash
whose collisions (about one in 10**19 per pair) are left to chance.

Only tokens of the eval side's vocabulary get an id: a training window holding any other
token cannot equal an eval window, so it is marked invalid instead of hashed. Each token's
value is derived from its own bytes, so a window's hash does not depend on which tasks were
indexed or in which order.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

#: GPT-3's and Llama 2's contamination reports count 13-gram collisions.
DEFAULT_NGRAM = 13
#: A task with fewer tokens than ``ngram`` has one gram, its whole text, if it has at least
#: this many tokens; below it a collision is as likely chance as a leak, and it has none.
MIN_GRAM_TOKENS = 8
#: Word shingles that MinHash compares (5: short enough that a changed word leaves most of
#: a question's shingles intact, long enough that unrelated text shares few).
SHINGLE = 5
#: Longest window this module hashes.
MAX_WINDOW = 64

#: The largest bitmap a ``HashSet`` puts in front of its sorted hashes (16 MB).
_MAX_BITMAP_BITS = 24

#: What ``ids`` gives a token outside the vocabulary, and the document separator.
UNKNOWN = -1
SEPARATOR = b"\x00"  # a byte normalisation never leaves in a token

#: Characters kept as tokens of their own: arithmetic (``(3/2) - (1/2)`` and ``(3/2) + (1/2)``
#: are different questions). Every other character that is not a letter, digit or ``_`` is
#: stripped (a space).
_ASCII_OPERATORS = b"+-*/=<>^%"
#: Unicode spellings of the operators, read as the ASCII ones.
_OPERATOR_SPELLINGS = (("\u00d7", "*"), ("\u00f7", "/"), ("\u2212", "-"))
#: A run of characters that are no part of a token (whitespace included): one space.
_NOT_TOKEN = re.compile("[^\\w+\\-*/=<>^%]+")
# ASCII fast path: A-Z lowered, [a-z0-9_] and the operators kept, every other byte a space;
# then each operator present is spaced out (the same tokens the Unicode path gives).
_ASCII_TABLE = bytes(
    (b + 32 if 65 <= b <= 90 else b)
    if (48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122 or b == 95 or b in _ASCII_OPERATORS)
    else 32
    for b in range(256)
)
_SPACED = [(bytes([op]), b" %c " % op) for op in _ASCII_OPERATORS]

Ids = npt.NDArray[np.int64]
Hashes = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]


def tokens(text: str) -> list[bytes]:
    """The normalised tokens of ``text``, UTF-8 encoded (see the module docstring): those
    of ``unicode_tokens``, by a faster path for an ASCII text."""
    if not text.isascii():
        return unicode_tokens(text)
    kept = text.encode("ascii").translate(_ASCII_TABLE)
    for operator, spaced in _SPACED:
        if operator in kept:
            kept = kept.replace(operator, spaced)
    return kept.split()


def unicode_tokens(text: str) -> list[bytes]:
    """The normalised tokens of any text, character class by character class."""
    folded = unicodedata.normalize("NFKC", text).lower()
    for spelling, ascii_spelling in _OPERATOR_SPELLINGS:
        if spelling in folded:
            folded = folded.replace(spelling, ascii_spelling)
    kept = _NOT_TOKEN.sub(" ", folded).encode("utf-8", "surrogatepass")  # only spaces separate tokens now
    for operator, spaced in _SPACED:
        if operator in kept:
            kept = kept.replace(operator, spaced)
    return kept.split()


def _derived(*parts: str | int) -> int:
    """A 64-bit constant named by ``parts`` (no global randomness)."""
    name = "\x00".join(str(p) for p in ("frostgym.contamination", *parts))
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


_COEFFICIENTS = np.array([_derived("coefficient", k) | 1 for k in range(MAX_WINDOW)], dtype=np.uint64)
_SALTS = np.array([_derived("length", n) for n in range(MAX_WINDOW + 1)], dtype=np.uint64)


def token_value(token: bytes) -> int:
    """The 64-bit value a token contributes to every window hash."""
    return int.from_bytes(hashlib.blake2b(token, digest_size=8, person=b"frostgym.token").digest(), "little")


class Vocabulary:
    """The eval side's tokens, each with an id and its 64-bit value."""

    def __init__(self, texts_tokens: Iterable[Sequence[bytes]]) -> None:
        ids: dict[bytes, int] = {}
        for toks in texts_tokens:
            for token in toks:
                ids.setdefault(token, len(ids))
        self.ids: Mapping[bytes, int] = ids
        self.values: Hashes = np.array([token_value(t) for t in ids], dtype=np.uint64)

    def __len__(self) -> int:
        return len(self.ids)

    def lookup(self, toks: Sequence[bytes]) -> Ids:
        """The id of each token, ``UNKNOWN`` for a token outside the vocabulary (and for
        ``SEPARATOR``)."""
        return np.fromiter(map(self.ids.get, toks, repeat(UNKNOWN)), dtype=np.int64, count=len(toks))


def window_hashes(values: Hashes, ids: Ids, lengths: Sequence[int]) -> dict[int, tuple[Hashes, Mask]]:
    """For each window length ``L`` of ``lengths`` (1..``MAX_WINDOW``): the hash of the
    window of ``L`` tokens starting at each position of ``ids`` (``len(ids) - L + 1`` of
    them) and whether it is valid (every token in the vocabulary). ``values`` are the
    vocabulary's token values. One pass serves every length: the hash of a window of ``L``
    tokens is the running sum after its ``L``-th term."""
    wanted = sorted(set(lengths))
    if wanted and not 1 <= wanted[0] <= wanted[-1] <= MAX_WINDOW:
        raise ValueError(f"window lengths must be in [1, {MAX_WINDOW}], got {wanted}")
    known = ids >= 0
    word = values[np.where(known, ids, 0)] if len(values) else np.zeros(len(ids), dtype=np.uint64)
    bad = np.concatenate(([0], np.cumsum(~known)))
    out: dict[int, tuple[Hashes, Mask]] = {}
    total = len(ids)
    running = np.zeros(max(total, 0), dtype=np.uint64)
    done = 0
    for length in wanted:
        if length > total:
            out[length] = (np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.bool_))
            continue
        count = total - length + 1
        # running[i] holds sum over k < done of word[i + k] * c[k]; extend it to ``length`` terms
        for k in range(done, length):
            running[:count] += word[k : k + count] * _COEFFICIENTS[k]
        done = length
        hashes = running[:count] + _SALTS[length]
        valid = bad[length : length + count] == bad[:count]
        out[length] = (hashes, valid)
    return out


def text_windows(values: Hashes, ids: Ids, length: int) -> Hashes:
    """The distinct hashes of the windows of ``length`` tokens of one text whose tokens are
    all in the vocabulary (an eval task's), sorted."""
    hashes, _ = window_hashes(values, ids, (length,))[length]
    return np.unique(hashes)


class HashSet:
    """A sorted set of window hashes with a bitmap in front: a lookup first reads one byte
    of the bitmap (top bits of the hash), a few MB that stay in cache, and binary-searches
    only the few windows that pass, instead of every window of a gigabyte."""

    def __init__(self, hashes: Hashes) -> None:
        self.sorted: Hashes = np.unique(hashes)
        bits = 16
        while bits < _MAX_BITMAP_BITS and (1 << bits) < 32 * len(self.sorted):
            bits += 1
        self._shift = np.uint64(64 - bits)
        self._bitmap: Mask = np.zeros(1 << bits, dtype=np.bool_)
        self._bitmap[self.sorted >> self._shift] = True

    def __len__(self) -> int:
        return len(self.sorted)

    def members(self, hashes: Hashes, valid: Mask) -> npt.NDArray[np.int64]:
        """The positions of the ``valid`` ``hashes`` that are in the set, ascending."""
        at = np.flatnonzero(self._bitmap[hashes >> self._shift] & valid)
        if len(at) == 0:
            return at
        candidates = hashes[at]
        slot = np.searchsorted(self.sorted, candidates)
        slot[slot == len(self.sorted)] = 0
        found: npt.NDArray[np.int64] = at[self.sorted[slot] == candidates]
        return found


def shingles(toks: Sequence[bytes], size: int = SHINGLE) -> set[bytes]:
    """The distinct word shingles MinHash compares: every run of ``size`` tokens, joined by a
    space; a text shorter than ``size`` tokens is one shingle (none if it has no token)."""
    if len(toks) < size:
        return {b" ".join(toks)} if toks else set()
    return {b" ".join(toks[i : i + size]) for i in range(len(toks) - size + 1)}
