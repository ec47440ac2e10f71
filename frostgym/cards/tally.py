"""What a card's close computes from the heads of the records read back from disk.

One place for it, because two readers compute it: the writer's own process (small cards,
and whenever the reader below is not to be trusted) and the read-back process that tails a
large card's files while the run writes them (``frostgym.cards.readback``).
"""

from __future__ import annotations

import contextlib
import itertools
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from frostgym.cards.views import TaskKey, TaskRecord, ViewsBuilder, normalise_ks, task_entry, task_record
from frostgym.core.episode import Head, RecordKind
from frostgym.core.errors import CardCorruptError
from frostgym.core.task_ids import is_twin_id


def check_ids(ids: Iterable[str], plan_ids: Iterable[str]) -> None:
    """Raise ``CardCorruptError`` for a plan id recorded twice or not in ``plan_ids`` (a
    set, or the plan's ids as they are read: only the recorded ones are held)."""
    counts = Counter(ids)
    unknown = set(counts)
    if isinstance(plan_ids, (set, frozenset)):
        unknown -= plan_ids
    else:
        for plan_id in plan_ids:
            unknown.discard(plan_id)
    _refuse_ids({i for i, n in counts.items() if n > 1}, unknown)


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


@dataclass(slots=True)
class _Task:
    """A task under way: how many episodes the plan has of it (so far as the plan was read:
    ``closed`` once all of it was), and the records of it added so far."""

    planned: int
    closed: bool
    records: list[TaskRecord] = field(default_factory=list)


class Tally:
    """What close computes from a card's records, fed the heads of its records as they are
    read (all at once in the writer's process; batch by batch in the read-back process, so
    little is left for ``result``). Each head is kept only as what its task's entry reads
    (``task_record``), and each task's score values are folded into the views
    (``ViewsBuilder``) once all its planned samples were added, its records then let go; a
    record added to a task after that is one more than the plan has for it, which
    ``result`` refuses.

    Its memory does not grow with the records added, nor with the plan: the plan is read
    alongside the records, as far as they reach into it (a run records its episodes in
    about the order of its plan), keeping only the entries read but not recorded yet and
    the tasks under way. Why: a set of every plan id, one of every id recorded, a count of
    every task and a set of every task counted take over 100 bytes an episode besides the
    views (100 MB of a 1,000,000-episode card's read-back process). That needs a plan whose ids
    are distinct and whose tasks each have their entries together, as every plan
    ``frostgym.run.plan.make_plan`` makes has; for any other (a hand-made plan) the whole
    plan is held, as it always was (the result is the same either way)."""

    def __init__(self, plan: Iterable[Mapping[str, Any]], ks: Sequence[int], excluded: int | None = None) -> None:
        """``plan``: the card's plan entries (``plan_id``, ``env_id``, ``task_id``), which
        are iterated more than once (a list, or ``store.JsonArrayFile``: read from disk
        each time): once to check their shape, then alongside the records, and once more
        only when a record's plan id is refused; ``ks`` as ``compute_views`` takes them
        (``ValueError`` for one that is not a positive int); ``excluded``: the tasks the
        card's plan leaves out (``excluded_count``), None when it declares no exclusions."""
        self.ks = normalise_ks(ks)
        self.excluded = excluded
        self._plan = plan
        self._planned, streamed, twins = _plan_shape(plan)
        self._counts = {"episode": 0, "drop": 0, "succeeded": 0, "counted_as_failure": 0}
        self._by_class: Counter[str] = Counter()
        self._graders: dict[str, set[str]] = {}
        self._views = ViewsBuilder(self.ks, twins=twins)  # the values of the tasks counted
        self._tasks: dict[TaskKey, _Task] = {}  # the tasks under way
        self._overfull: set[TaskKey] = set()  # tasks added to after they were counted, or not planned
        self._refused: Counter[str] = Counter()  # plan ids not matched to an entry (recorded twice, or not planned)
        # Streamed: the plan entries read but not recorded yet, and where reading stopped.
        self._ahead: dict[str, TaskKey] = {}
        self._entries: Iterator[Mapping[str, Any]] | None = iter(plan) if streamed else None
        self._reading: TaskKey | None = None  # the task of the last entry read
        # Held whole (a plan ``_plan_shape`` cannot stream): as it always was.
        self._plan_ids: set[str] = set()
        self._per_task: Counter[TaskKey] = Counter()
        self._seen: set[str] = set()
        self._counted: set[TaskKey] = set()
        if not streamed:
            self._plan_ids = {p["plan_id"] for p in plan}
            self._per_task = Counter((p["env_id"], p["task_id"]) for p in plan)

    def add(self, kind: RecordKind, heads: Iterable[Head]) -> None:
        """Count the heads of ``kind`` records (in the order of their file)."""
        counts = self._counts
        streamed = self._entries is not None
        for head in heads:
            counts[kind] += 1
            record = task_record(head)
            if head.grade is not None:
                counts["succeeded"] += record.sample is not None and record.sample.passed
                self._graders.setdefault(head.grade["grader"], set()).add(head.grade["grader_version"])
            if head.drop is not None:
                self._by_class[head.drop.drop_class] += 1
                counts["counted_as_failure"] += head.drop.counted_as == "failure"
            key = (head.env_id, head.task_id)
            task = self._streamed_task(head.plan_id, key) if streamed else self._held_task(head.plan_id, key)
            if task is None:
                continue
            task.records.append(record)
            if len(task.records) == task.planned:
                if task.closed:
                    self._count(key, task)
                else:  # the plan may have more of it: the next entry says (and closes it if not)
                    self._read_entry()

    # -- a plan read alongside the records ------------------------------------------------
    def _streamed_task(self, plan_id: str, key: TaskKey) -> _Task | None:
        """The task under way that the record of ``plan_id`` (of the task ``key``) goes to,
        the plan read on to its entry when it is not among those read already; None (and
        the record noted as refused, or its task as overfull) when it goes to none."""
        planned = self._ahead.pop(plan_id, None)
        while planned is None:
            entry = self._read_entry()
            if entry is None:  # the plan has no entry of it left: recorded twice, or not planned
                self._refused[plan_id] += 1
                return None
            if entry[0] == plan_id:
                planned = self._ahead.pop(plan_id)
        task = self._tasks.get(key) if planned == key else None
        if task is None:  # its task was edited, or counted already
            self._overfull.add(key)
        return task

    def _read_entry(self) -> tuple[str, TaskKey] | None:
        """The plan's next entry (its plan id and task), now among those read ahead; None at
        the plan's end. A task is closed once the entry read is of another task (or there
        is none): then it is counted if all its records are in."""
        assert self._entries is not None
        entry = next(self._entries, None)
        if entry is None:
            self._close(self._reading)
            self._reading = None
            return None
        plan_id, key = entry["plan_id"], (entry["env_id"], entry["task_id"])
        self._ahead[plan_id] = key
        if key != self._reading:
            self._close(self._reading)
            self._reading = key
            self._tasks[key] = _Task(0, closed=False)
        self._tasks[key].planned += 1
        return plan_id, key

    def _close(self, key: TaskKey | None) -> None:
        task = None if key is None else self._tasks.get(key)
        if key is None or task is None:
            return
        task.closed = True
        if len(task.records) == task.planned:
            self._count(key, task)

    # -- a plan held whole ----------------------------------------------------------------
    def _held_task(self, plan_id: str, key: TaskKey) -> _Task | None:
        if plan_id in self._seen:
            self._refused[plan_id] += 1
        self._seen.add(plan_id)
        planned = self._per_task[key]
        if key in self._counted or not planned:  # one more than the plan has
            self._overfull.add(key)
            return None
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = _Task(planned, closed=True)
        return task

    def _count(self, key: TaskKey, task: _Task) -> None:
        """Fold a task with all its records into the views and let its records go."""
        with contextlib.suppress(ValueError):  # a sample recorded twice: result raises it
            self._views.add(key, task_entry(key, task.records, self.ks))
            del self._tasks[key]
            if self._entries is None:
                self._counted.add(key)

    def _refused_ids(self) -> tuple[set[str], set[str]]:
        """The plan ids recorded twice, and those not in the plan."""
        if self._entries is None:
            return set(self._refused), self._seen - self._plan_ids
        planned = {p["plan_id"] for p in self._plan if p["plan_id"] in self._refused}
        repeated = {i for i, n in self._refused.items() if i in planned or n > 1}
        return repeated, set(self._refused) - planned

    def result(self, *, complete: bool) -> dict[str, Any]:
        """``graders`` (the versions of the graders that scored the completed episodes),
        ``accounting`` (the counts that must balance: every planned episode is completed,
        dropped or, in an interrupted card, still pending, exactly once) and ``views``.
        Raises ``CardCorruptError`` for a plan id recorded twice or not planned, for a task
        with more records than the plan has episodes of it, or when the card is
        ``complete`` with planned episodes not recorded, and ``ValueError`` for a sample of
        a task recorded twice."""
        if self._refused or (self._entries is None and not self._seen <= self._plan_ids):
            _refuse_ids(*self._refused_ids())
        if self._overfull:
            raise CardCorruptError(
                f"the card's files hold more records than its plan has episodes of {sorted(self._overfull)[:3]}"
                " (a record's task edited after the run?)"
            )
        counts, by_class = self._counts, self._by_class
        completed, dropped = counts["episode"], counts["drop"]
        not_run = by_class["skipped"] + by_class["cancelled"]
        pending = self._planned - completed - dropped
        if complete and pending:
            raise CardCorruptError(f"card marked complete with {pending} planned episodes not recorded")
        accounting = {
            "planned": self._planned,
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
        under_way = {key: task_entry(key, task.records, self.ks) for key, task in self._tasks.items() if task.records}
        for key, entry in under_way.items():
            self._views.add(key, entry)
            del self._tasks[key]
        if self._entries is None:
            self._counted.update(under_way)
        return self._views.views()


def _plan_shape(plan: Iterable[Mapping[str, Any]]) -> tuple[int, bool, bool]:
    """How many distinct plan ids ``plan`` has; whether it can be read alongside the records
    (``Tally``): its ids are distinct and each task's entries are together (checked on their
    hashes, so two that collide only cost holding the plan whole); and whether it has twin
    tasks (``frostgym.cards.twin_gap``)."""
    ids: array[int] = array("q")
    runs: array[int] = array("q")  # one hash per run of entries of one task
    twins = False
    last: TaskKey | None = None
    for entry in plan:
        ids.append(hash(entry["plan_id"]))
        key = (entry["env_id"], entry["task_id"])
        if key != last:
            runs.append(hash(key))
            last = key
            twins = twins or (isinstance(key[1], str) and is_twin_id(key[1]))
    unique = _distinct(ids)
    if unique and _distinct(runs):
        return len(ids), True, twins
    return (len(ids) if unique else len({p["plan_id"] for p in plan})), False, twins


def _distinct(values: array[int]) -> bool:
    ordered = sorted(values)
    return all(a != b for a, b in itertools.pairwise(ordered))
