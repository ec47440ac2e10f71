"""``frostgym report`` without a browser: what the page and its data files hold.

The data files must be the card's own bytes (every record, in row order, checked against
its manifest on the way), the page's numbers the card's and the comparison's own, the
report byte-identical when written twice, and bad input a one-line error with exit 2. The
page in a real browser is ``test_report_browser.py``.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from frostgym.agents import OracleAgent, RandomAgent
from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.compare.reading import read_card_facts
from frostgym.core.errors import ReportError
from frostgym.core.stats import bootstrap_ratio
from frostgym.report.build import card_labels, write_report
from frostgym.report.estimates import pass_at_1
from frostgym.report.records import CHUNK_RECORDS
from frostgym.run.plan import make_plan
from tests.report_cards import ENVS, MarkupAgent, make_card
from tests.stats_reference import RESAMPLES, assert_matches, scipy_interval


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report-cards")
    return {
        "oracle": make_card(root / "oracle", OracleAgent(), ENVS, 8),
        "random": make_card(root / "random", RandomAgent(), ENVS, 8),
        "markup": make_card(root / "markup", MarkupAgent(), ENVS, 8),
    }


def _payload(script: bytes, call: str) -> bytes:
    match = re.fullmatch(rb'%s\((\d+),(?:\d+,)?"([A-Za-z0-9+/=]*)"\);\n' % call.encode(), script)
    assert match, script[:80]
    return gzip.decompress(base64.b64decode(match.group(2)))


def test_data_files_hold_every_record_of_the_card_in_row_order(cards: dict[str, Path], tmp_path: Path) -> None:
    page = write_report([cards["markup"]], tmp_path / "r")
    data = page.parent / "data" / "c0"
    card, _, drops = load_card(cards["markup"])
    assert drops, "the markup card has drops"
    index = json.loads(_payload((data / "index.js").read_bytes(), "frostgymIndex"))
    lines = [
        line
        for name in ("episodes.jsonl", "drops.jsonl")
        for line in (cards["markup"] / name).read_bytes().splitlines()
    ]
    records = [json.loads(line) for line in lines]
    assert index["plan_id"] == [r["plan_id"] for r in records]
    chunks = sorted(data.glob("chunk-*.js"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(chunks) == -(-len(records) // CHUNK_RECORDS)
    assert [line for chunk in chunks for line in _payload(chunk.read_bytes(), "frostgymChunk").split(b"\n")] == lines
    for row, record in enumerate(records):
        drop = index["drops"][index["drop"][row]]
        assert drop == record.get("drop_class")
        assert index["stages"][index["stage"][row]] == record.get("stage")
        label = (record.get("grade") or {}).get("label")
        assert index["labels"][index["label"][row]] == label
        assert index["envs"][index["task_env"][index["task"][row]]] == record["env_id"]
        if "split" in record:  # a drop's split is its plan entry's
            assert index["splits"][index["split"][row]] == record["split"]
    assert card["accounting"]["dropped"] == sum(1 for d in index["drop"] if d)


def test_page_shows_the_cards_views_and_drops_with_links(cards: dict[str, Path], tmp_path: Path) -> None:
    text = write_report([cards["markup"]], tmp_path / "r").read_text()
    card = json.loads((cards["markup"] / "card.json").read_text())
    overall = card["views"]["overall"]["errors_as_failures"]
    row = re.search(r"<tr><td>overall</td>(.*?)</tr>", text)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells[:3] == [str(overall["episodes"]), str(overall["tasks"]), f"{overall['mean_reward']:.3f}"]
    assert f"{overall['pass@k']['1']['value']:.3f}" in cells
    _, _, drops = load_card(cards["markup"])
    for drop in drops:
        assert f'href="#episode={html.escape(drop.plan_id.replace("/", "%2F").replace(":", "%3A"))}"' in text
    assert 'href="#drop=agent_error"' in text
    assert (
        "Reporting rule: errors_as_failures." in text
        and html.escape(card["views"]["rules"]["errors_as_failures"]) in text
    )
    assert "<svg" in text and "connect-src 'none'" in text
    # The replies' markup never reaches the page: trajectories live in the data files only.
    assert "alert(" not in text


def test_bars_are_the_cards_own_pass_at_1(cards: dict[str, Path]) -> None:
    facts = read_card_facts(cards["markup"])
    views = facts.card["views"]
    kinds = {"env": "by_env", "difficulty": "by_difficulty", "tag": "by_tag"}
    estimates = pass_at_1(facts.facts)
    assert {(e.kind, e.key) for e in estimates if e.kind != "overall"} == {
        (kind, key) for kind, name in kinds.items() for key in views[name]
    }
    for estimate in estimates:
        view = views["overall"] if estimate.kind == "overall" else views[kinds[estimate.kind]][estimate.key]
        assert estimate.value == pytest.approx(view["errors_as_failures"]["pass@k"]["1"]["value"], abs=1e-12)
        if estimate.low is not None and estimate.high is not None and estimate.value is not None:
            assert estimate.low <= estimate.value <= estimate.high


@pytest.mark.parametrize("tasks", [25, 150])
def test_one_card_interval_matches_scipy_bootstrap(tasks: int) -> None:
    data = np.random.default_rng(tasks)
    counts = data.integers(1, 5, tasks).astype(float)
    passes = np.array([data.binomial(int(n), 0.4) / n for n in counts])
    ones = np.ones(tasks)
    ours = bootstrap_ratio(passes, ones, ("test", tasks), resamples=RESAMPLES)
    reference = scipy_interval((passes,), np.mean, seed=1)
    assert ours is not None
    assert_matches(ours.low, ours.high, reference)
    assert bootstrap_ratio(passes, ones, ("test", tasks), resamples=RESAMPLES) == ours  # seeded
    assert bootstrap_ratio(passes[:1], ones[:1], ("one",)) is None


def test_compare_mode_shows_the_decision_deltas_and_transitions(cards: dict[str, Path], tmp_path: Path) -> None:
    gates = tmp_path / "gates.toml"
    gates.write_text('[[gate]]\nname = "no regression"\nmetric = "pass@1"\nmax_drop = 0.0\nsignificant = true\n')
    result = CliRunner().invoke(
        app,
        [
            "report",
            str(cards["random"]),
            "--baseline",
            str(cards["oracle"]),
            "--gate",
            str(gates),
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "r" / "index.html").read_text()
    assert 'class="decision decision-block">block</span>' in text
    assert "random against oracle" in text and "Outcome transitions" in text
    cells = '<td class="num">pass@1</td><td class="num">1.000</td><td class="num">0.000</td><td class="num">-1.000</td>'
    assert "<td>overall</td>" + cells in text
    assert (tmp_path / "r" / "data" / "c1" / "index.js").exists()


@pytest.mark.slow
def test_report_is_byte_identical_when_written_twice(cards: dict[str, Path], tmp_path: Path) -> None:
    first = write_report([cards["oracle"], cards["markup"]], tmp_path / "a")
    second = write_report([cards["oracle"], cards["markup"]], tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    for name in files:
        assert (first.parent / name).read_bytes() == (second.parent / name).read_bytes(), name


def test_plans_that_differ_are_compared_on_their_shared_episodes(cards: dict[str, Path], tmp_path: Path) -> None:
    other = make_card(tmp_path / "other", OracleAgent(), ENVS[:1], 8)
    text = write_report([cards["oracle"], other], tmp_path / "r").read_text()
    assert "compared on the episodes both cards hold" in text


def test_bad_input_is_one_line_and_exit_2(cards: dict[str, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "r")])
    assert missing.exit_code == 2 and "card.json is missing" in missing.output
    gates = tmp_path / "gates.toml"
    gates.write_text('[[gate]]\nmetric = "pass@1"\nmin = 0.5\n')
    alone = runner.invoke(app, ["report", str(cards["oracle"]), "--gate", str(gates), "--out", str(tmp_path / "r")])
    assert alone.exit_code == 2 and "baseline" in alone.output
    with pytest.raises(ReportError):
        write_report([], tmp_path / "r")
    edited = tmp_path / "edited"
    make_card(edited, OracleAgent(), ENVS[:1], 4)
    lines = (edited / "episodes.jsonl").read_text().replace('"reward":1.0', '"reward":0.5', 1)
    (edited / "episodes.jsonl").write_text(lines)
    result = runner.invoke(app, ["report", str(edited), "--out", str(tmp_path / "r2")])
    assert result.exit_code == 2 and "manifest" in result.output
    assert not (tmp_path / "r2" / "index.html").exists()


def test_labels_are_unique_and_say_which_card() -> None:
    labels = card_labels([Path("/x/a/card"), Path("/x/b/card"), Path("/x/c/other"), Path("/x/c/other")])
    assert labels[:3] == ["a/card", "b/card", "c/other"] and labels[3] == "c/other (2)"


def test_a_card_played_with_twins_shows_its_twin_gap(tmp_path: Path) -> None:
    card = tmp_path / "twins"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--env",
            "frostgym/Arithmetic-v0",
            "--agent",
            "oracle",
            "--episodes",
            "4",
            "--twins",
            "--out",
            str(card),
        ],
    )
    assert result.exit_code == 0, result.output
    text = write_report([card], tmp_path / "r").read_text()
    assert "Twin gap" in text
    assert '<td>twins</td><td class="num">frostgym/Arithmetic-v0</td><td class="num">errors_as_failures</td>' in text


def test_a_card_with_exclusions_shows_them_before_any_score(tmp_path: Path) -> None:
    [first] = [p.task_id for p in make_plan(["frostgym/Arithmetic-v0"], split="test", episodes=1, samples=1, seed=0)]
    exclude = tmp_path / "exclude.txt"
    exclude.write_text(f"{first}  # seen in the crawl\n")
    card = tmp_path / "card"
    args = ["eval", "--env", "frostgym/Arithmetic-v0", "--split", "test", "--agent", "oracle", "--episodes", "4"]
    result = CliRunner().invoke(app, [*args, "--exclude", str(exclude), "--out", str(card)])
    assert result.exit_code == 0, result.output
    text = write_report([card], tmp_path / "r").read_text()
    assert "Excluded from card's plan before the run (1 tasks)" in text
    assert f"<td>{first}</td><td>seen in the crawl</td>" in text
    assert text.index("Excluded from") < text.index('id="views"')
