"""Compare two rollout cards episode by episode: is the candidate better than the base?

Why paired: every frostgym episode is identified by its plan entry (env, task, sample
seed), so two cards of the same plan hold the same episodes, and the comparison is of the
same episodes under two policies. Between two runs of one policy a third to a half of tasks
can flip (tau2 #540), so a gap is reported with a 95% paired bootstrap interval clustered
by task and, for pass@1, McNemar's exact p-value; a slice too small to say anything is
marked, not hidden.

Cards whose plans differ are refused (``PlanMismatchError``, naming the difference) unless
``overlap=True``, when only the shared episodes are compared and each side's unpaired count
is reported. Both cards are streamed (``frostgym.compare.reading``; two large ones at once,
``frostgym.compare.parallel``) and reduced to columns (``EpisodeFacts``) on the way, so two
100k-episode cards fit in well under a gigabyte and the comparison is array arithmetic
over their rows.

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

from frostgym.cards.store import gc_paused
from frostgym.cards.views import RULE_NAMES, Rule, default_ks
from frostgym.compare.capability import CEILING_METRIC, Capability, capability, ceiling_k
from frostgym.compare.costs import COST_METRICS, CostDelta, cost_deltas
from frostgym.compare.diagnostics import DIAGNOSTIC_METRICS, Diagnostics, diagnose, task_diversity
from frostgym.compare.facts import EpisodeFacts, IntArray, TaskKey
from frostgym.compare.gates import Decision, Gate, GateResult, Measure, OwnInterval, SliceName, judge
from frostgym.compare.intervals import OwnSums, cost_sums
from frostgym.compare.parallel import read_both
from frostgym.compare.prices import Price, model_id, price_of
from frostgym.compare.private_gap import PrivateGap, private_gaps
from frostgym.compare.reading import CardFacts, plan_difference
from frostgym.compare.views import (
    SliceId,
    ViewDelta,
    components_of,
    counted,
    discordant_by_task,
    slice_deltas,
    task_sums,
    view_names,
)
from frostgym.core.errors import PlanMismatchError

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
    #: Capability or compression (``frostgym.compare.capability``); None with one sample per task.
    capability: Capability | None = None
    #: Each side's model id and its declared price, with a price table (``--prices``); else None.
    prices: Mapping[str, tuple[str, Price]] | None = None
    decision: Decision | None = None
    gates: tuple[GateResult, ...] = ()
    #: The candidate's per-task sums, for its own intervals (``cand_interval``); not in the JSON.
    own_sums: OwnSums | None = field(default=None, repr=False, compare=False)
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
        env whose cards hold both test and private episodes; ``pass@max`` is pass@K at the
        largest k both cards have on the slice (``frostgym.compare.capability``)."""
        metric = self._ceiling(metric, slice_name, key, rule)
        found = self.view(metric, slice_name, key, rule)
        if found is not None:
            return Measure(found.base, found.cand, found.delta, found.ci_low, found.ci_high, found.too_small)
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

    def cand_interval(self, metric: str, slice_name: SliceName, key: str, rule: Rule) -> OwnInterval | str:
        """The candidate's own 95% interval for a view or a cost of one slice
        (``frostgym.compare.intervals``), or why there is none."""
        metric = self._ceiling(metric, slice_name, key, rule)
        own = self.own_sums
        if own is None:
            return "this comparison holds no per-task sums"
        rows = own.rows(slice_name, key)
        if rows is None:
            return f"no slice {_slice_label(slice_name, key)}"
        return own.interval(metric, rule, rows, task_set_seed([own.tasks[i] for i in rows.tolist()]))

    def _ceiling(self, metric: str, slice_name: SliceName, key: str, rule: Rule) -> str:
        """``metric``, with ``pass@max`` read as the pass@K it stands for on this slice."""
        if metric != CEILING_METRIC:
            return metric
        k = ceiling_k(self.ks, [v for k in self.ks if (v := self.view(f"pass@{k}", slice_name, key, rule)) is not None])
        return metric if k is None else f"pass@{k}"

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
            "capability": None if self.capability is None else self.capability.to_json(),
            "label_transitions": [{"base": t.base, "cand": t.cand, "count": t.count} for t in self.transitions],
            "costs": [c.to_json() for c in self.costs],
            "prices": None
            if self.prices is None
            else {
                side: {
                    "model": model,
                    "input_per_million": price.input_per_million,
                    "output_per_million": price.output_per_million,
                }
                for side, (model, price) in self.prices.items()
            },
            "diagnostics": {
                side: {label: d.to_json() for label, d in per_slice.items()}
                for side, per_slice in self.diagnostics.items()
            },
        }


def compare_cards(
    base: Path | str,
    cand: Path | str,
    gates: Sequence[Gate] | None = None,
    *,
    overlap: bool = False,
    prices: Mapping[str, Price] | None = None,
) -> Comparison:
    """Compare the card directory ``cand`` against ``base``.

    Raises ``PlanMismatchError`` when the plans differ and ``overlap`` is False (the message
    names the difference), ``CardCorruptError`` / ``FrostgymError`` for a card that cannot
    be read. With ``gates`` the result carries a decision (``promote`` or ``block``); with
    ``prices`` (``frostgym.compare.prices.read_prices``) its costs include ``cost_per_episode``,
    and a card whose model the table does not price raises ``PriceFileError`` naming it."""
    base_facts, cand_facts = read_both(Path(base), Path(cand))
    return compare_facts(base_facts, cand_facts, gates, overlap=overlap, prices=prices)


def compare_facts(
    base: CardFacts,
    cand: CardFacts,
    gates: Sequence[Gate] | None = None,
    *,
    overlap: bool = False,
    prices: Mapping[str, Price] | None = None,
) -> Comparison:
    """``compare_cards`` of two cards already read (``read_card_facts``): for a caller that
    holds them for more than the comparison (a report), so neither is read twice. Raises
    ``PlanMismatchError`` and ``PriceFileError`` as ``compare_cards`` does."""
    if not overlap and (difference := plan_difference(base, cand)) is not None:  # with overlap: no need to know
        raise PlanMismatchError(f"the cards' plans differ: {difference}; pass --overlap to compare the shared episodes")
    priced = (
        None
        if prices is None
        else {
            side: (model_id(facts.card), price_of(prices, facts.card, side))
            for side, facts in (("base", base), ("cand", cand))
        }
    )
    with gc_paused():  # as while reading: many short-lived objects beside two large plans
        comparison = _compare(base, cand, overlap, priced)
    return comparison if gates is None else comparison.with_gates(gates)


def _compare(
    base: CardFacts, cand: CardFacts, overlap: bool, priced: Mapping[str, tuple[str, Price]] | None = None
) -> Comparison:
    # A plan id both plans hold with the same entry (env, task, sample, seed) is one episode.
    shared = sorted(base.rows.keys() & cand.rows.keys())
    if base.card["plan"]["episodes"] != cand.card["plan"]["episodes"]:  # else every shared entry is the same
        shared = [i for i in shared if base.plan[i] == cand.plan[i]]
    pairing = Pairing(len(shared), len(base.facts) - len(shared), len(cand.facts) - len(shared), overlap)
    # Row i of each side is the i-th pair, in plan id order.
    b = base.facts.take(np.array([base.rows[i] for i in shared], dtype=np.int64))
    c = cand.facts.take(np.array([cand.rows[i] for i in shared], dtype=np.int64))
    per_task_n = np.bincount(b.task, minlength=len(b.task_keys))
    ks = tuple(default_ks(int(per_task_n.max()) if len(shared) else 1))
    tasks: list[TaskKey] = sorted(b.task_keys[t] for t in np.flatnonzero(per_task_n).tolist())
    row_of = {task: row for row, task in enumerate(tasks)}
    base_row = _task_rows(b, row_of)
    cand_row = _task_rows(c, row_of)
    components = [*components_of(b), *components_of(c)]
    views = view_names(ks, components)

    # Per task, rule and view: base numerator, base denominator, cand numerator, cand denominator.
    matrix = np.zeros((len(tasks), len(RULE_NAMES), len(views), 4))
    drops = bool((~b.done).any() or (~c.done).any())
    for r, rule in enumerate(RULE_NAMES):
        if r and not drops:
            matrix[:, r] = matrix[:, 0]  # no drops: every rule counts the same episodes
            continue
        matrix[:, r, :, 0:2] = task_sums(b, counted(b, rule), base_row, len(tasks), ks, views)
        matrix[:, r, :, 2:4] = task_sums(c, counted(c, rule), cand_row, len(tasks), ks, views)

    members = _members(b, row_of)
    slice_ids: list[SliceId] = [("overall", ""), *sorted(members)]
    all_rows = np.arange(len(tasks), dtype=np.int64)
    by_task = discordant_by_task(b, c, base_row, len(tasks))
    deltas: list[ViewDelta] = []
    # A slice with the same tasks as one before it (one env's card: overall, its env, its
    # difficulty) has the same values and, seeded by its tasks, the same intervals.
    done: dict[tuple[int, ...], list[ViewDelta]] = {}
    for slice_id in slice_ids:
        indices = all_rows if slice_id[0] == "overall" else np.array(sorted(members[slice_id]), dtype=np.int64)
        key = tuple(indices.tolist())
        if key not in done:
            discordant = {rule: by_task[rule].within(indices) for rule in RULE_NAMES}
            seed = task_set_seed([tasks[i] for i in key])
            done[key] = slice_deltas(slice_id, seed, matrix[indices], discordant, views)
        deltas.extend(replace(v, slice=slice_id[0], key=slice_id[1]) for v in done[key])

    env_of_task = b.env_of_task()
    pair_env = np.array([env_of_task[t] for t in range(len(b.task_keys))], dtype=object)[b.task]
    by_label: dict[str, tuple[EpisodeFacts, EpisodeFacts]] = {"overall": (b, c)}
    envs = sorted(set(pair_env.tolist()))
    for env_id in envs:
        in_env = pair_env == env_id
        by_label[f"env={env_id}"] = (b, c) if len(envs) == 1 else (b.take(in_env), c.take(in_env))
    diversity = (task_diversity(b), task_diversity(c))
    side_prices = None if priced is None else (priced["base"][1], priced["cand"][1])
    return Comparison(
        base=str(base.directory),
        cand=str(cand.directory),
        pairing=pairing,
        ks=ks,
        drops={side: _drop_counts(facts.facts) for side, facts in (("base", base), ("cand", cand))},
        views=tuple(deltas),
        transitions=_transitions(b, c),
        costs=tuple(cost for label, (bs, cs) in by_label.items() for cost in cost_deltas(label, bs, cs, side_prices)),
        diagnostics={
            side: {label: diagnose(group[index], diversity[index]) for label, group in by_label.items()}
            for index, side in ((0, "base"), (1, "cand"))
        },
        slices={kind: tuple(sorted(key for k, key in members if k == kind)) for kind in SLICE_KINDS},
        private_gaps=tuple(private_gaps(b, c)),
        capability=capability(ks, deltas, tasks, b, base_row, c, cand_row),
        prices=priced,
        own_sums=OwnSums(
            tasks=tuple(tasks),
            views=tuple(views),
            view_sums=matrix[:, :, :, 2:4].copy(),
            costs=cost_sums(c, cand_row, len(tasks), None if side_prices is None else side_prices[1]),
            members={slice_id: np.array(sorted(rows), dtype=np.int64) for slice_id, rows in members.items()},
        ),
    )


def _task_rows(facts: EpisodeFacts, row_of: Mapping[TaskKey, int]) -> IntArray:
    """Each row's task as a row of the comparison's task list (-1: not in it)."""
    rows: IntArray = np.array([row_of.get(key, -1) for key in facts.task_keys], dtype=np.int64)
    return rows[facts.task] if len(facts) else np.zeros(0, dtype=np.int64)


def _members(pairs: EpisodeFacts, row_of: Mapping[TaskKey, int]) -> dict[SliceId, set[int]]:
    """The task rows of each slice (env, difficulty, tag) the base side's pairs fall in."""
    members: dict[SliceId, set[int]] = defaultdict(set)
    names, tag_sets = len(pairs.names), len(pairs.tag_sets)
    combos = np.unique((pairs.task * names + pairs.difficulty) * tag_sets + pairs.tags).tolist()
    for combo in combos:
        task, difficulty, tags = combo // (names * tag_sets), combo // tag_sets % names, combo % tag_sets
        key = pairs.task_keys[task]
        ids: list[SliceId] = [("env", key[0]), ("difficulty", pairs.names[difficulty] or "none")]
        ids.extend(("tag", tag) for tag in sorted(set(pairs.tag_sets[tags])))
        for slice_id in ids:
            members[slice_id].add(row_of[key])
    return members


def task_set_seed(tasks: Sequence[TaskKey]) -> tuple[str, ...]:
    """The bootstrap's seed parts for a set of tasks: a digest of their sorted keys, so the
    same tasks get the same interval in any slice and any comparison."""
    digest = hashlib.sha256("\n".join(f"{env}\x00{task}" for env, task in sorted(tasks)).encode()).hexdigest()
    return ("compare", digest)


def _outcomes(facts: EpisodeFacts) -> tuple[list[str], IntArray]:
    """The outcomes the rows have (a drop class, passed, or the grade's label: "failed"
    without one), and each row's index among them."""
    names = len(facts.names)
    combos, inverse = np.unique((facts.drop * 2 + facts.passed) * names + facts.label, return_inverse=True)
    outcomes = []
    for combo in combos.tolist():
        drop, passed, label = combo // (2 * names), combo // names % 2, combo % names
        outcomes.append(f"drop:{facts.names[drop]}" if drop else "passed" if passed else facts.names[label] or "failed")
    return outcomes, inverse.reshape(-1)


def _transitions(base: EpisodeFacts, cand: EpisodeFacts) -> tuple[Transition, ...]:
    base_outcomes, base_rows = _outcomes(base)
    cand_outcomes, cand_rows = _outcomes(cand)
    width = len(cand_outcomes)
    pairs, numbers = np.unique(base_rows * width + cand_rows, return_counts=True)
    counts: Counter[tuple[str, str]] = Counter()
    for pair, count in zip(pairs.tolist(), numbers.tolist(), strict=True):
        counts[(base_outcomes[pair // width], cand_outcomes[pair % width])] += count
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return tuple(Transition(base, cand, count) for (base, cand), count in ordered)


def _drop_counts(facts: EpisodeFacts) -> dict[str, int]:
    counts = np.bincount(facts.drop, minlength=len(facts.names)).tolist()
    return dict(sorted((facts.names[code], n) for code, n in enumerate(counts) if code and n))


def _slice_label(slice_name: str, key: str) -> str:
    return "overall" if slice_name == "overall" else f"{slice_name}={key}"
