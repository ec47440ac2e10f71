"""The report opens on its headline: pass@1 per env and level with intervals against the
oracle's ceiling (a chart and its numbers), the gate decision when there is one and the
most common failure labels, before the bookkeeping (cards, accounting, views, plots).
Real cards: the oracle, and a scripted agent that passes, fails and drops episodes.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from frostgym.agents import OracleAgent
from frostgym.compare.gates import read_gates
from frostgym.compare.reading import read_card_facts
from frostgym.report.build import write_report
from frostgym.report.estimates import pass_at_1
from tests.report_cards import MarkupAgent, make_card

ENVS = ["frostgym/Arithmetic-v0", "frostgym/Fractions-v0"]
LEVELS = {"frostgym/Arithmetic-v0": {"level": 1}}


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("report-headline")
    return (
        make_card(root / "markup", MarkupAgent(), ENVS, 8, env_options=LEVELS),
        make_card(root / "oracle", OracleAgent(), ENVS, 8, env_options=LEVELS),
    )


def _section(text: str, key: str) -> str:
    match = re.search(rf'<section id="{key}">.*?</section>', text, re.S)
    assert match, key
    return match.group(0)


def test_the_headline_comes_before_the_bookkeeping(cards: tuple[Path, Path], tmp_path: Path) -> None:
    text = write_report(list(cards), tmp_path / "r").read_text()
    order = [text.index(f'<section id="{key}">') for key in ("headline", "cards", "accounting", "views", "plots")]
    assert order == sorted(order)
    assert text.index('<a href="#headline">') < text.index('<a href="#cards">')  # first in the nav too


def test_the_headline_shows_pass_at_1_with_intervals_against_the_ceiling(
    cards: tuple[Path, Path], tmp_path: Path
) -> None:
    markup, _ = cards
    headline = _section(write_report(list(cards), tmp_path / "r").read_text(), "headline")
    assert headline.count("<svg") == 1  # the chart...
    assert ">oracle's ceiling</text>" in headline  # ... with the ceiling in its legend
    estimates = {e.key: e for e in pass_at_1(read_card_facts(markup).facts) if e.kind == "env"}
    for env, level in (("frostgym/Arithmetic-v0", "1"), ("frostgym/Fractions-v0", "4 (default)")):
        e = estimates[env]
        assert e.value is not None and e.low is not None and e.high is not None
        shown = f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}] ({e.tasks} tasks, too few to say)"
        assert f"<td>{env}</td><td>{html.escape(level)}</td><td>{shown}</td><td>1.000</td>" in headline
    assert re.search(r"<b>Most common failure labels of markup:</b> [^<]*drop: agent_error \(\d+\)", headline)
    assert "decision" not in headline  # no gates, no decision


def test_the_gate_decision_is_on_the_first_screen(cards: tuple[Path, Path], tmp_path: Path) -> None:
    markup, oracle = cards
    gates = tmp_path / "gates.toml"
    gates.write_text('[[gate]]\nname = "no regression"\nmetric = "pass@1"\nmax_drop = 0.0\n')
    text = write_report([oracle, markup], tmp_path / "r", gates=read_gates(gates)).read_text()
    headline = _section(text, "headline")
    assert re.search(r'Decision, markup against oracle: <span class="decision decision-block">block</span>', headline)
    order = [text.index(f'<section id="{key}">') for key in ("headline", "decision", "cards")]
    assert order == sorted(order)


def test_without_an_oracle_card_no_ceiling_is_drawn(cards: tuple[Path, Path], tmp_path: Path) -> None:
    markup, _ = cards
    headline = _section(write_report([markup], tmp_path / "r").read_text(), "headline")
    assert "ceiling" not in headline.replace("No oracle card among the cards: no ceiling is drawn.", "")
    assert "No oracle card among the cards: no ceiling is drawn." in headline
