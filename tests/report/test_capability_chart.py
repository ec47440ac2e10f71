"""The report's capability-or-compression chart: both pass@k curves over k above the paired
delta with its 95% interval at each k, the crossing k marked and the verdict beside it, with
the numbers in a table; on the committed GRPO cards (``compressed``), a plain sentence for
cards with one sample per task, and no card-derived string on the page unescaped."""

from __future__ import annotations

import html
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from frostgym.agents import OracleAgent, RandomAgent
from frostgym.compare.capability import Capability
from frostgym.compare.compare import compare_cards
from frostgym.report.build import write_report
from frostgym.report.plots import Delta, paired_curves
from tests.report_cards import make_card

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[2]
GRPO = ROOT / "benchmarks" / "results" / "grpo-l1"
#: A card label (its directory's name) that would run as markup if it reached the page raw.
MARKUP_NAME = "<img src=x onerror=alert(1)>&\"'<b>"


def capability_html(page: str, number: int = 1) -> str:
    """The capability part of the ``number``-th comparison: from its heading to the
    outcome transitions that follow it."""
    start = page.index(f'<h4 id="capability-{number}">')
    return page[start : page.index("<h4>Outcome transitions", start)]


def chart(part: str) -> ET.Element:
    found = re.search(r"<svg .*?</svg>", part, re.S)
    assert found is not None, "no chart"
    root = ET.fromstring(found.group(0))
    assert root.tag == f"{SVG}svg"
    return root


def group(root: ET.Element, suffix: str) -> ET.Element:
    [found] = [g for g in root.iter(f"{SVG}g") if g.get("id", "").endswith(f"-{suffix}")]
    return found


def markers(root: ET.Element, suffix: str) -> int:
    """The points drawn in the group whose id ends ``-suffix`` (matplotlib draws each marker
    as one ``<use>`` of a shared path)."""
    return len(list(group(root, suffix).iter(f"{SVG}use")))


@pytest.fixture(scope="module")
def grpo() -> Capability:
    comparison = compare_cards(GRPO / "before", GRPO / "after")
    assert comparison.capability is not None
    return comparison.capability


def test_grpo_cards_show_both_curves_the_intervals_and_the_verdict(grpo: Capability, tmp_path: Path) -> None:
    found = grpo
    assert found.verdict == "compressed"
    page = write_report([GRPO / "before", GRPO / "after"], tmp_path / "r").read_text()
    part = capability_html(page)
    ks = [int(v.view.removeprefix("pass@")) for v in found.curve]
    assert ks == [1, 2, 4, 8]
    root = chart(part)
    assert markers(root, "curve-0") == len(ks) and markers(root, "curve-1") == len(ks)  # one point per k each
    assert markers(root, "delta") == len(ks)
    assert len(list(group(root, "delta-interval").iter(f"{SVG}path"))) == len(ks)  # one interval bar per k
    words = "".join(root.itertext())
    assert "before" in words and "after" in words and "k (samples per task, log2 scale)" in words
    assert found.crossing is None and "the curves do not cross up to k = 8" in words
    assert '<strong class="verdict verdict-compressed">compressed</strong>' in part
    assert html.escape(found.reason) in part
    # The table fallback holds the comparison's own numbers at every k.
    for k, view in zip(ks, found.curve, strict=True):
        assert view.base is not None and view.cand is not None and view.delta is not None
        assert view.ci_low is not None and view.ci_high is not None
        cells = [f"{view.base:.3f}", f"{view.cand:.3f}", f"{view.delta:+.3f}"]
        cells += [f"[{view.ci_low:+.3f}, {view.ci_high:+.3f}]", str(view.n_tasks)]
        assert f"<td>{k}</td>" + "".join(f'<td class="num">{c}</td>' for c in cells) + "</tr>" in part
    assert "Tasks only one card ever solved" in part and f"{len(found.cand_only)} only after" in part


def test_cards_with_one_sample_per_task_get_a_sentence_not_a_chart(tmp_path: Path) -> None:
    envs = ["frostgym/Arithmetic-v0"]
    oracle = make_card(tmp_path / "oracle", OracleAgent(), envs, 12, samples=1)
    random = make_card(tmp_path / "random", RandomAgent(seed=0), envs, 12, samples=1)
    part = capability_html(write_report([oracle, random], tmp_path / "r").read_text())
    assert "<svg" not in part and 'class="verdict' not in part
    assert "No pass@k curve and no verdict: the cards have one sample per task" in part


def test_no_card_derived_string_reaches_the_page_unescaped(tmp_path: Path) -> None:
    base, cand = tmp_path / "before", tmp_path / MARKUP_NAME
    shutil.copytree(GRPO / "before", base)
    shutil.copytree(GRPO / "after", cand)
    page = write_report([base, cand], tmp_path / "r").read_text()
    assert "<img" not in page and MARKUP_NAME not in page  # the data script holds it with \u003c
    part = capability_html(page)
    escaped = html.escape(MARKUP_NAME)
    assert f"only {escaped}</td>" in part and f"pass@k {escaped}</th>" in part and f"3 only {escaped}," in part
    # In the chart the label is text (its title and legend), parsed back whole.
    root = chart(part)
    assert MARKUP_NAME in "".join(root.itertext())
    assert markers(root, "curve-0") == 4 and markers(root, "curve-1") == 4


def test_the_crossing_is_marked_on_both_panels_and_the_chart_is_the_same_bytes() -> None:
    def draw() -> str:
        return paired_curves(
            [1, 2, 4, 8],
            {"base": [0.2, 0.4, 0.6, 0.8], "cand": [0.5, 0.55, 0.6, 0.62]},
            [
                Delta(0.3, 0.2, 0.4),
                Delta(0.15, 0.05, 0.25),
                Delta(0.0, -0.1, 0.1, weak=True),
                Delta(-0.18, -0.3, -0.05),
            ],
            title="pass@k",
            crossing=4,
        )

    svg = draw()
    assert svg == draw()
    root = ET.fromstring(svg)
    assert {"upper", "lower"} == {
        g.get("id", "").rsplit("-", 1)[1] for g in root.iter(f"{SVG}g") if "-crossing-" in g.get("id", "")
    }
    words = "".join(root.itertext())
    assert "the curves cross at k = 4" in words and "too few tasks to say" in words  # the hollow point
    assert markers(root, "curve-0") == 4 and markers(root, "delta") == 4


def test_bad_input_is_refused() -> None:
    series = {"a": [0.1, 0.2]}
    with pytest.raises(ValueError, match="crossing"):
        paired_curves([1, 2], series, [Delta(0.1), Delta(0.1)], title="t", crossing=3)
    with pytest.raises(ValueError, match="deltas"):
        paired_curves([1, 2], series, [Delta(0.1)], title="t")
    with pytest.raises(ValueError, match="strictly increasing"):
        paired_curves([2, 1], series, [Delta(0.1), Delta(0.1)], title="t")
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        Delta(1.5)
    with pytest.raises(ValueError, match="reversed"):
        Delta(0.1, 0.3, 0.2)
