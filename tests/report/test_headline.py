"""``frostgym headline``: per family, env and level, pass@1 with its interval beside the
oracle's ceiling, read from real cards (the oracle, the random agent, and a scripted agent
that passes some episodes, fails some and drops some), with the report's own numbers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from frostgym.cli import app
from frostgym.compare.reading import read_card_facts
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.report.estimates import SliceEstimate, pass_at_1
from frostgym.run.runner import RunOptions
from tests.report_cards import MarkupAgent

ARITHMETIC, FRACTIONS = "frostgym/Arithmetic-v0", "frostgym/Fractions-v0"


def _eval(out: Path, agent: str, envs: str, episodes: int = 12) -> Path:
    result = CliRunner().invoke(app, ["eval", "--env", envs, "--agent", agent, "--episodes", str(episodes),
                                      "--seed", "0", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("headline-cards")
    options = RunOptions(split="dev", env_options={ARITHMETIC: {"level": 1}, FRACTIONS: {"level": 2}}, retries=0)
    config = card_config(env_ids=[ARITHMETIC, FRACTIONS], agent_spec="markup", sampling={}, episodes=12, samples=1,
                         seed=0, options=options)  # fmt: skip
    run_to_card(root / "markup", MarkupAgent(), config, options)
    return {
        "markup": root / "markup",
        "random": _eval(root / "random", "random", f"{ARITHMETIC}[level=1],{FRACTIONS}[level=2]"),
        # The oracle plays Fractions at its default level (4): that ceiling is at another level.
        "oracle": _eval(root / "oracle", "oracle", f"{ARITHMETIC}[level=1],{FRACTIONS}", episodes=8),
    }


def _envs(card: Path) -> dict[str, SliceEstimate]:
    return {e.key: e for e in pass_at_1(read_card_facts(card).facts) if e.kind == "env"}


def _headline(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["headline", *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_each_env_and_level_has_pass_at_1_its_interval_and_the_ceiling(cards: dict[str, Path], tmp_path: Path) -> None:
    report = tmp_path / "report"
    written = CliRunner().invoke(app, ["report", str(cards["markup"]), str(cards["oracle"]), "--out", str(report)])
    assert written.exit_code == 0, written.output
    lines = _headline(str(cards["markup"]), str(cards["oracle"]), "--report", str(report))
    assert lines[0].startswith("headline: pass@1 of markup per env and level, against the oracle's ceiling")
    estimates = _envs(cards["markup"])
    for env, level, ceiling in ((ARITHMETIC, "1", "1.000"), (FRACTIONS, "2", "1.000 (at level 4)")):
        estimate = estimates[env]
        assert estimate.value is not None and 0 < estimate.value < 1  # a real interval, not a degenerate one
        assert estimate.low is not None and estimate.high is not None
        [row] = [line for line in lines if f" {env} " in line]
        cells = re.split(r"\s{2,}", row.strip())
        assert cells == [
            "math", env, level, "12", f"{estimate.value:.3f}", f"[{estimate.low:.3f}, {estimate.high:.3f}]",
            ceiling, cells[-1],
        ]  # fmt: skip
        assert re.fullmatch(r"(drop: agent_error|\w+) \d+(, (drop: agent_error|\w+) \d+)*", cells[-1])
    assert "errors count as failures; 95% interval: bootstrap over tasks" in lines
    [failures] = [line for line in lines if line.startswith("most common failure labels of markup: ")]
    assert "drop: agent_error" in failures
    assert f"cards: {cards['markup']} (markup); {cards['oracle']} (ceiling: oracle)" in lines
    assert lines[-1] == f"report: {report / 'index.html'} (open it in a browser; keep data/ beside it)"


def test_several_agents_get_an_agent_column_and_no_oracle_means_no_ceiling(cards: dict[str, Path]) -> None:
    lines = _headline(str(cards["random"]), str(cards["markup"]), str(cards["oracle"]))
    assert lines[0].startswith("headline: pass@1 of random and markup per env and level")
    header = next(line for line in lines if "pass@1" in line and "interval" in line)
    assert header.split()[:2] == ["agent", "family"] and "ceiling" in header
    random = _envs(cards["random"])
    assert any(line.split()[:4] == ["random", "math", ARITHMETIC, "1"] and f"{random[ARITHMETIC].value:.3f}" in line
               for line in lines)  # fmt: skip
    alone = _headline(str(cards["random"]), "--report", "nowhere")
    assert "ceiling" not in next(line for line in alone if "interval" in line and "pass@1" in line)
    assert "no card of the oracle agent among the cards: no ceiling to read the scores against" in alone
    assert alone[-1] == "report: nowhere/index.html is not there (write it with: frostgym report CARD... --out nowhere)"


def test_oracle_cards_alone_are_their_own_rows(cards: dict[str, Path]) -> None:
    lines = _headline(str(cards["oracle"]))
    assert any(line.split()[:5] == ["math", FRACTIONS, "4", "(default)", "8"] for line in lines)
