"""What a card's close computes from the heads of the records read back from disk.

One place for it, because two readers compute it: the writer's own process (small cards,
and whenever the reader below is not to be trusted) and the read-back process that tails a
large card's files while the run writes them (``frostgym.cards.readback``).
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from frostgym.cards.views import TaskKey, TaskRecord, ViewsBuilder, normalise_ks, task_entry, task_record
from frostgym.core.episode import Head, RecordKind
from frostgym.core.errors import CardCorruptError


def check_ids(ids: Iterable[str], plan_ids: set[str]) -> None:
    """Raise ``CardCorruptError`` for a plan id recorded twice or not in ``plan_ids``."""
    counts = Counter(ids)
    _refuse_ids({i for i, n in counts.items() if n > 1}, set(counts) - plan_ids)


def _refuse_ids(repeated: set[str], unknown: set[str]) -> None:
    if repeated or unknown:
        raise CardCorruptError(
            f"the card's files hold plan ids recorded twice ({sorted(repeated)[:5]})"
            f" or not in its plan ({sorted(unknown)[:5]}): "
            "edited after the run?"
        )


def excluded_count(config: Mapping[str, Any]) -> int | None:
    """How many tasks a card's ``config`` says its plan leaves out (``identity.excluded``,
    written by ``frostgym.evaluate.exclusions.identity_record``); None when it declares none."""
    excluded = config["identity"].get("excluded")
    return None if excluded is None else len(excluded["tasks"])


class Tally:
    """What close computes from a card's records, fed the heads of its records as they are
    read (all at once in the writer's process; batch by batch in the read-back process, so
    little is left for ``result``). Each head is kept only as what its task's entry reads
    (``task_record``), and each task's score values are computed and added to the views
    (``ViewsBuilder``) once all its planned samples were added, its records then let go (so
    the read-back process's memory stays that of the tasks under way, under half of what
    their heads took, and ``result`` only sums); a record added to a task after that is one
    more than the plan has for it, which ``result`` refuses."""

    def __init__(self, plan: Sequence[Mapping[str, Any]], ks: Sequence[int], excluded: int | None = None) -> None:
        """``plan``: the card's plan entries (``plan_id``, ``env_id``, ``task_id``); ``ks``
        as ``compute_views`` takes them (``ValueError`` for one that is not a positive int);
        ``excluded``: the tasks the card's plan leaves out (``excluded_count``), None when
        it declares no exclusions."""
        self.ks = normalise_ks(ks)
        self.excluded = excluded
        self._plan_ids = {p["plan_id"] for p in plan}
        self._planned = Counter((p["env_id"], p["task_id"]) for p in plan)
        self._seen: set[str] = set()  # plan ids added, checked as they come: little left for ``result``
        self._repeated: set[str] = set()
        self._counts = {"episode": 0, "drop": 0, "succeeded": 0, "counted_as_failure": 0}
        self._by_class: Counter[str] = Counter()
        self._graders: dict[str, set[str]] = {}
        self._records: dict[TaskKey, list[TaskRecord]] = defaultdict(list)  # of the tasks under way
        self._views = ViewsBuilder(self.ks)  # holds the values of the tasks whose records were let go
        self._counted: set[TaskKey] = set()  # those tasks
        self._overfull: set[TaskKey] = set()  # tasks added to after that, or not planned

    def add(self, kind: RecordKind, heads: Iterable[Head]) -> None:
        """Count the heads of ``kind`` records (in the order of their file)."""
        records = self._records
        counts = self._counts
        seen = self._seen
        for head in heads:
            if head.plan_id in seen:
                self._repeated.add(head.plan_id)
            seen.add(head.plan_id)
            counts[kind] += 1
            record = task_record(head)
            if head.grade is not None:
                counts["succeeded"] += record.sample is not None and record.sample.passed
                self._graders.setdefault(head.grade["grader"], set()).add(head.grade["grader_version"])
            if head.drop is not None:
                self._by_class[head.drop.drop_class] += 1
                counts["counted_as_failure"] += head.drop.counted_as == "failure"
            key = (head.env_id, head.task_id)
            planned = self._planned[key]
            if key in self._counted or not planned:  # one more than the plan has
                self._overfull.add(key)
                continue
            group = records[key]
            group.append(record)
            if len(group) == planned:
                with contextlib.suppress(ValueError):  # a sample recorded twice: result raises it
                    self._views.add(key, task_entry(key, group, self.ks))
                    self._counted.add(key)
                    del records[key]

    def result(self, *, complete: bool) -> dict[str, Any]:
        """``graders`` (the versions of the graders that scored the completed episodes),
        ``accounting`` (the counts that must balance: every planned episode is completed,
        dropped or, in an interrupted card, still pending, exactly once) and ``views``.
        Raises ``CardCorruptError`` for a plan id recorded twice or not planned, for a task
        with more records than the plan has episodes of it, or when the card is
        ``complete`` with planned episodes not recorded, and ``ValueError`` for a sample of
        a task recorded twice."""
        _refuse_ids(self._repeated, self._seen - self._plan_ids)
        if self._overfull:
            raise CardCorruptError(
                f"the card's files hold more records than its plan has episodes of {sorted(self._overfull)[:3]}"
                " (a record's task edited after the run?)"
            )
        counts, by_class = self._counts, self._by_class
        completed, dropped = counts["episode"], counts["drop"]
        not_run = by_class["skipped"] + by_class["cancelled"]
        pending = len(self._plan_ids) - completed - dropped
        if complete and pending:
            raise CardCorruptError(f"card marked complete with {pending} planned episodes not recorded")
        accounting = {
            "planned": len(self._plan_ids),
            "completed": completed,
            "dropped": dropped,
            "pending": pending,
            "succeeded": counts["succeeded"],
            "failed": completed - counts["succeeded"],
            "errored": dropped - not_run,
            "skipped": not_run,
            "dropped_by_class": dict(sorted(by_class.items())),
            "dropped_counted_as_failure": counts["counted_as_failure"],
            "invariants": [
                "planned == completed + dropped + pending",
                "planned == succeeded + failed + errored + skipped + pending",
                "pending == 0 when status is complete",
            ],
            "balanced": pending == 0,
        }
        if self.excluded is not None:  # tasks taken out before the plan was drawn: never planned
            accounting["excluded"] = self.excluded
        return {
            "graders": {name: sorted(versions) for name, versions in sorted(self._graders.items())},
            "accounting": accounting,
            "views": self._views_with_tasks_under_way(),
        }

    def _views_with_tasks_under_way(self) -> dict[str, Any]:
        """The views, once the tasks still under way (an interrupted card's) are counted
        too: each then counts as let go, so a second ``result`` gives the same views."""
        under_way = {key: task_entry(key, group, self.ks) for key, group in self._records.items()}
        for key, entry in under_way.items():
            self._views.add(key, entry)
        self._counted.update(under_way)
        self._records.clear()
        return self._views.views()
