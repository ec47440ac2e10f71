"""Read one card for a comparison: its plan, and every record reduced to a row of ``EpisodeFacts``.

Why streamed: a card's trajectories can be hundreds of MB, and a comparison holds two. The
records come from the card's one streaming reader (``frostgym.cards.card.stream_records``:
each line decoded and checked as ``load_card`` checks it, the files checked against the
card's manifest on the way), each appended to the card's columns and let go, so a
comparison of an edited card is refused like any other read of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frostgym.cards.card import read_card_json, stream_records
from frostgym.cards.store import gc_paused
from frostgym.compare.facts import EpisodeFacts, FactsBuilder
from frostgym.core.episode import EpisodeRecord, Record
from frostgym.core.errors import CardNotCompleteError


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


#: Called with each record as it is read (its line, the typed record), after the
#: record has passed every check and become a row: what a reader needs beyond the facts.
RecordObserver = Callable[[bytes, Record], None]


def read_card_facts(directory: Path, observe: RecordObserver | None = None) -> CardFacts:
    """The card in ``directory``, its records streamed and reduced (each also handed to
    ``observe``, in row order, when given). Raises ``CardNotCompleteError`` for a card that
    is not complete, ``CardCorruptError`` for a record file that does not match the card's
    manifest, a record that is not one, or an episode recorded twice or not in the plan."""
    with gc_paused():
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
    for line, record in stream_records(directory, card, plan):
        rows[record.plan_id] = (
            builder.add_episode(record) if isinstance(record, EpisodeRecord) else builder.add_drop(record)
        )
        if observe is not None:
            observe(line, record)
    return builder.build(), rows


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
