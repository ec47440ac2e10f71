"""The rollout card: a directory that is the evidence of one evaluation run.

- ``card.json``: the manifest: plan, config, provenance, accounting, checksums, views;
- ``episodes.jsonl``: one full trajectory per completed episode;
- ``drops.jsonl``: one record per episode that was not scored normally.

``card.json`` is written before the first episode (status ``running``) and rewritten at
the end. Accounting, checksums and views are always recomputed from the two JSON Lines
files as they are on disk, never carried in memory, so the card cannot claim what its
episodes do not show.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from frostgym.cards.plan import SEEDING, PlannedEpisode, plan_sha256
from frostgym.cards.store import (
    CardCorruptError,
    JsonlAppender,
    gc_paused,
    read_json,
    read_jsonl,
    write_json_atomic,
)
from frostgym.cards.views import compute_views
from frostgym.core.episode import DropRecord, EpisodeRecord
from frostgym.core.grade import passes
from frostgym.version import __version__

CARD_SCHEMA = "frostgym.card/1"
CARD_FILE = "card.json"
EPISODES_FILE = "episodes.jsonl"
DROPS_FILE = "drops.jsonl"
LOCK_FILE = ".lock"
CardStatus = Literal["running", "interrupted", "complete"]
#: The ``card.json`` keys ``close`` computes from the files on disk; absent while running.
SUMMARY_KEYS: tuple[str, ...] = ("updated_at", "files", "graders", "accounting", "views")


class CardMismatchError(ValueError):
    """``--resume`` was asked to finish a card planned with different options."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class CardWriter:
    """Owns one card directory while a run (or a resumed run) writes to it."""

    def __init__(
        self, directory: Path, card: dict[str, Any], done: set[str], fsync_seconds: float, lock: int | None = None
    ) -> None:
        self.directory = directory
        self.card = card
        self.done = done  # plan ids already recorded (non-empty on resume)
        self._lock = _lock(directory) if lock is None else lock
        self._episodes = JsonlAppender(directory / EPISODES_FILE, fsync_seconds)
        self._drops = JsonlAppender(directory / DROPS_FILE, fsync_seconds)
        self._closed = False

    # -- opening --------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        directory: Path,
        *,
        config: dict[str, Any],
        plan: Sequence[PlannedEpisode],
        provenance: dict[str, Any],
        fsync_seconds: float = 1.0,
    ) -> CardWriter:
        """A new card; ``config["identity"]`` is what a resume must match."""
        directory.mkdir(parents=True, exist_ok=True)
        entries = [p.to_dict() for p in plan]
        if any(directory.iterdir()):
            raise FileExistsError(f"{directory} is not empty: pass --resume to finish the card there, or a new --out")
        card = {
            "schema": CARD_SCHEMA,
            "status": "running",
            "frostgym_version": __version__,
            "created_at": _now(),
            "config": config,
            "seeding": {"run_seed": config["identity"]["seed"], **SEEDING},
            "plan": {"sha256": plan_sha256(entries), "episodes": entries},
            **provenance,
            "sessions": [{"started_at": _now(), "ended_at": None, "resumed": False, "written": 0}],
        }
        writer = cls(directory, card, set(), fsync_seconds)
        write_json_atomic(directory / CARD_FILE, card)
        return writer

    @classmethod
    def resume(
        cls,
        directory: Path,
        *,
        config: dict[str, Any],
        plan: Sequence[PlannedEpisode],
        fsync_seconds: float = 1.0,
    ) -> CardWriter:
        """Reopen a card to finish its plan: the identity and plan must match, a partial
        last line left by a crash is cut off, and every plan id already on disk is done."""
        card = read_json(directory / CARD_FILE)
        stored, asked = card["config"]["identity"], config["identity"]
        if stored != asked:
            changed = sorted(k for k in set(stored) | set(asked) if stored.get(k) != asked.get(k))
            detail = ", ".join(f"{k}: card has {stored.get(k)!r}, asked {asked.get(k)!r}" for k in changed)
            raise CardMismatchError(f"{directory} was planned with different options ({detail})")
        if card["plan"]["sha256"] != plan_sha256(plan):
            raise CardMismatchError(f"{directory}: the plan recomputed from its options differs (package change?)")
        lock = _lock(directory)  # before repairing: another runner may still be writing
        try:
            done = set(_recorded_ids(directory, repair=True, plan_ids={p.plan_id for p in plan}))
        except BaseException:
            os.close(lock)
            raise
        card["config"]["execution"] = config["execution"]
        card["config"]["ks"] = config["ks"]
        card["status"] = "running"
        for stale in SUMMARY_KEYS:  # recomputed at close
            card.pop(stale, None)
        card["sessions"].append({"started_at": _now(), "ended_at": None, "resumed": True, "written": 0})
        writer = cls(directory, card, done, fsync_seconds, lock)
        write_json_atomic(directory / CARD_FILE, card)
        return writer

    # -- the EpisodeSink interface ---------------------------------------------------------
    def add(self, outcome: EpisodeRecord | DropRecord) -> None:
        (self._episodes if isinstance(outcome, EpisodeRecord) else self._drops).append(outcome)
        self.card["sessions"][-1]["written"] += 1

    def commit(self) -> None:
        self._episodes.commit()
        self._drops.commit()

    # -- closing ---------------------------------------------------------------------------
    def close(self, status: CardStatus, agent: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Flush and sync both files, then rewrite ``card.json`` from what is on disk."""
        if self._closed:
            return self.card
        self._closed = True
        self._episodes.close()
        self._drops.close()
        if agent is not None:
            self.card["agent"] = dict(agent)
        self.card["sessions"][-1]["ended_at"] = _now()
        self.card.update(summarize_card(self.directory, self.card, status))
        write_json_atomic(self.directory / CARD_FILE, self.card)
        os.close(self._lock)
        return self.card


def _lock(directory: Path) -> int:
    """An exclusive lock on the card, so two runners never append to the same files."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
        os.close(fd)
        raise RuntimeError(f"{directory} is being written by another frostgym process") from error
    return fd


def _recorded_ids(directory: Path, *, repair: bool, plan_ids: set[str]) -> list[str]:
    ids = []
    for name in (EPISODES_FILE, DROPS_FILE):
        ids += [r["plan_id"] for r in read_jsonl(directory / name, repair=repair).records]
    _check_ids(ids, plan_ids)
    return ids


def _check_ids(ids: Iterable[str], plan_ids: set[str]) -> None:
    counts = Counter(ids)
    repeated = sorted(i for i, n in counts.items() if n > 1)
    unknown = sorted(set(counts) - plan_ids)
    if repeated or unknown:
        raise CardCorruptError(f"episodes recorded twice: {repeated[:5]}; not in the plan: {unknown[:5]}")


def accounting(plan_ids: set[str], episodes: list[dict[str, Any]], drops: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts that must balance: every planned episode is completed, dropped or
    (in an interrupted card) still pending, exactly once."""
    _check_ids([r["plan_id"] for r in [*episodes, *drops]], plan_ids)
    succeeded = sum(1 for e in episodes if e["grade"] is not None and passes(e["grade"]))
    by_class = Counter(d["drop_class"] for d in drops)
    not_run = by_class["skipped"] + by_class["cancelled"]
    pending = len(plan_ids) - len(episodes) - len(drops)
    return {
        "planned": len(plan_ids),
        "completed": len(episodes),
        "dropped": len(drops),
        "pending": pending,
        "succeeded": succeeded,
        "failed": len(episodes) - succeeded,
        "errored": len(drops) - not_run,
        "skipped": not_run,
        "dropped_by_class": dict(sorted(by_class.items())),
        "dropped_counted_as_failure": sum(1 for d in drops if d["counted_as"] == "failure"),
        "invariants": [
            "planned == completed + dropped + pending",
            "planned == succeeded + failed + errored + skipped + pending",
            "pending == 0 when status is complete",
        ],
        "balanced": pending == 0,
    }


def summarize_card(directory: Path, card: Mapping[str, Any], status: CardStatus) -> dict[str, Any]:
    """Accounting, checksums, grader versions and views, from the files on disk."""
    with gc_paused():
        return _summarize(directory, card, status)


def _summarize(directory: Path, card: Mapping[str, Any], status: CardStatus) -> dict[str, Any]:
    episodes = read_jsonl(directory / EPISODES_FILE)
    drops = read_jsonl(directory / DROPS_FILE)
    plan_ids = {p["plan_id"] for p in card["plan"]["episodes"]}
    counts = accounting(plan_ids, episodes.records, drops.records)
    if status == "complete" and counts["pending"]:
        raise CardCorruptError(f"card marked complete with {counts['pending']} planned episodes not recorded")
    graders: dict[str, set[str]] = {}
    for e in episodes.records:
        for step in e["steps"]:
            if step["grade"] is not None:
                graders.setdefault(step["grade"]["grader"], set()).add(step["grade"]["grader_version"])
    return {
        "status": status,
        "updated_at": _now(),
        "files": {EPISODES_FILE: episodes.manifest(), DROPS_FILE: drops.manifest()},
        "graders": {name: sorted(versions) for name, versions in sorted(graders.items())},
        "accounting": counts,
        "views": compute_views(episodes.records, drops.records, card["config"]["ks"]),
    }


def load_card(
    directory: Path, *, verify: bool = True
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(card, episodes, drops) of a card directory. ``verify`` checks the files against
    the checksums in ``card.json`` (a card still running has none yet)."""
    card = read_json(directory / CARD_FILE)
    episodes = read_jsonl(directory / EPISODES_FILE)
    drops = read_jsonl(directory / DROPS_FILE)
    if verify and "files" in card:
        for name, contents in ((EPISODES_FILE, episodes), (DROPS_FILE, drops)):
            if card["files"][name] != contents.manifest():
                raise CardCorruptError(
                    f"{directory / name} does not match the checksum in card.json "
                    f"(card: {card['files'][name]}, file: {contents.manifest()}): edited after the run?"
                )
    return card, episodes.records, drops.records
