"""The terminal summary of a card: accounting and drops first, then headline views.

Drops come before scores on purpose: a score read without its denominator is how
errored samples go unnoticed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from frostgym.cards.contract import contract_lines
from frostgym.core.episode import DropRecord

MAX_DROPS_SHOWN = 10
#: What a view a card was written without (an older card's) shows as.
UNKNOWN = "unknown"
TRAINED_ON_PRIVATE_WARNING = (
    "this card's agent was declared trained on the private split (--trained-on-private): its private-split "
    "scores, and any gap between public and private tasks, are no held-out measure"
)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _fmt_view(metrics: Mapping[str, Any], name: str) -> str:
    """A rate view's value (``no_answer_rate``, ``selective_accuracy``,
    ``safety_violation_rate``), ``unknown`` when the card was written before its views had it."""
    view = metrics.get(name)
    return UNKNOWN if view is None else _fmt(view["value"])


def card_warnings(card: Mapping[str, Any]) -> list[str]:
    """What a reader of the card must know before its scores: its agent declared trained on
    the private split (``config.identity.trained_on_private``)."""
    identity = card.get("config", {}).get("identity", {})
    return [TRAINED_ON_PRIVATE_WARNING] if identity.get("trained_on_private") else []


def accounting_table(card: Mapping[str, Any]) -> Table:
    a = card["accounting"]
    table = Table(title=f"accounting ({card['status']})")
    for name in ("planned", "completed", "succeeded", "failed", "dropped", "errored", "skipped", "pending"):
        table.add_column(name, justify="right")
    cells = [
        *(str(a[k]) for k in ("planned", "completed", "succeeded", "failed", "dropped")),
        *(str(a[k]) for k in ("errored", "skipped", "pending")),
    ]
    if "excluded" in a:  # tasks --exclude left out before the plan was drawn
        table.add_column("excluded tasks", justify="right")
        cells.append(str(a["excluded"]))
    table.add_row(*cells)
    return table


def drops_table(drops: Sequence[DropRecord]) -> Table:
    table = Table("plan id", "class", "stage", "attempts", "counted as", "error", title=f"drops ({len(drops)})")
    for d in drops[:MAX_DROPS_SHOWN]:
        drop = d.drop
        table.add_row(d.plan_id, drop.drop_class, drop.stage, str(d.attempts), drop.counted_as, drop.error[:100])
    if len(drops) > MAX_DROPS_SHOWN:
        table.add_row(f"... {len(drops) - MAX_DROPS_SHOWN} more in drops.jsonl", "", "", "", "", "")
    return table


def views_table(card: Mapping[str, Any]) -> Table:
    """Per env, both reporting rules: mean reward, pass@k and pass^k at the largest k, the
    no-answer rate and the selective accuracy (``unknown`` on a card written before them)."""
    views = card["views"]
    k = str(max(views["ks"]))
    # With k = 1 a second pass@1 column would only repeat the first.
    metrics = [("pass@k", "1")] if k == "1" else [("pass@k", "1"), ("pass@k", k)]
    metrics += [("pass^k", k), ("maj@k", k)]
    table = Table(
        "env",
        "rule",
        "tasks",
        "episodes",
        "mean reward",
        *(f"{name[:-1]}{kk}" for name, kk in metrics),
        "no answer",
        "selective acc",
        "unsafe",
        title="scores (views computed from the episodes)",
    )
    rows = [("all", views["overall"]), *sorted(views["by_env"].items())]
    for env_id, by_rule in rows:
        for rule, m in by_rule.items():
            table.add_row(
                env_id,
                rule,
                str(m["tasks"]),
                str(m["episodes"]),
                _fmt(m["mean_reward"]),
                *(_fmt(m[name][kk]["value"]) for name, kk in metrics),
                _fmt_view(m, "no_answer_rate"),
                _fmt_view(m, "selective_accuracy"),
                _fmt_view(m, "safety_violation_rate"),
            )
    return table


def twin_gap_table(card: Mapping[str, Any]) -> Table:
    """Per env and rule, originals' and twins' pass@1 and the gap with its 95% interval
    (a card played with ``--twins``: ``frostgym.cards.twin_gap``)."""
    table = Table(
        "env",
        "rule",
        "pairs",
        "originals pass@1",
        "twins pass@1",
        "gap",
        "95% interval",
        title="twin gap (originals - twins; memorisation shows as a gap above 0)",
    )
    for env_id, by_rule in sorted(card["views"]["twin_gap"].items()):
        for rule, gap in by_rule.items():
            low, high = gap["ci_low"], gap["ci_high"]
            interval = "n/a" if low is None or high is None else f"[{low:+.3f}, {high:+.3f}]"
            shown = "n/a" if gap["gap"] is None else f"{gap['gap']:+.3f}"
            table.add_row(env_id, rule, str(gap["pairs"]), _fmt(gap["originals"]), _fmt(gap["twins"]), shown, interval)
    return table


def print_summary(console: Console, card: Mapping[str, Any], drops: Sequence[DropRecord]) -> None:
    for warning in card_warnings(card):
        console.print(f"[yellow]warning: {warning}[/yellow]", soft_wrap=True)
    console.print(accounting_table(card))
    if drops:
        console.print(drops_table(drops))
    console.print(views_table(card))
    if "twin_gap" in card["views"]:
        console.print(twin_gap_table(card))
    for line in contract_lines(card):  # what bounded the episodes (frostgym.cards.contract)
        console.print(f"contract: {escape(line)}", highlight=False, soft_wrap=True)
