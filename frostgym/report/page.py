"""``index.html``: the report's static sections, rendered here, and the browser's shell.

Why rendered in Python: accounting, drops, views, comparisons and plots are the numbers a
decision rests on, so they are plain HTML tables that read (and print) without JavaScript
and whose values are the card's and the comparison's own, formatted in one place. Only the
trajectory browser runs script (``assets/report.js``), inlined with the stylesheet so the
page needs nothing but the ``data/`` folder beside it. A Content-Security-Policy forbids
every connection: the page cannot reach the network even by mistake.

Why the headline first: the first screen is what a person reads, so it holds the answer
(``frostgym.report.headline``: pass@1 per env and level with its interval against the
oracle's ceiling, the gate decision, the most common failure labels), and the bookkeeping
that answer rests on (cards, accounting, views, plots) follows it.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import quote

import numpy as np
import orjson

from frostgym.cards.views import RULE_NAMES
from frostgym.compare.compare import Comparison
from frostgym.compare.training_log import TrainingLog
from frostgym.report import plots
from frostgym.report.estimates import SliceEstimate, pass_at_1
from frostgym.report.headline import CEILING_AGENT, build_headline, category
from frostgym.report.records import ReportCard
from frostgym.version import __version__

CSP = (
    "default-src 'none'; script-src 'unsafe-inline' file: 'self'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'"
)
MISSING = "\N{EN DASH}"  # a value the card does not have
TIMES = "\N{MULTIPLICATION SIGN}"
#: Drops listed by plan id per (class, stage) in the manifest; the rest are a filter away.
LISTED_DROPS = 20


@dataclass(frozen=True)
class CardComparison:
    """One candidate against the baseline: the comparison, or why there is none."""

    base: str
    cand: str
    comparison: Comparison | None
    note: str = ""


def render_page(
    cards: Sequence[ReportCard], comparisons: Sequence[CardComparison], training: TrainingLog | None = None
) -> str:
    """The whole ``index.html`` for ``cards`` (their data files written beside it), with the
    trainer's KL and entropy per window of steps and their flags when ``training`` is given."""
    title = "frostgym report: " + ", ".join(card.label for card in cards)
    estimates = {card.label: pass_at_1(card.facts.facts) for card in cards}
    sections = [
        _headline_section(cards, estimates, comparisons),
        _decision_section(comparisons),
        _cards_section(cards),
        _accounting_section(cards),
        _views_section(cards),
        _plots_section(cards, estimates),
        _compare_section(comparisons),
        _training_section(training),
        _browser_section(),
    ]
    data = {"cards": [{"label": card.label, "number": card.number, "chunks": card.chunks} for card in cards]}
    scripts = "".join(f'<script src="data/c{card.number}/index.js"></script>\n' for card in cards)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>\n{_asset('report.css')}</style>\n</head>\n<body>\n"
        f"<header><h1>{_e(title)}</h1>{_nav(comparisons, training is not None)}</header>\n<main>\n"
        + "\n".join(s for s in sections if s)
        + "\n</main>\n"
        f'<script type="application/json" id="frostgym-data">{_script_json(data)}</script>\n'
        f"<script>\n{_asset('report.js')}</script>\n{scripts}</body>\n</html>\n"
    )


# ---- sections ---------------------------------------------------------------------------


def _nav(comparisons: Sequence[CardComparison], training: bool = False) -> str:
    links = [("cards", "Cards"), ("accounting", "Accounting and drops"), ("views", "Views"), ("plots", "Plots")]
    if any(c.comparison is not None and c.comparison.decision is not None for c in comparisons):
        links.insert(0, ("decision", "Decision"))
    links.insert(0, ("headline", "Headline"))
    if comparisons:
        links.append(("compare", "Comparison"))
    if training:
        links.append(("training", "Training"))
    links.append(("browser", "Trajectories"))
    return "<nav>" + " · ".join(f'<a href="#{key}">{_e(text)}</a>' for key, text in links) + "</nav>"


def _headline_section(
    cards: Sequence[ReportCard],
    estimates: Mapping[str, list[SliceEstimate]],
    comparisons: Sequence[CardComparison],
) -> str:
    """The first screen: pass@1 per env and level with its interval, against the oracle's
    ceiling when an oracle card is among the cards, as a chart and its numbers; the gate
    decision when there is one; the most common failure labels."""
    headline = build_headline([(card.label, card.facts) for card in cards], [estimates[card.label] for card in cards])
    if not headline.rows:
        return ""
    categories = list(dict.fromkeys((row.env, row.level) for row in headline.rows))
    # One series per agent; per card where an agent plays one env at one level twice.
    by_agent = [(row.agent, row.env, row.level) for row in headline.rows]
    keyed = {row: row.agent if len(set(by_agent)) == len(by_agent) else row.card for row in headline.rows}
    found = {(keyed[row], row.env, row.level): row for row in headline.rows}
    names = list(dict.fromkeys(keyed[row] for row in headline.rows))
    series = {
        name: [_estimate(found[(name, *where)].estimate if (name, *where) in found else None) for where in categories]
        for name in names
    }
    ceiling_rows = {(row.env, row.level): row.ceiling for row in reversed(headline.rows)}
    ceiling = [_value(ceiling_rows[where]) for where in categories] if headline.ceiling_cards else None
    against = f" against the {CEILING_AGENT}'s ceiling" if ceiling is not None else ""
    svg = plots.interval_bars(
        [category(env, level) for env, level in categories],
        series,
        title=f"pass@1 per env and level{against}",
        ylabel="pass@1 (%)",
        ceiling=ceiling,
        ceiling_label=f"{CEILING_AGENT}'s ceiling",
    )
    several = len(names) > 1
    header = [*(["agent"] if several else []), "family", "env", "level", "pass@1 [95% interval]"]
    header += [f"ceiling ({CEILING_AGENT})"] if ceiling is not None else []
    header += ["most common failures"]
    rows = []
    for row in headline.rows:
        cells = [keyed[row]] if several else []
        cells += [row.family, row.env, row.level or MISSING, _interval_text(row.estimate)]
        if ceiling is not None:
            shown = _num(None if row.ceiling is None else row.ceiling.value)
            cells.append(shown + row.ceiling_note)
        cells.append(", ".join(f"{label} {count}" for label, count in row.failures) or MISSING)
        rows.append(cells)
    parts = [f'<div class="plot-row"><figure class="plot">{svg}</figure>{_table(header, rows)}</div>']
    for item in comparisons:
        if item.comparison is not None and item.comparison.decision is not None:
            decision = item.comparison.decision
            parts.append(
                f'<p class="headline-decision">Decision, {_e(item.cand)} against {_e(item.base)}: '
                f'<span class="decision decision-{_e(decision)}">{_e(decision)}</span> '
                '(<a href="#decision">the gates</a>)</p>'
            )
    for agent, failures in headline.failures.items():
        if failures:
            listed = " · ".join(f"{_e(label)} ({count})" for label, count in failures)
            parts.append(f"<p><b>Most common failure labels of {_e(agent)}:</b> {listed}</p>")
    if ceiling is None:
        parts.append(f'<p class="muted">No {CEILING_AGENT} card among the cards: no ceiling is drawn.</p>')
    parts.append(
        '<p class="muted">Errors count as failures; the intervals are 95%, bootstrap over tasks. The bookkeeping '
        "these numbers rest on (cards, accounting and drops, views, plots) follows below.</p>"
    )
    return _section("headline", "Headline", "".join(parts))


def _cards_section(cards: Sequence[ReportCard]) -> str:
    rows = []
    for card in cards:
        data = card.facts.card
        identity = data.get("config", {}).get("identity", {})
        graders = ", ".join(
            f"{name} {'/'.join(versions)}" for name, versions in sorted(data.get("graders", {}).items())
        )
        rows.append(
            [
                card.label,
                str(card.facts.directory),
                str(data.get("status", "")),
                str(data.get("agent", {}).get("spec", "")),
                ", ".join(_env_spec(env, identity.get("env_options", {})) for env in identity.get("env_ids", [])),
                str(identity.get("split", "")),
                f"{_or_all(identity.get('episodes'))} {TIMES} {identity.get('samples', '')}",
                str(identity.get("seed", "")),
                graders,
                str(data.get("created_at", "")),
                str(data.get("frostgym_version", "")),
            ]
        )
    header = [
        "card",
        "directory",
        "status",
        "agent",
        "envs",
        "split",
        f"tasks {TIMES} samples",
        "seed",
        "graders",
        "created",
        "frostgym",
    ]
    return _section(
        "cards", "Cards", _table(header, rows) + f'<p class="muted">Report written by frostgym {_e(__version__)}.</p>'
    )


def _decision_section(comparisons: Sequence[CardComparison]) -> str:
    judged = [c for c in comparisons if c.comparison is not None and c.comparison.decision is not None]
    if not judged:
        return ""
    parts = []
    for item in judged:
        assert item.comparison is not None
        decision = item.comparison.decision or ""
        parts.append(
            f'<h3>{_e(item.cand)} against {_e(item.base)}: <span class="decision decision-{_e(decision)}">'
            f"{_e(decision)}</span></h3>"
        )
        rows = [
            [
                g.name,
                g.metric,
                g.kind,
                g.slice,
                _num(g.value),
                _num(g.threshold),
                "pass" if g.passed else "FAIL",
                g.detail,
            ]
            for g in item.comparison.gates
        ]
        parts.append(_table(["gate", "metric", "kind", "slice", "value", "threshold", "verdict", "detail"], rows))
    return _section("decision", "Decision", "".join(parts))


def _accounting_section(cards: Sequence[ReportCard]) -> str:
    keys = ["planned", "completed", "dropped", "pending", "succeeded", "failed", "errored", "skipped", "balanced"]
    if any("excluded" in card.facts.card.get("accounting", {}) for card in cards):  # eval --exclude
        keys.insert(1, "excluded")
    rows = [[card.label, *(str(card.facts.card.get("accounting", {}).get(k, "")) for k in keys)] for card in cards]
    parts = [_table(["card", *keys], rows, numeric=True)]
    for card in cards:  # declared before the run (eval --exclude): not drops, never in a denominator
        excluded = card.facts.card.get("config", {}).get("identity", {}).get("excluded") or {}
        if excluded.get("tasks"):
            rows = [[t.get("env", ""), t.get("task_id", ""), t.get("reason", "")] for t in excluded["tasks"]]
            parts.append(
                f"<h3>Excluded from {_e(card.label)}'s plan before the run ({len(rows)} tasks)</h3>"
                + _table(["env", "task", "why"], rows)
            )
    clean = [card.label for card in cards if not (card.facts.facts.drop != 0).any()]
    if clean:
        parts.append(f"<p>No drops in {_e(', '.join(clean))}.</p>")
    for card in cards:
        facts = card.facts.facts
        drop_rows = np.flatnonzero(facts.drop != 0).tolist()
        if not drop_rows:
            continue
        groups: dict[tuple[str, str], list[str]] = {}
        for row in drop_rows:
            key = (str(facts.names[int(facts.drop[row])]), str(card.stages[row]))
            groups.setdefault(key, []).append(str(facts.plan_ids[row]))
        table_rows = []
        for (drop_class, stage), plan_ids in sorted(groups.items()):
            listed = ", ".join(_episode_link(p) for p in plan_ids[:LISTED_DROPS])
            more = f" and {len(plan_ids) - LISTED_DROPS} more" if len(plan_ids) > LISTED_DROPS else ""
            filter_link = f'<a href="#drop={_e(quote(drop_class, safe=""))}">browse</a>'
            table_rows.append([_e(drop_class), _e(stage), str(len(plan_ids)), listed + more, filter_link])
        parts.append(f"<h3>Drops of {_e(card.label)}</h3>")
        parts.append(_table(["class", "stage", "count", "episodes", ""], table_rows, escape=False))
    return _section("accounting", "Accounting and drops", "".join(parts))


def _views_section(cards: Sequence[ReportCard]) -> str:
    parts = []
    for card in cards:
        views = card.facts.card.get("views", {})
        ks = [str(k) for k in views.get("ks", [1])]
        for number, rule in enumerate(RULE_NAMES):
            table = _views_table(views, rule, ks)
            rule_text = views.get("rules", {}).get(rule, "")
            caption = f'<p class="rule"><b>Reporting rule: {_e(rule)}.</b> {_e(rule_text)}</p>'
            body = f"<h3>{_e(card.label)}: {_e(rule)}</h3>{caption}{table}"
            if number == 0:
                parts.append(f'<div class="views" data-card="{card.number}" data-rule="{_e(rule)}">{body}</div>')
            else:
                parts.append(
                    f'<details class="views" data-rule="{_e(rule)}"><summary>{_e(card.label)}: the same under '
                    f"{_e(rule)}</summary>{body}</details>"
                )
    parts.append(_twin_gap_table(cards))
    definitions: Mapping[str, str] = cards[0].facts.card.get("views", {}).get("definitions", {})
    defs = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in definitions.items())
    parts.append(f"<details><summary>How each view is computed</summary><dl>{defs}</dl></details>")
    return _section("views", "Views", "".join(parts))


def _twin_gap_table(cards: Sequence[ReportCard]) -> str:
    """The cards' ``twin_gap`` views (cards played with ``--twins``): originals minus twins."""
    rows = []
    for card in cards:
        for env, per_rule in sorted(card.facts.card.get("views", {}).get("twin_gap", {}).items()):
            for rule, gap in sorted(per_rule.items()):
                interval = (
                    "" if gap["ci_low"] is None else f"[{_num(gap['ci_low'], True)}, {_num(gap['ci_high'], True)}]"
                )
                rows.append(
                    [card.label, env, rule, str(gap["pairs"]), _num(gap["originals"]), _num(gap["twins"]),
                     _num(gap["gap"], True), interval]
                )  # fmt: skip
    if not rows:
        return ""
    header = ["card", "env", "rule", "pairs", "originals pass@1", "twins pass@1", "gap", "95% interval"]
    return (
        "<h3>Twin gap: originals against their perturbed twins</h3>"
        '<p class="rule">Memorisation shows as a gap well above 0; an interval that holds 0 shows none.</p>'
        + _table(header, rows, numeric=True)
    )


def _views_table(views: Mapping[str, Any], rule: str, ks: Sequence[str]) -> str:
    """Overall and per env; per difficulty and per tag below it, folded."""
    slices: list[tuple[str, Mapping[str, Any]]] = [("overall", views.get("overall", {}))]
    slices += [(f"env: {key}", value) for key, value in sorted(views.get("by_env", {}).items())]
    finer: list[tuple[str, Mapping[str, Any]]] = []
    for kind in ("by_difficulty", "by_tag"):
        prefix = kind.removeprefix("by_")
        finer.extend((f"{prefix}: {key}", value) for key, value in sorted(views.get(kind, {}).items()))
    table = _slices_table(slices, rule, ks)
    if finer:
        table += f"<details><summary>per difficulty and per tag</summary>{_slices_table(finer, rule, ks)}</details>"
    return table


def _slices_table(slices: Sequence[tuple[str, Mapping[str, Any]]], rule: str, ks: Sequence[str]) -> str:
    components = sorted({name for _, s in slices for name in (s.get(rule) or {}).get("component_means", {})})
    header = ["slice", "episodes", "tasks", "mean reward"]
    header += [f"pass@{k}" for k in ks] + [f"pass^{k}" for k in ks] + [f"maj@{k}" for k in ks]
    header += ["best of n", *components]
    rows = []
    for name, value in slices:
        view = value.get(rule) or {}
        row = [name, str(view.get("episodes", "")), str(view.get("tasks", "")), _num(view.get("mean_reward"))]
        for metric in ("pass@k", "pass^k", "maj@k"):
            row += [_num((view.get(metric, {}).get(k) or {}).get("value")) for k in ks]
        row.append(_num((view.get("best_of_n") or {}).get("value")))
        row += [_num(view.get("component_means", {}).get(c)) for c in components]
        rows.append(row)
    return _table(header, rows, numeric=True)


def _plots_section(cards: Sequence[ReportCard], estimates: Mapping[str, list[SliceEstimate]]) -> str:
    labels = [card.label for card in cards]
    parts: list[str] = []
    envs = sorted({key for e in estimates.values() for key in (x.key for x in e if x.kind == "env")})
    by_env = {label: {x.key: x for x in estimates[label] if x.kind == "env"} for label in labels}
    series = {label: [_value(by_env[label].get(env)) for env in envs] for label in labels}
    radar = plots.radar(envs, series, title="pass@1 per env (0-100, higher is better)")
    radar_rows = [[env, *(_pct(by_env[label].get(env)) for label in labels)] for env in envs]
    parts.append(
        '<div class="plot-row"><figure class="plot">'
        + radar
        + "</figure>"
        + _table(["env", *labels], radar_rows, numeric=True)
        + "</div>"
    )
    for kind, title in (("difficulty", "pass@1 by difficulty"), ("tag", "pass@1 by tag")):
        found = {label: {x.key: x for x in estimates[label] if x.kind == kind} for label in labels}
        keys = sorted({key for per_card in found.values() for key in per_card})
        if not keys:
            continue
        # Cards of one plan share their keys: one chart, the cards side by side. Cards of
        # different plans do not: a chart each, so no card's bars are mostly "n/a".
        same = all(set(per_card) == set(keys) for per_card in found.values())
        charts = [(labels, keys)] if same else [([l_], sorted(found[l_])) for l_ in labels if found[l_]]
        for chart_labels, chart_keys in charts:
            bars = {label: [_estimate(found[label].get(key)) for key in chart_keys] for label in chart_labels}
            heading = title if same else f"{title}: {chart_labels[0]}"
            svg = plots.interval_bars(
                chart_keys, bars, title=heading + " (95% interval, bootstrap over tasks)", ylabel="pass@1 (%)"
            )
            rows = [[key, *(_interval_text(found[label].get(key)) for label in chart_labels)] for key in chart_keys]
            parts.append(
                f'<figure class="plot">{svg}</figure><details><summary>{_e(heading)}: the numbers</summary>'
                + _table([kind, *chart_labels], rows, numeric=True)
                + "</details>"
            )
    groups, stacks = _failure_stacks(cards)
    if groups:
        parts.append(
            '<figure class="plot">'
            + plots.stacked_counts(groups, stacks, title="Why episodes failed, per env", xlabel="episodes")
            + "</figure>"
        )
    lengths, unit = _lengths(cards)
    parts.append(
        '<figure class="plot">'
        + plots.histograms(lengths, title=f"Completion length per episode ({unit})", xlabel=unit)
        + "</figure>"
    )
    pass_k = _pass_at_k(cards)
    if pass_k is not None:
        ks, curve = pass_k
        svg = plots.curves(ks, curve, title="pass@k against k", xlabel="k", ylabel="pass@k (%)")
        parts.append(f'<figure class="plot">{svg}</figure>')
    else:
        parts.append(
            '<p class="muted">pass@k against k: every card has one sample per task (run with --samples N).</p>'
        )
    return _section("plots", "Plots", "".join(parts))


def _compare_section(comparisons: Sequence[CardComparison]) -> str:
    if not comparisons:
        return ""
    parts = []
    for number, item in enumerate(comparisons, start=1):
        parts.append(f"<h3>{_e(item.cand)} against {_e(item.base)}</h3>")
        if item.note:
            parts.append(f'<p class="note">{_e(item.note)}</p>')
        comparison = item.comparison
        if comparison is None:
            continue
        pairing = comparison.pairing
        parts.append(
            f"<p>{pairing.paired} paired episodes; {pairing.base_only} only in {_e(item.base)}, "
            f"{pairing.cand_only} only in {_e(item.cand)}. Drops: "
            + "; ".join(f"{_e(side)} {_e(_counts(counts))}" for side, counts in comparison.drops.items())
            + ". Open any episode below to read both cards' trajectories side by side.</p>"
        )
        rows = []
        for view in comparison.views:
            if view.rule != "errors_as_failures" or view.slice not in ("overall", "env"):
                continue
            where = "overall" if view.slice == "overall" else view.key
            interval = "" if view.ci_low is None else f"[{_num(view.ci_low, True)}, {_num(view.ci_high, True)}]"
            rows.append(
                [
                    where, view.view, _num(view.base), _num(view.cand), _num(view.delta, True), interval,
                    "" if view.p_value is None else f"{view.p_value:.3g}", str(view.n_tasks),
                    "too few to say" if view.too_small else "",
                ]
            )  # fmt: skip
        header = ["slice", "view", item.base, item.cand, "delta", "95% interval", "McNemar p", "tasks", ""]
        parts.append(_table(header, rows, numeric=True))
        parts.append(_capability(comparison, item.base, item.cand, number))
        transitions = [[t.base, t.cand, str(t.count)] for t in comparison.transitions]
        parts.append("<h4>Outcome transitions (paired episodes)</h4>")
        parts.append(_table([f"in {item.base}", f"in {item.cand}", "episodes"], transitions, numeric=True))
    return _section("compare", "Comparison", "".join(parts))


def _training_section(log: TrainingLog | None) -> str:
    """The trainer's log (``frostgym.compare.training_log``): mean reward, KL to the reference
    and entropy per window of steps, the rules' thresholds, and each flag raised."""
    if log is None:
        return ""
    rules = log.rules
    parts = [
        f"<p>{len(log.steps)} steps from <code>{_e(log.source)}</code>. Flags: entropy collapse when the "
        f"mean entropy of {rules.window} steps falls below {rules.entropy_fraction:g} {TIMES} that of the first "
        f"{rules.window} or below {rules.entropy_floor:g} nats/token; KL blow-up when the mean KL of "
        f"{rules.window} steps exceeds {rules.kl_max:g} nats/token, or is at least {rules.kl_growth_floor:g} and "
        f"over {rules.kl_growth:g} {TIMES} that of the {rules.window} steps before, or a KL is not finite.</p>"
    ]
    if not log.has("kl"):
        parts.append('<p class="note">No KL in the log (no reference model): no KL flag.</p>')
    rows = [
        [
            f"{w.first}{MISSING}{w.last}" if w.steps > 1 else str(w.first),
            _num(w.reward), _num(w.kl), _num(w.entropy), ", ".join(flag.kind for flag in w.flags),
        ]
        for w in log.windows()
    ]  # fmt: skip
    parts.append(_table(["steps", "reward", "KL", "entropy", "flags"], rows, numeric=True))
    flags = "".join(f"<li>{_e(flag.message)}</li>" for flag in log.flags)
    parts.append(f"<ul>{flags}</ul>" if flags else "<p>No flag raised.</p>")
    return _section("training", "Training: KL and entropy", "".join(parts))


def _capability(comparison: Comparison, base: str, cand: str, number: int) -> str:
    """Capability or compression (``frostgym.compare.capability``): both pass@k curves over k
    above the paired delta with its 95% interval at each k, the crossing k marked, the verdict
    beside the chart, and the numbers in a table (the chart's fallback). Anchored at
    ``#capability-<number>`` (the comparison's position on the page)."""
    anchor = f'<h4 id="capability-{number}">Capability or compression</h4>'
    found = comparison.capability
    if found is None:
        return anchor + (
            "<p>No pass@k curve and no verdict: the cards have one sample per task (pass@k needs "
            "several samples of each task; run both cards with --samples N).</p>"
        )
    ks = [int(v.view.removeprefix("pass@")) for v in found.curve]
    svg = plots.paired_curves(
        ks,
        {base: [v.base for v in found.curve], cand: [v.cand for v in found.curve]},
        [
            plots.Delta(None) if v.delta is None else plots.Delta(v.delta, v.ci_low, v.ci_high, v.too_small)
            for v in found.curve
        ],
        title=f"pass@k against k: {cand} against {base}",
        crossing=found.crossing,
    )
    verdict = (
        f'<p class="capability-verdict">Verdict: <strong class="verdict verdict-{_e(found.verdict)}">'
        f"{_e(found.verdict)}</strong></p><p>{_e(found.reason)}.</p>"
        f"<p>pass@{found.k_max} is the largest k both cards have. Reach: {_e(base)} solved "
        f"{found.base_reached} and {_e(cand)} {found.cand_reached} of "
        f"{found.tasks} tasks in some sample; {len(found.cand_only)} only {_e(cand)}, "
        f"{len(found.base_only)} only {_e(base)}.</p>"
        '<p class="muted">compressed: pass@1 rose beyond noise and pass@K did not; expanded: pass@K rose and '
        'pass@1 did not; both; neither (the rule: docs/compare.md, "Capability or compression?").</p>'
    )
    rows = [
        [
            str(k), _num(v.base), _num(v.cand), _num(v.delta, True),
            "" if v.ci_low is None else f"[{_num(v.ci_low, True)}, {_num(v.ci_high, True)}]",
            str(v.n_tasks),
            "; ".join(
                note for note in ("too few to say" if v.too_small else "", "crossing" if k == found.crossing else "")
                if note
            ),
        ]
        for k, v in zip(ks, found.curve, strict=True)
    ]  # fmt: skip
    header = ["k", f"pass@k {base}", f"pass@k {cand}", "delta", "95% interval", "tasks", ""]
    if not any(row[-1] for row in rows):  # no note at any k: no empty column
        header, rows = header[:-1], [row[:-1] for row in rows]
    table = _table(header, rows, numeric=True)
    reach_rows = [
        [side, t.env_id, t.task_id, str(t.passed)]
        for side, only in ((f"only {cand}", found.cand_only), (f"only {base}", found.base_only))
        for t in only
    ]
    reach = (
        "<details><summary>Tasks only one card ever solved</summary>"
        + _table(["solved by", "env", "task", "passing episodes"], reach_rows)
        + "</details>"
        if reach_rows
        else ""
    )
    return (
        anchor
        + f'<div class="plot-row capability"><figure class="plot">{svg}</figure><div class="capability-text">'
        + verdict
        + "</div></div>"
        + f"<details open><summary>pass@k against k: the numbers</summary>{table}</details>"
        + reach
    )


def _browser_section() -> str:
    selects = "".join(
        f'<label>{_e(text)} <select id="f-{name}"></select></label>'
        for name, text in (
            ("card", "card"), ("env", "env"), ("split", "split"), ("difficulty", "difficulty"), ("tag", "tag"),
            ("label", "label"), ("drop", "drop class"),
        )
    )  # fmt: skip
    outcome = (
        '<label>outcome <select id="f-outcome"><option value="">every outcome</option>'
        '<option value="passed">passed</option><option value="failed">failed</option>'
        '<option value="dropped">dropped</option></select></label>'
    )
    text = '<label>text <input id="f-text" type="search" placeholder="search episode text"></label>'
    header = "".join(
        f"<th>{h}</th>" for h in ("plan id", "env", "split", "difficulty", "tags", "label", "outcome", "reward")
    )
    body = (
        f'<div class="filters">{selects}{outcome}{text}</div>'
        '<p id="browser-status" class="status">loading the index... '
        "(it needs the data/ folder beside this page, and JavaScript)</p>"
        '<p class="pager"><button id="page-prev" type="button">previous</button> '
        '<button id="page-next" type="button">next</button> <span class="muted">matching: '
        '<span id="match-count">0</span></span></p>'
        f'<table class="episodes"><thead><tr>{header}</tr></thead><tbody id="episodes-body"></tbody></table>'
        '<section id="episode" class="episode" hidden></section>'
    )
    return _section("browser", "Trajectories", body)


# ---- data for the plots -----------------------------------------------------------------


def _failure_stacks(cards: Sequence[ReportCard]) -> tuple[list[str], dict[str, list[int]]]:
    """Per env (per card with several cards): how many episodes failed with each grade label,
    and how many were dropped by class ("drop: class"); passed episodes are not counted."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for card in cards:
        facts = card.facts.facts
        envs = [facts.task_keys[t][0] for t in facts.task.tolist()]
        for row, env in enumerate(envs):
            if facts.passed[row]:
                continue
            drop = int(facts.drop[row])
            label = (
                f"drop: {facts.names[drop]}" if drop else str(facts.names[int(facts.label[row])] or "failed (no label)")
            )
            group = (env if len(cards) == 1 else f"{card.label} · {env}", card.label)
            counts.setdefault(group, {})
            counts[group][label] = counts[group].get(label, 0) + 1
    groups = sorted(counts)
    names = sorted({label for per in counts.values() for label in per})
    return [g for g, _ in groups], {name: [counts[g].get(name, 0) for g in groups] for name in names}


def _lengths(cards: Sequence[ReportCard]) -> tuple[dict[str, list[float]], str]:
    """Per card, each completed episode's completion length: tokens where every card's agent
    reported them, else characters of the replies."""
    done = {card.label: card.facts.facts.drop == 0 for card in cards}
    tokens = {card.label: card.facts.facts.completion_tokens[done[card.label]] for card in cards}
    if all(len(t) and not np.isnan(t).any() for t in tokens.values()):
        return {label: t.tolist() for label, t in tokens.items()}, "tokens"
    chars = {
        card.label: [float(c) for c, kept in zip(card.reply_chars, done[card.label].tolist(), strict=True) if kept]
        for card in cards
    }
    return chars, "characters"


def _pass_at_k(cards: Sequence[ReportCard]) -> tuple[list[int], dict[str, list[float | None]]] | None:
    ks = sorted({int(k) for card in cards for k in card.facts.card.get("views", {}).get("ks", [1])})
    if ks == [1]:
        return None
    curves: dict[str, list[float | None]] = {}
    for card in cards:
        overall = card.facts.card.get("views", {}).get("overall", {}).get("errors_as_failures", {})
        curves[card.label] = [(overall.get("pass@k", {}).get(str(k)) or {}).get("value") for k in ks]
    return ks, curves


def _value(estimate: SliceEstimate | None) -> float | None:
    return None if estimate is None else estimate.value


def _estimate(estimate: SliceEstimate | None) -> plots.Estimate:
    if estimate is None:
        return plots.Estimate(None)
    return plots.Estimate(estimate.value, estimate.low, estimate.high)


def _pct(estimate: SliceEstimate | None) -> str:
    if estimate is None or estimate.value is None:
        return MISSING
    return f"{100 * estimate.value:.1f}"


def _interval_text(estimate: SliceEstimate | None) -> str:
    if estimate is None or estimate.value is None:
        return MISSING
    text = f"{estimate.value:.3f}"
    if estimate.low is not None and estimate.high is not None:
        text += f" [{estimate.low:.3f}, {estimate.high:.3f}]"
    text += f" ({estimate.tasks} tasks{', too few to say' if estimate.too_small else ''})"
    return text


def _env_spec(env_id: str, options: Mapping[str, Mapping[str, Any]]) -> str:
    """An env as ``--env`` spells it, its own arguments in brackets."""
    own = options.get(env_id) or {}
    return env_id + ("[" + ",".join(f"{k}={v}" for k, v in own.items()) + "]" if own else "")


def _or_all(episodes: Any) -> str:
    return "all" if episodes is None else str(episodes)


# ---- HTML pieces ------------------------------------------------------------------------


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{_e(title)}</h2>{body}</section>'


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: bool = False, escape: bool = True) -> str:
    """A table; cells are escaped unless ``escape`` is False (they are HTML already)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    cell_class = ' class="num"' if numeric else ""
    body = "".join(
        "<tr>"
        + "".join(f"<td{cell_class if i else ''}>{_e(c) if escape else c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _episode_link(plan_id: str) -> str:
    return f'<a class="episode-link" href="#episode={_e(quote(plan_id, safe=""))}">{_e(plan_id)}</a>'


def _num(value: Any, signed: bool = False) -> str:
    if value is None:
        return MISSING
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _script_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<`` can close it or open a comment."""
    return orjson.dumps(data).decode().replace("<", "\\u003c")


def _asset(name: str) -> str:
    return resources.files("frostgym.report").joinpath("assets", name).read_text(encoding="utf-8")
