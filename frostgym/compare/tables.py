"""A comparison as terminal tables: what a person reads before the JSON.

Why this order: pairing and drops first (a comparison with many drops or unpaired episodes
is not the comparison it looks like), then the overall views with intervals, capability or
compression (both pass@k curves and the reach sets, with several samples per task), the per-env
picture, where outcomes moved, costs, diagnostics, and last the gates (each verdict beside
the interval it was judged on) and the decision. Tables show the errors_as_failures rule; the JSON has both rules.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.table import Table

from frostgym.compare.compare import Comparison
from frostgym.compare.costs import MONEY
from frostgym.compare.diagnostics import DIAGNOSTIC_METRICS
from frostgym.compare.views import ViewDelta

#: Label transitions shown (the JSON has all).
TRANSITION_ROWS = 12


def comparison_tables(comparison: Comparison) -> Iterator[Table]:
    """Every table of a comparison, in reading order."""
    p = comparison.pairing
    pairing = Table("paired episodes", "only in base", "only in cand", "drops (base)", "drops (cand)", title="Pairing")
    pairing.add_row(
        str(p.paired),
        str(p.base_only),
        str(p.cand_only),
        _counts(comparison.drops["base"]),
        _counts(comparison.drops["cand"]),
    )
    yield pairing
    yield _views_table(
        "Overall (errors as failures)",
        [v for v in comparison.views if v.slice == "overall" and v.rule == "errors_as_failures"],
    )
    yield from _capability_tables(comparison)
    headline = [
        v
        for v in comparison.views
        if v.slice != "overall" and v.rule == "errors_as_failures" and v.view in ("mean_reward", "pass@1")
    ]
    if headline:
        yield _views_table("Per slice: mean reward and pass@1 (errors as failures)", headline, with_slice=True)
    if comparison.private_gaps:
        gaps = Table(
            "env", "base gap", "cand gap", "delta", "95% CI", "test tasks", "private tasks", title="Test minus private"
        )
        for gap in comparison.private_gaps:
            interval = "-" if gap.ci_low is None or gap.ci_high is None else f"[{gap.ci_low:+.3f}, {gap.ci_high:+.3f}]"
            gaps.add_row(
                gap.env_id,
                _num(gap.base_gap, signed=True),
                _num(gap.cand_gap, signed=True),
                _num(gap.delta, signed=True),
                interval,
                str(gap.test_tasks),
                str(gap.private_tasks),
            )
        yield gaps
    transitions = Table("base outcome", "cand outcome", "episodes", title="Outcome transitions (paired episodes)")
    for t in comparison.transitions[:TRANSITION_ROWS]:
        transitions.add_row(t.base, t.cand, str(t.count))
    yield transitions
    costs = Table("slice", "cost", "base", "cand", "delta", "cand/base", title="Costs")
    for c in comparison.costs:
        shown = _usd if c.metric == MONEY else _num  # fractions of a cent: significant digits
        costs.add_row(c.slice, c.metric, shown(c.base), shown(c.cand), shown(c.delta, signed=True), _num(c.ratio))
    yield costs
    base, cand = comparison.diagnostics["base"]["overall"], comparison.diagnostics["cand"]["overall"]
    diagnostics = Table("diagnostic", "base", "cand", title="Diagnostics (overall)")
    for metric in DIAGNOSTIC_METRICS:
        diagnostics.add_row(metric, _num(base.value(metric)), _num(cand.value(metric)))
    diagnostics.add_row("hacking suspects", str(len(base.suspects)), str(len(cand.suspects)))
    yield diagnostics
    if comparison.decision is not None:
        gates = Table("gate", "slice", "value", "threshold", "verdict", title=f"Gates: {comparison.decision.upper()}")
        gates.add_column("interval (95%)", no_wrap=True)  # beside the verdict it was judged on, never cut
        gates.add_column("detail")
        for g in comparison.gates:
            verdict = "pass" if g.passed else "FAIL"
            gates.add_row(g.name, g.slice, _num(g.value), f"{g.threshold:g}", verdict, g.interval_text(), g.detail)
        yield gates


def _capability_tables(comparison: Comparison) -> Iterator[Table]:
    found = comparison.capability
    if found is None:
        return
    crossing = "the curves do not cross" if found.crossing is None else f"the curves cross at k = {found.crossing}"
    curve = Table(
        "k", "base pass@k", "cand pass@k", "delta", "95% CI", "tasks",
        title="Capability or compression: pass@k curves (errors as failures)", caption=crossing,
    )  # fmt: skip
    for v in found.curve:
        interval = "-" if v.ci_low is None or v.ci_high is None else f"[{v.ci_low:+.3f}, {v.ci_high:+.3f}]"
        tasks = f"{v.n_tasks}" + (" (too few to say)" if v.too_small else "")
        curve.add_row(
            v.view.removeprefix("pass@"), _num(v.base), _num(v.cand), _num(v.delta, signed=True), interval, tasks
        )
    yield curve
    reach = Table(
        "tasks", "base reaches", "cand reaches", "both", "only cand", "only base",
        title="Reach: tasks solved in any sample", caption=f"verdict: {found.verdict}",
    )  # fmt: skip
    both = found.cand_reached - len(found.cand_only)
    reach.add_row(
        str(found.tasks), str(found.base_reached), str(found.cand_reached), str(both),
        str(len(found.cand_only)), str(len(found.base_only)),
    )  # fmt: skip
    yield reach


def capability_line(comparison: Comparison) -> str:
    """The one-line capability verdict the command prints (``frostgym.compare.capability``)."""
    found = comparison.capability
    if found is None:
        return "capability: no verdict: one sample per task, so no pass@k curve (run with --samples N)"
    return f"capability: {found.verdict}: {found.reason}"


def _views_table(title: str, rows: list[ViewDelta], *, with_slice: bool = False) -> Table:
    columns = ["view", "base", "cand", "delta", "95% CI", "McNemar p", "tasks"]
    table = Table(*(["slice", *columns] if with_slice else columns), title=title)
    for v in rows:
        interval = "-" if v.ci_low is None or v.ci_high is None else f"[{v.ci_low:+.3f}, {v.ci_high:+.3f}]"
        tasks = f"{v.n_tasks}" + (" (too few to say)" if v.too_small else "")
        p_value = "-" if v.p_value is None else f"{v.p_value:.3g}"
        cells = [v.view, _num(v.base), _num(v.cand), _num(v.delta, signed=True), interval, p_value, tasks]
        table.add_row(*([f"{v.slice}={v.key}", *cells] if with_slice else cells))
    return table


def _num(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _usd(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


def _counts(counts: dict[str, int] | object) -> str:
    if not isinstance(counts, dict) or not counts:
        return "0"
    return ", ".join(f"{name} {count}" for name, count in counts.items())
