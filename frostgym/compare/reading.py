"""Read one card for a comparison: its plan, and every record reduced to a row of ``EpisodeFacts``.

Why streamed: a card's trajectories can be hundreds of MB, and a comparison holds two. The
record files are read line by line, each record decoded and checked as ``load_card`` does
(``frostgym.core.episode``), appended to the card's columns and let go, while the file's
SHA-256 is computed on the way and checked against the card's manifest: a comparison of an
edited card is refused like any other read of it.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from frostgym.cards.card import read_card_json
from frostgym.compare.facts import EpisodeFacts, FactsBuilder
from frostgym.core.episode import RecordKind, record_problem
from frostgym.core.errors import CardCorruptError, CardNotCompleteError

#: Bytes read at a time from a record file.
CHUNK = 1 << 22
_FILES: tuple[tuple[str, RecordKind], ...] = (("episodes.jsonl", "episode"), ("drops.jsonl", "drop"))


@dataclass(frozen=True)
class CardFacts:
    """One card as a comparison sees it."""

    directory: Path
    card: Mapping[str, Any]
    #: The plan's entries by plan id, in plan order.
    plan: Mapping[str, Mapping[str, Any]]
    #: Every record of the card, episodes then drops, in file order.
    facts: EpisodeFacts
    #: The row in ``facts`` of each plan id the card recorded.
    rows: Mapping[str, int]


#: Called with each record as it is read (its kind, its line, the decoded record), after the
#: record has passed every check and become a row: what a reader needs beyond the facts.
RecordObserver = Callable[[RecordKind, bytes, Mapping[str, Any]], None]


def read_card_facts(directory: Path, observe: RecordObserver | None = None) -> CardFacts:
    """The card in ``directory``, its records streamed and reduced (each also handed to
    ``observe``, in row order, when given). Raises ``CardNotCompleteError`` for a card that
    is not complete, ``CardCorruptError`` for a record file that does not match the card's
    manifest, a record that is not one, or an episode recorded twice or not in the plan."""
    with paused_gc():
        card, plan = read_plan(directory)
        facts, rows = read_records(directory, card, plan, observe)
    return CardFacts(directory, card, plan, facts, rows)


def read_plan(directory: Path) -> tuple[dict[str, Any], dict[str, Mapping[str, Any]]]:
    """The card's ``card.json`` and its plan's entries by plan id, in plan order. Raises
    ``CardNotCompleteError`` for a card that is not complete."""
    card = read_card_json(directory)
    if card.get("status") != "complete":
        raise CardNotCompleteError(
            f"{directory} is {card.get('status')!r}, not complete: finish it with the same "
            "`frostgym eval` command plus --resume before comparing it"
        )
    return card, {entry["plan_id"]: entry for entry in card["plan"]["episodes"]}


def read_records(
    directory: Path,
    card: Mapping[str, Any],
    plan: Mapping[str, Mapping[str, Any]],
    observe: RecordObserver | None = None,
) -> tuple[EpisodeFacts, dict[str, int]]:
    """Every record of the card (``read_plan``), episodes then drops, as rows, and the row
    of each plan id. Raises ``CardCorruptError`` as ``read_card_facts`` does."""
    builder = FactsBuilder()
    rows: dict[str, int] = {}
    for name, kind in _FILES:
        path = directory / name
        recorded = card["files"].get(name)
        add = builder.add_episode if kind == "episode" else builder.add_drop
        for line, record in _records(path, kind, recorded):
            plan_id = record["plan_id"]
            if plan_id not in plan:
                raise CardCorruptError(f"{path}: episode {plan_id!r} is not in the card's plan")
            if plan_id in rows:
                raise CardCorruptError(f"{path}: episode {plan_id!r} is recorded twice")
            rows[plan_id] = add(record)
            if observe is not None:
                observe(kind, line, record)
    return builder.build(), rows


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused for the block. Reading a card allocates millions
    of short-lived, acyclic objects (decoded records, freed by reference counting) beside
    the long-lived plan (100k entries): each collection their allocations trigger walks the
    plan again and frees nothing, about a sixth of a large card's read."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _records(
    path: Path, kind: RecordKind, recorded: Mapping[str, Any] | None
) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Each line of a file and its record, decoded and checked (``record_problem``), while
    the file's sha256 is checked against the card's manifest."""
    if not path.exists():
        if recorded and recorded.get("lines"):
            raise CardCorruptError(f"{path} is missing; the card lists {recorded['lines']} records in it")
        return
    digest = hashlib.sha256()
    size = 0
    rest = b""
    number = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                number += 1
                yield line, _decode(path, number, line, kind)
    if rest.strip():
        raise CardCorruptError(f"{path}: line {number + 1} is torn (no newline); resume or close the card first")
    if recorded is not None and (recorded.get("sha256") != digest.hexdigest() or recorded.get("bytes") != size):
        raise CardCorruptError(f"{path} does not match the card's manifest (edited after the card was written?)")


def _decode(path: Path, number: int, line: bytes, kind: RecordKind) -> dict[str, Any]:
    """One line as a checked record: the same checks ``load_card`` makes (``record_problem``),
    without building the typed trajectory the comparison reduces at once to its facts."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise CardCorruptError(f"{path}: line {number} is not JSON: {error}") from None
    if problem := record_problem(data, kind):
        raise CardCorruptError(f"{path}: line {number}: {problem}")
    result: dict[str, Any] = data
    return result


def plan_difference(base: CardFacts, cand: CardFacts) -> str | None:
    """How two cards' plans differ, in words, or None when they are the same plan."""
    if base.card["plan"]["sha256"] == cand.card["plan"]["sha256"]:
        return None
    base_identity = base.card["config"]["identity"]
    cand_identity = cand.card["config"]["identity"]
    differences = [
        f"{key} {base_identity.get(key)!r} vs {cand_identity.get(key)!r}"
        for key in ("env_ids", "split", "episodes", "samples", "seed", "env_kwargs", "twins")
        if base_identity.get(key) != cand_identity.get(key)
    ]
    if base_identity.get("excluded") != cand_identity.get("excluded"):  # frostgym eval --exclude
        differences.append(f"excluded tasks {_exclusions(base_identity)} vs {_exclusions(cand_identity)}")
    only_base = len(set(base.plan) - set(cand.plan))
    only_cand = len(set(cand.plan) - set(base.plan))
    if only_base or only_cand:
        differences.append(f"{only_base} planned episodes only in the base, {only_cand} only in the candidate")
    changed = sum(1 for plan_id in set(base.plan) & set(cand.plan) if base.plan[plan_id] != cand.plan[plan_id])
    if changed:
        differences.append(f"{changed} shared plan ids with different seeds or tasks")
    return "; ".join(differences) or "plan hashes differ"


def _exclusions(identity: dict[str, Any]) -> str:
    excluded = identity.get("excluded")
    return "none" if excluded is None else f"{len(excluded['tasks'])} (list {excluded['sha256'][:12]})"
