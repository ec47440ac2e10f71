"""Compare two rollout cards episode by episode: is the candidate better than the base?

Why paired: every frostgym episode is identified by its plan entry (env, task, sample
seed), so two cards of the same plan hold the same episodes, and the comparison is of the
same episodes under two policies. Between two runs of one policy a third to a half of tasks
can flip (tau2 #540), so a gap is reported with a 95% paired bootstrap interval clustered
by task and, for pass@1, McNemar's exact p-value; a slice too small to say anything is
marked, not hidden.

Cards whose plans differ are refused (``PlanMismatchError``, naming the difference) unless
``overlap=True``, when only the shared episodes are compared and each side's unpaired count
is reported. Both cards are streamed (``frostgym.compare.reading``) and reduced to
``EpisodeFacts`` on the way, so two 100k-episode cards fit in well under a gigabyte.

The result is plain data with a fixed order and no timestamps: the same two cards give
byte-identical JSON.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from frostgym.cards.views import RULE_NAMES, Rule, TaskValues, default_ks
from frostgym.compare.costs import COST_METRICS, CostDelta, cost_deltas
from frostgym.compare.diagnostics import DIAGNOSTIC_METRICS, Diagnostics, diagnose, task_diversity
from frostgym.compare.facts import EpisodeFacts
from frostgym.compare.gates import Decision, Gate, GateResult, Measure, SliceName, judge
from frostgym.compare.private_gap import PrivateGap, private_gaps
from frostgym.compare.reading import CardFacts, PlanMismatchError, plan_difference, read_both
from frostgym.compare.views import (
    SliceId,
    TaskKey,
    ViewDelta,
    counted,
    discordant_by_task,
    per_task,
    slice_deltas,
    task_matrix,
    view_names,
)

SCHEMA = "frostgym.compare/1"
SLICE_KINDS: tuple[SliceName, ...] = ("env", "difficulty", "tag")


@dataclass(frozen=True)
class Pairing:
    """Which episodes were compared: the paired plan ids, and each side's unpaired count."""

    paired: int
    base_only: int
    cand_only: int
    overlap: bool


@dataclass(frozen=True)
class Transition:
    """How many paired episodes went from one outcome label to another."""

    base: str
    cand: str
    count: int


@dataclass(frozen=True)
class Comparison:
    """Everything ``compare_cards`` found; ``measure`` is what gates read."""

    base: str
    cand: str
    pairing: Pairing
    ks: tuple[int, ...]
    drops: Mapping[str, Mapping[str, int]]  # side -> drop class -> count
    views: tuple[ViewDelta, ...]
    transitions: tuple[Transition, ...]
    costs: tuple[CostDelta, ...]
    diagnostics: Mapping[str, Mapping[str, Diagnostics]]  # side -> slice label -> diagnostics
    slices: Mapping[str, tuple[str, ...]]  # slice kind -> members
    private_gaps: tuple[PrivateGap, ...] = ()
    decision: Decision | None = None
    gates: tuple[GateResult, ...] = ()
    _index: dict[tuple[str, str, str, str], ViewDelta] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self._index.update({(v.view, v.slice, v.key, v.rule): v for v in self.views})

    def view(
        self, view: str, slice_name: str = "overall", key: str = "", rule: Rule = "errors_as_failures"
    ) -> ViewDelta | None:
        return self._index.get((view, slice_name, key, rule))

    def slice_keys(self, slice_name: SliceName) -> Sequence[str]:
        return self.slices.get(slice_name, ())

    def measure(self, metric: str, slice_name: SliceName, key: str, rule: Rule) -> Measure | None:
        """A view (with its paired delta and interval), a cost or a diagnostic of one slice.
        Costs and diagnostics exist for the overall slice and per env; ``private_gap`` per
        env whose cards hold both test and private episodes."""
        found = self.view(metric, slice_name, key, rule)
        if found is not None:
            return Measure(found.base, found.cand, found.delta, found.ci_low, found.ci_high)
        label = _slice_label(slice_name, key)
        if metric == "private_gap":  # per env: test minus private mean reward, and its change
            for gap in self.private_gaps:
                if slice_name == "env" and gap.env_id == key:
                    return Measure(gap.base_gap, gap.cand_gap, gap.delta, gap.ci_low, gap.ci_high)
            return None
        if metric in COST_METRICS:
            for cost in self.costs:
                if cost.metric == metric and cost.slice == label:
                    return Measure(cost.base, cost.cand, cost.delta)
            return None
        if metric in DIAGNOSTIC_METRICS:
            base = self.diagnostics["base"].get(label)
            cand = self.diagnostics["cand"].get(label)
            if base is None or cand is None:
                return None
            b, c = base.value(metric), cand.value(metric)
            return Measure(b, c, None if b is None or c is None else c - b)
        return None

    def with_gates(self, gates: Sequence[Gate]) -> Comparison:
        """This comparison with every gate judged and the decision made."""
        decision, results = judge(gates, self)
        return replace(self, decision=decision, gates=tuple(results))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data in a fixed order (see ``frostgym compare --json``)."""
        return {
            "schema": SCHEMA,
            "base": self.base,
            "cand": self.cand,
            "decision": self.decision,
            "gates": [g.to_json() for g in self.gates],
            "pairing": {
                "paired": self.pairing.paired,
                "base_only": self.pairing.base_only,
                "cand_only": self.pairing.cand_only,
                "overlap": self.pairing.overlap,
            },
            "drops": {side: dict(sorted(counts.items())) for side, counts in self.drops.items()},
            "ks": list(self.ks),
            "views": [v.to_json() for v in self.views],
            "private_gaps": [g.to_json() for g in self.private_gaps],
            "label_transitions": [{"base": t.base, "cand": t.cand, "count": t.count} for t in self.transitions],
            "costs": [c.to_json() for c in self.costs],
            "diagnostics": {
                side: {label: d.to_json() for label, d in per_slice.items()}
                for side, per_slice in self.diagnostics.items()
            },
        }


def compare_cards(
    base: Path | str, cand: Path | str, gates: Sequence[Gate] | None = None, *, overlap: bool = False
) -> Comparison:
    """Compare the card directory ``cand`` against ``base``.

    Raises ``PlanMismatchError`` when the plans differ and ``overlap`` is False (the message
    names the difference), ``CardCorruptError`` / ``FrostgymError`` for a card that cannot
    be read. With ``gates`` the result carries a decision (``promote`` or ``block``)."""
    base_facts, cand_facts = read_both(Path(base), Path(cand))
    difference = plan_difference(base_facts, cand_facts)
    if difference is not None and not overlap:
        raise PlanMismatchError(f"the cards' plans differ: {difference}; pass --overlap to compare the shared episodes")
    comparison = _compare(base_facts, cand_facts, overlap)
    return comparison if gates is None else comparison.with_gates(gates)


def _compare(base: CardFacts, cand: CardFacts, overlap: bool) -> Comparison:
    # A plan id both plans hold with the same entry (env, task, sample, seed) is one episode.
    shared = sorted(i for i in set(base.facts) & set(cand.facts) if base.plan[i] == cand.plan[i])
    pairing = Pairing(len(shared), len(base.facts) - len(shared), len(cand.facts) - len(shared), overlap)
    pairs = [(base.facts[plan_id], cand.facts[plan_id]) for plan_id in shared]
    per_task_n = Counter(b.task for b, _ in pairs)
    ks = tuple(default_ks(max(per_task_n.values(), default=1)))
    components = {name for b, c in pairs for side in (b, c) for name in side.as_sample.components or ()}
    views = view_names(ks, components)

    tables: dict[Rule, tuple[dict[TaskKey, TaskValues], dict[TaskKey, TaskValues]]] = {}
    for rule in RULE_NAMES:
        if rule != RULE_NAMES[0] and not any(b.drop_class or c.drop_class for b, c in pairs):
            tables[rule] = tables[RULE_NAMES[0]]  # no drops: every rule counts the same episodes
            continue
        tables[rule] = (
            per_task(counted((b for b, _ in pairs), rule), ks),
            per_task(counted((c for _, c in pairs), rule), ks),
        )
    tasks: list[TaskKey] = sorted(per_task_n)
    matrix = task_matrix(tasks, tables, views)
    row_of = {task: row for row, task in enumerate(tasks)}

    members: dict[SliceId, set[TaskKey]] = defaultdict(set)
    for b, _ in pairs:
        for slice_id in _slice_ids(b):
            members[slice_id].add(b.task)
    slice_ids: list[SliceId] = [("overall", ""), *sorted(members)]
    all_tasks = set(tasks)
    by_task = discordant_by_task(pairs)
    deltas: list[ViewDelta] = []
    # A slice with the same tasks as one before it (one env's card: overall, its env, its
    # difficulty) has the same values and, seeded by its tasks, the same intervals.
    done: dict[tuple[int, ...], list[ViewDelta]] = {}
    for slice_id in slice_ids:
        in_slice = all_tasks if slice_id[0] == "overall" else members[slice_id]
        indices = tuple(sorted(row_of[t] for t in in_slice))
        if indices not in done:
            discordant = {rule: _sum_counts(by_task[rule], in_slice) for rule in RULE_NAMES}
            seed = task_set_seed([tasks[i] for i in indices])
            rows = matrix[np.array(indices, dtype=np.int64)]
            done[indices] = slice_deltas(slice_id, seed, rows, discordant, views)
        deltas.extend(replace(v, slice=slice_id[0], key=slice_id[1]) for v in done[indices])

    envs = sorted({b.env_id for b, _ in pairs})
    diversity = [task_diversity([pair[index] for pair in pairs]) for index in (0, 1)]
    by_label: dict[str, list[tuple[EpisodeFacts, EpisodeFacts]]] = {"overall": pairs}
    for env_id in envs:
        by_label[f"env={env_id}"] = [(b, c) for b, c in pairs if b.env_id == env_id]
    return Comparison(
        base=str(base.directory),
        cand=str(cand.directory),
        pairing=pairing,
        ks=ks,
        drops={side: _drop_counts(f for f in facts.facts.values()) for side, facts in (("base", base), ("cand", cand))},
        views=tuple(deltas),
        transitions=_transitions(pairs),
        costs=tuple(cost for label, group in by_label.items() for cost in cost_deltas(label, group)),
        diagnostics={
            side: {
                label: diagnose([pair[index] for pair in group], diversity[index]) for label, group in by_label.items()
            }
            for index, side in ((0, "base"), (1, "cand"))
        },
        slices={kind: tuple(sorted(key for k, key in members if k == kind)) for kind in SLICE_KINDS},
        private_gaps=tuple(private_gaps(pairs)),
    )


def _slice_ids(fact: EpisodeFacts) -> list[SliceId]:
    ids: list[SliceId] = [("env", fact.env_id), ("difficulty", fact.difficulty or "none")]
    ids.extend(("tag", tag) for tag in sorted(set(fact.tags)))
    return ids


def task_set_seed(tasks: Sequence[TaskKey]) -> tuple[str, ...]:
    """The bootstrap's seed parts for a set of tasks: a digest of their sorted keys, so the
    same tasks get the same interval in any slice and any comparison."""
    digest = hashlib.sha256("\n".join(f"{env}\x00{task}" for env, task in sorted(tasks)).encode()).hexdigest()
    return ("compare", digest)


def _sum_counts(counts: Mapping[TaskKey, tuple[int, int]], tasks: set[TaskKey]) -> tuple[int, int] | None:
    """A slice's discordant pair counts: the sum over its tasks, None when none has a pair."""
    cells = [counts[t] for t in tasks if t in counts]
    return (sum(c[0] for c in cells), sum(c[1] for c in cells)) if cells else None


def _outcome(fact: EpisodeFacts) -> str:
    if fact.drop_class is not None:
        return f"drop:{fact.drop_class}"
    if fact.passed:
        return "passed"
    return fact.label or "failed"


def _transitions(pairs: Sequence[tuple[EpisodeFacts, EpisodeFacts]]) -> tuple[Transition, ...]:
    counts = Counter((_outcome(b), _outcome(c)) for b, c in pairs)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return tuple(Transition(base, cand, count) for (base, cand), count in ordered)


def _drop_counts(facts: Any) -> dict[str, int]:
    return dict(sorted(Counter(f.drop_class for f in facts if f.drop_class is not None).items()))


def _slice_label(slice_name: str, key: str) -> str:
    return "overall" if slice_name == "overall" else f"{slice_name}={key}"
