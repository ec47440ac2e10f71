"""Splits, assigned by content hash so they are disjoint by construction.

A task belongs to exactly one split, decided by hashing its *content* (not its seed
or index): two generator draws that happen to produce the same question land in the
same split, so no test question can ever also appear in train.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Literal

Split = Literal["train", "dev", "test", "private"]
#: What listings show. ``private`` is only reachable by naming it.
PUBLIC_SPLITS: tuple[Split, ...] = ("train", "dev", "test")
ALL_SPLITS: tuple[Split, ...] = (*PUBLIC_SPLITS, "private")

#: Share of hash buckets (out of 100) per split, in bucket order.
DEFAULT_SPLIT_PERCENT: Mapping[Split, int] = {"train": 70, "dev": 10, "test": 10, "private": 10}


def check_split(split: str) -> Split:
    if split not in ALL_SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(ALL_SPLITS)}")
    return split


def parse_splits(splits: str) -> tuple[Split, ...]:
    """The splits a run plays: one (``"test"``) or several separated by commas
    (``"test,private"``, so one card holds both and a comparison can measure the gap between
    them). Raises ``ValueError`` for an unknown or repeated split."""
    parsed = tuple(check_split(part.strip()) for part in splits.split(","))
    if len(set(parsed)) != len(parsed):
        raise ValueError(f"splits repeat: {splits!r}")
    return parsed


def split_of(content_key: str, *, salt: str, percent: Mapping[Split, int] = DEFAULT_SPLIT_PERCENT) -> Split:
    """The split that owns ``content_key``: a pure function of the content and the salt."""
    if sum(percent.values()) != 100:
        raise ValueError("split percentages must sum to 100")
    digest = hashlib.sha256(f"{salt}\x00{content_key}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") % 100
    upper = 0
    for split in ALL_SPLITS:
        upper += percent.get(split, 0)
        if bucket < upper:
            return split
    raise AssertionError("unreachable: percentages sum to 100")
