"""The report's charts: well-formed inline SVG that carries its words as text, the same bytes
on every call and in every process, and honest about missing values and crowded categories."""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from frostgym.report.plots import (
    PALETTE,
    Estimate,
    curves,
    histograms,
    interval_bars,
    radar,
    stacked_counts,
)

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[2]

ENVS = ["math/arith", "sql/chinook", "code/python", "tools/bfcl"]
CARDS = ("base", "candidate")


def charts() -> dict[str, Callable[[], str]]:
    """One call of every function with ordinary data (the subprocess test imports this)."""
    return {
        "radar": lambda: radar(
            ENVS, {"base": [0.42, 0.8, None, 0.3], "candidate": [0.5, 0.9, 0.6, 0.35]}, title="pass@1 per env"
        ),
        "interval_bars": lambda: interval_bars(
            ["easy", "medium", "hard"],
            {
                "base": [Estimate(0.9, 0.85, 0.95), Estimate(0.5, 0.4, 0.6), Estimate(None)],
                "candidate": [Estimate(0.95, 0.9, 0.99), Estimate(0.55), Estimate(0.2, 0.1, 0.3)],
            },
            title="pass@1 per difficulty",
            ylabel="pass@1 (%)",
        ),
        "stacked_counts": lambda: stacked_counts(
            ["math/arith", "sql/chinook"],
            {"wrong_answer": [4, 7], "timeout": [1, 0], "format_error": [0, 3]},
            title="failures per env",
            xlabel="episodes",
        ),
        "histograms": lambda: histograms(
            {
                "base": [float(120 + 37 * (i % 11)) for i in range(50)],
                "candidate": [float(90 + 41 * (i % 13)) for i in range(70)],
            },
            title="completion length",
            xlabel="tokens",
        ),
        "curves": lambda: curves(
            [1, 2, 4, 8, 16],
            {"base": [0.3, 0.4, None, 0.55, 0.6], "candidate": [0.35, 0.45, 0.5, 0.6, 0.7]},
            title="pass@k",
            xlabel="k",
            ylabel="pass@k (%)",
        ),
    }


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(svg: str) -> list[str]:
    """Every visible text of a chart, one string per ``<text>`` element."""
    return ["".join(node.itertext()) for node in parse(svg).iter(f"{SVG}text")]


def words(svg: str) -> str:
    return "\n".join(texts(svg))


@pytest.mark.parametrize("name", sorted(charts()))
def test_every_chart_is_an_inline_svg_element_with_its_words_as_text(name: str) -> None:
    svg = charts()[name]()
    assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg and "DOCTYPE" not in svg
    root = parse(svg)
    assert re.fullmatch(r"0 0 [\d.]+ [\d.]+", root.attrib["viewBox"])
    assert root.attrib["role"] == "img" and "max-width: 100%" in root.attrib["style"]
    title = root.find(f"{SVG}title")
    assert title is not None and title.text and title.text in words(svg)
    assert next(iter(root)) is title  # the accessible name comes first
    expected = {
        "radar": ENVS[:2] + list(CARDS),
        "interval_bars": ["easy", "medium", "hard", "pass@1 (%)", *CARDS],
        "stacked_counts": ["math/arith", "sql/chinook", "wrong_answer", "timeout", "format_error", "episodes"],
        "histograms": ["tokens", "base (n=50", "candidate (n=70"],
        "curves": ["pass@k (%)", "16", *CARDS],
    }[name]
    for word in expected:
        assert word in words(svg), (name, word)
    assert not root.findall(f".//{SVG}image")  # text stays text: nothing rasterised or embedded


@pytest.mark.parametrize("name", sorted(charts()))
def test_same_inputs_give_the_same_bytes(name: str) -> None:
    assert charts()[name]() == charts()[name]()


@pytest.mark.slow
def test_charts_are_the_same_bytes_in_a_fresh_process() -> None:
    here = {name: hashlib.sha256(draw().encode()).hexdigest() for name, draw in charts().items()}
    script = (
        "import hashlib\n"
        "from tests.report.test_report_plots import charts\n"
        "for name, draw in charts().items():\n"
        "    print(name, hashlib.sha256(draw().encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    there = dict(line.split() for line in done.stdout.splitlines())
    assert there == here


@pytest.mark.slow
def test_charts_drawn_on_threads_match_charts_drawn_in_turn() -> None:
    draws = list(charts().values()) * 2
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda draw: draw(), draws))
    assert threaded == [draw() for draw in draws]


def test_ids_are_prefixed_resolved_and_not_shared_between_charts() -> None:
    seen: dict[str, str] = {}
    for name, draw in charts().items():
        svg = draw()
        root = parse(svg)
        prefix = root.attrib["id"]
        ids = [node.attrib["id"] for node in root.iter() if "id" in node.attrib]
        assert len(ids) == len(set(ids)), name
        assert all(i == prefix or i.startswith(f"{prefix}-") for i in ids), name
        references = re.findall(r'(?:href="#|url\(#)([^")]+)', svg)
        assert references and set(references) <= set(ids), name
        for i in ids:
            assert i not in seen, f"{name} and {seen.get(i)} share id {i}"
            seen[i] = name
        # The one style rule is scoped to this svg, not the whole page.
        style = root.find(f"{SVG}defs/{SVG}style")
        assert style is not None and style.text is not None and style.text.startswith(f"#{prefix} *{{")


def test_radar_draws_a_rate_on_the_0_to_100_scale() -> None:
    svg = radar(["a", "b", "c"], {"full": [1.0, 1.0, 1.0], "part": [0.42, 1.0, 1.0]}, title="scale")
    assert {"0", "20", "40", "60", "80", "100"} <= set(texts(svg))
    full, part = (_series_line(svg, colour) for colour in PALETTE[:2])
    centre_x = sum(x for x, _ in full[:3]) / 3
    centre_y = sum(y for _, y in full[:3]) / 3
    rim = math.dist(full[0], (centre_x, centre_y))
    assert math.dist(part[0], (centre_x, centre_y)) / rim == pytest.approx(0.42, abs=0.002)
    assert math.dist(part[1], (centre_x, centre_y)) / rim == pytest.approx(1.0, abs=0.002)


def _series_line(svg: str, colour: str) -> list[tuple[float, float]]:
    """The vertices of the plotted (clipped) line drawn in ``colour``."""
    for node in parse(svg).iter(f"{SVG}path"):
        style = node.attrib.get("style", "")
        if "clip-path" in node.attrib and f"fill: none; stroke: {colour.lower()}" in style:
            numbers = [float(n) for n in re.findall(r"-?[\d.]+", node.attrib["d"])]
            return list(zip(numbers[::2], numbers[1::2], strict=True))
    raise AssertionError(f"no line in {colour}")


def test_radar_marks_missing_values_on_the_axis_label() -> None:
    svg = radar(["a", "b", "c"], {"one": [0.5, None, 0.5], "two": [0.5, None, None]}, title="gaps")
    assert "b (n/a)" in texts(svg)  # no card has it
    shown = texts(svg)  # a label's second line is a text of its own
    assert shown[shown.index("(n/a: two)") - 1] == "c"  # only some cards lack it: they are named


@pytest.mark.parametrize("axes", [["only"], ["first", "second"]])
def test_radar_with_fewer_than_three_axes_draws_bars_and_says_so(axes: list[str]) -> None:
    svg = radar(axes, {"base": [0.42] * len(axes), "cand": [None] * len(axes)}, title="pass@1 per env")
    title = parse(svg).find(f"{SVG}title")
    assert title is not None and title.text == "pass@1 per env (bars: a radar needs 3 or more axes)"
    assert title.text in texts(svg)
    for axis in axes:
        assert axis in texts(svg)
    assert texts(svg).count("n/a") == len(axes)  # the card without values
    assert {"0", "20", "40", "60", "80", "100"} <= set(texts(svg))


def test_missing_values_are_drawn_as_gaps() -> None:
    bars = interval_bars(["x", "y"], {"a": [Estimate(None), Estimate(0.3, 0.2, 0.4)]}, title="t", ylabel="v")
    assert texts(bars).count("n/a") == 1
    line = curves([1, 2, 3], {"a": [0.2, None, 0.4]}, title="t", xlabel="k", ylabel="v")
    markers = [node for node in parse(line).iter(f"{SVG}use") if PALETTE[0].lower() in node.attrib.get("style", "")]
    assert len(markers) == 2 + 1  # one per value drawn, and one in the legend


@pytest.mark.parametrize(
    "draw",
    [
        lambda: radar([], {"a": []}, title="Empty radar"),
        lambda: radar(["a", "b", "c"], {}, title="Empty radar"),
        lambda: interval_bars([], {"a": []}, title="Empty bars", ylabel="v"),
        lambda: interval_bars(["a"], {}, title="Empty bars", ylabel="v"),
        lambda: stacked_counts([], {"x": []}, title="Empty stacks", xlabel="n"),
        lambda: histograms({}, title="Empty histograms", xlabel="tokens"),
        lambda: histograms({"a": [], "b": []}, title="Empty histograms", xlabel="tokens"),
        lambda: curves([], {"a": []}, title="Empty curves", xlabel="k", ylabel="v"),
        lambda: curves([1, 2], {}, title="Empty curves", xlabel="k", ylabel="v"),
    ],
)
def test_empty_inputs_give_a_small_no_data_chart(draw: Callable[[], str]) -> None:
    svg = draw()
    assert "no data" in texts(svg)
    assert any(text.startswith("Empty") for text in texts(svg))
    height = float(parse(svg).attrib["viewBox"].split()[3])
    assert height < 100


def test_one_series_and_quiet_edges_still_draw() -> None:
    assert "solo" in words(radar(ENVS, {"solo": [0.1, 0.2, 0.3, 0.4]}, title="t"))
    assert "solo" in words(interval_bars(["a"], {"solo": [Estimate(0.5, 0.4, 0.6)]}, title="t", ylabel="v"))
    assert "solo" in words(curves([5], {"solo": [0.5]}, title="t", xlabel="k", ylabel="v"))
    one_value = histograms({"solo": [7.0], "none": []}, title="t", xlabel="x")
    assert "solo (n=1, median 7)" in texts(one_value) and "none (no data)" in texts(one_value)
    no_failures = stacked_counts(["env"], {}, title="t", xlabel="n")
    assert "env" in texts(no_failures) and " 0" in texts(no_failures)
    all_zero = stacked_counts(["env"], {"x": [0]}, title="t", xlabel="n")
    assert " 0" in texts(all_zero)


def test_forty_categories_grow_the_chart_and_shorten_long_names() -> None:
    tags = [f"tag/a-rather-long-category-name-number-{i:02d}" for i in range(40)]
    series = {card: [Estimate((i % 10) / 10, 0.0, 1.0) for i in range(40)] for card in CARDS}
    many = interval_bars(tags, series, title="pass@1 per tag", ylabel="pass@1 (%)")
    few = interval_bars(tags[:4], {card: values[:4] for card, values in series.items()}, title="t", ylabel="v")
    assert _height(many) > 8 * _height(few) / 2
    shown = [text for text in texts(many) if text.startswith("tag/")]
    assert len(shown) == 40 and len(set(shown)) == 40  # shortened in the middle: the numbers survive
    assert all("…" in text and len(text) <= 28 for text in shown)
    assert shown[7].endswith("07")
    failures = stacked_counts(tags, {"wrong": list(range(40))}, title="t", xlabel="n")
    assert _height(failures) > 8 * _height(stacked_counts(tags[:4], {"wrong": [1] * 4}, title="t", xlabel="n")) / 2


def _height(svg: str) -> float:
    return float(parse(svg).attrib["viewBox"].split()[3])


def test_a_card_keeps_its_colour_across_charts() -> None:
    drawn = charts()
    for name in ("radar", "interval_bars", "histograms", "curves"):
        svg = drawn[name]()
        for colour in PALETTE[:2]:
            assert colour.lower() in svg, (name, colour)
        assert PALETTE[2].lower() not in svg, name  # two cards: two colours


def test_labels_are_drawn_literally() -> None:
    odd = {"_underscore": [0.2, 0.3, 0.4], "a<b & c>": [0.5, 0.6, 0.7], "costs $5 to $6": [0.1, 0.1, 0.1]}
    svg = radar(["$x$", "<y>", "z&w"], odd, title="odd <names> & $math$")
    shown = texts(svg)
    for label in [*odd, "$x$", "<y>", "z&w", "odd <names> & $math$"]:
        assert label in shown, label


def test_many_series_do_not_repeat_a_look() -> None:
    series = {f"card{i}": [0.1 * (i % 10)] * 3 for i in range(10)}
    svg = curves([1, 2, 3], series, title="t", xlabel="k", ylabel="v")
    for i in range(10):
        assert f"card{i}" in texts(svg)
    # Past the palette the colours come round again, with another marker.
    first = PALETTE[0].lower()
    markers = {
        node.attrib["{http://www.w3.org/1999/xlink}href"]
        for node in parse(svg).iter(f"{SVG}use")
        if first in node.attrib.get("style", "")
    }
    assert len(markers) == 2  # card0 and card8: one colour, two markers


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="3 positions"):
        radar(["a", "b", "c"], {"x": [0.1, 0.2]}, title="t")
    with pytest.raises(ValueError, match=r"not in \[0, 1\]"):
        radar(["a", "b", "c"], {"x": [0.1, 0.2, 42.0]}, title="t")
    with pytest.raises(ValueError, match=r"not in \[0, 1\]"):
        curves([1], {"x": [math.nan]}, title="t", xlabel="k", ylabel="v")
    with pytest.raises(ValueError, match="strictly increasing"):
        curves([1, 1], {"x": [0.1, 0.2]}, title="t", xlabel="k", ylabel="v")
    with pytest.raises(TypeError):
        curves([1.5], {"x": [0.1]}, title="t", xlabel="k", ylabel="v")  # type: ignore[list-item]
    with pytest.raises(ValueError, match="2 estimates for 1"):
        interval_bars(["a"], {"x": [Estimate(0.1), Estimate(0.2)]}, title="t", ylabel="v")
    with pytest.raises(ValueError, match="negative"):
        stacked_counts(["a"], {"x": [-1]}, title="t", xlabel="n")
    with pytest.raises(ValueError, match="NaN or infinite"):
        histograms({"x": [1.0, math.inf]}, title="t", xlabel="n")


@pytest.mark.parametrize(
    ("value", "low", "high", "message"),
    [
        (1.5, None, None, r"not in \[0, 1\]"),
        (0.5, 0.4, None, "both interval ends or neither"),
        (None, 0.1, 0.2, "no value"),
        (0.5, 0.6, 0.4, "reversed"),
        (0.5, -0.1, 0.6, r"not in \[0, 1\]"),
    ],
)
def test_estimate_refuses_what_it_cannot_draw(
    value: float | None, low: float | None, high: float | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Estimate(value, low, high)


def test_an_interval_need_not_contain_its_value() -> None:
    svg = interval_bars(["a"], {"x": [Estimate(0.9, 0.5, 0.8)]}, title="t", ylabel="v")
    assert "a" in texts(svg)
