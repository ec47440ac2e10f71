"""Rows grouped by a key, keeping an order within each group: the per-task loops of a comparison.

Why: a comparison's per-task numbers must be the ones the cards' own per-task code gives,
bit for bit, and a float sum depends on the order of its terms. So rows are grouped with a
stable sort (within a group they keep the order given, or a secondary key's order), and a
group's values are summed by Python's ``sum`` over them in that order, never by a numpy
reduction that would reorder them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from frostgym.compare.facts import IntArray


@dataclass(frozen=True)
class Groups:
    """Rows grouped by key: ``order[starts[i]:ends[i]]`` are the rows of key ``keys[i]``;
    keys ascend."""

    order: IntArray
    keys: list[int]
    starts: list[int]
    ends: list[int]


def group(keys: IntArray, rows: IntArray, within: IntArray | None = None) -> Groups:
    """``rows`` (row indices) grouped by ``keys[row]``; in a group, the rows keep their order
    in ``rows``, or are ordered by ``within[row]`` (ties in their order in ``rows``)."""
    of_rows = keys[rows]
    permutation = np.argsort(of_rows, kind="stable") if within is None else np.lexsort((within[rows], of_rows))
    order = rows[permutation]
    sorted_keys = of_rows[permutation]
    if not len(order):
        return Groups(order, [], [], [])
    edges = (np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1).tolist()
    starts = [0, *edges]
    return Groups(order, sorted_keys[starts].tolist(), starts, [*edges, len(order)])
