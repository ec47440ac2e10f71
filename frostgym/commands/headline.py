"""``frostgym headline CARD...``: the one screen a person reads first after an eval.

Why a command: a run of several evals (``make eval``) prints each card's accounting and
views as it goes, so the scores end up spread over many tables, and the pass@1 of the
model sits far from the ceiling it should be read against. This prints, per family, env
and level, the model's pass@1 with its 95% interval beside the oracle's ceiling and the
most common failure labels (``frostgym.report.headline``, the report's first section too,
so both give the same numbers), then where the cards and the report are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from frostgym.compare.reading import read_card_facts
from frostgym.compare.views import MIN_TASKS
from frostgym.report.estimates import SliceEstimate
from frostgym.report.headline import CEILING_AGENT, Headline, HeadlineRow, build_headline

MISSING = "\N{EN DASH}"
SEP = " \N{MIDDLE DOT} "


def headline_cmd(
    cards: Annotated[
        list[Path], typer.Argument(help="Card directories: the model's, and the oracle's as the ceiling.")
    ],
    report: Annotated[
        Path | None,
        typer.Option(help="The report written from these cards (its directory or index.html), named at the end."),
    ] = None,
) -> None:
    """Per family, env and level: pass@1 with its 95% interval beside the oracle's ceiling
    (cards of the oracle agent), and the most common failure labels; then where the cards
    and the report are."""
    console = Console(width=160) if not Console().is_terminal else Console()
    headline = build_headline([(str(path), read_card_facts(path)) for path in cards])
    console.print(headline_table(headline))
    for line in headline_notes(headline, cards, report):
        console.print(line, highlight=False, soft_wrap=True)


def headline_table(headline: Headline) -> Table:
    """The rows as a table; an agent column only when more than one agent has rows."""
    agents = headline.agents
    ceiling = bool(headline.ceiling_cards)
    names = " and ".join(agents) or "no agent"
    title = f"headline: pass@1 of {names} per env and level" + (
        f", against the {CEILING_AGENT}'s ceiling" if ceiling else ""
    )
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    if len(agents) > 1:
        table.add_column("agent")
    table.add_column("family")
    table.add_column("env")
    table.add_column("level")
    table.add_column("episodes", justify="right")
    table.add_column("pass@1", justify="right")
    table.add_column("95% interval", justify="right")
    if ceiling:
        table.add_column(f"ceiling ({CEILING_AGENT})", justify="right")
    table.add_column("most common failures")
    for row in headline.rows:
        cells = [row.agent] if len(agents) > 1 else []
        cells += [row.family, row.env, row.level or MISSING, str(row.episodes)]
        cells += [_value(row.estimate), interval_text(row.estimate)]
        if ceiling:
            cells.append(ceiling_text(row))
        cells.append(", ".join(f"{name} {count}" for name, count in row.failures) or MISSING)
        table.add_row(*(escape(cell) for cell in cells))
    return table


def headline_notes(headline: Headline, cards: list[Path], report: Path | None) -> list[str]:
    """The lines under the table: how to read it, the failure labels over all, where the
    cards and the report are (markup escaped)."""
    lines = [
        "errors count as failures; 95% interval: bootstrap over tasks"
        + (f"; * fewer than {MIN_TASKS} tasks: the interval is no claim" if _any_small(headline) else "")
    ]
    if not headline.ceiling_cards:
        lines.append(f"no card of the {CEILING_AGENT} agent among the cards: no ceiling to read the scores against")
    for agent, failures in headline.failures.items():
        if failures:
            lines.append(
                f"most common failure labels of {agent}: " + SEP.join(f"{name} {count}" for name, count in failures)
            )
    by_label = {str(path): path for path in cards}
    models = ", ".join(str(by_label[label]) for label in headline.model_cards)
    agents = " and ".join(headline.agents)
    where = f"cards: {models} ({agents})" if models else "cards:"
    if headline.ceiling_cards:
        ceilings = ", ".join(str(by_label[label]) for label in headline.ceiling_cards)
        where += f"{'; ' if models else ' '}{ceilings} (ceiling: {CEILING_AGENT})"
    lines.append(where)
    if report is not None:
        page = report if report.suffix == ".html" else report / "index.html"
        if page.is_file():
            lines.append(f"report: {page} (open it in a browser; keep data/ beside it)")
        else:
            lines.append(f"report: {page} is not there (write it with: frostgym report CARD... --out {page.parent})")
    return [escape(line) for line in lines]


def _any_small(headline: Headline) -> bool:
    return any(row.estimate.too_small for row in headline.rows)


def _value(estimate: SliceEstimate | None) -> str:
    return MISSING if estimate is None or estimate.value is None else f"{estimate.value:.3f}"


def interval_text(estimate: SliceEstimate) -> str:
    """``[0.083, 0.500]``, starred when the slice has too few tasks to say anything."""
    if estimate.low is None or estimate.high is None:
        return MISSING
    return f"[{estimate.low:.3f}, {estimate.high:.3f}]" + ("*" if estimate.too_small else "")


def ceiling_text(row: HeadlineRow) -> str:
    """The oracle's pass@1 on the row's env, with its level when not the row's."""
    if row.ceiling is None:
        return MISSING
    return _value(row.ceiling) + row.ceiling_note
