"""The report's charts, each drawn as one inline ``<svg>`` string.

Why this way: the report opens from disk with no network, so its charts live inside the page, and
the same cards must give the same page bytes on any machine. So every chart is drawn with
matplotlib's object API (a bare ``Figure``: no pyplot state, no GUI backend), saved as SVG with
text kept as text, a fixed hash salt and no date, and every id in it is prefixed with a digest of
the chart's inputs so that several charts can share one HTML page. Colours come from one
colour-blind-safe cycle (Okabe-Ito) by position, so a caller that passes the cards in the same
order to every function gets the same colour for a card in every chart. Rates in [0, 1] are drawn
on a 0-100 scale everywhere. Long names are shortened with an ellipsis in the middle: the report's
tables, not the charts, carry full names.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import math
import operator
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import matplotlib
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.projections.polar import PolarAxes
from matplotlib.textpath import text_to_path
from matplotlib.ticker import MaxNLocator, NullLocator

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

#: Okabe-Ito, strongest first; yellow and black come last (yellow is faint on white).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")
#: Markers (lines) and hatches (bars): past the palette, a colour comes round again with
#: another marker and a hatch, so that no two series look alike.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_HATCHES = ("", "//", "..", "xx", "\\\\")

#: Longest category, axis or segment label drawn in full; longer ones lose their middle.
LABEL_CHARS = 28
#: Longest card label drawn in full (legends).
LEGEND_CHARS = 40
PERCENT_TICKS = (0, 20, 40, 60, 80, 100)
#: A radar needs this many axes; fewer are drawn as bars.
RADAR_MIN_AXES = 3
_HIST_MAX_BINS = 60
_NA = "n/a"
_GREY = "#555555"

_RC: dict[RcKeyType, Any] = {
    "svg.hashsalt": "frostgym",
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Verdana"],
    "font.size": 9.0,  # = _FONT, the size the layout measures text at
    "text.parse_math": False,  # a "$" in a label is a dollar, not math
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "hatch.linewidth": 0.8,
}
#: rc_context changes process-wide settings: one chart at a time.
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Estimate:
    """A value in [0, 1] with an optional interval (both ends or neither).

    Raises ValueError on a value or end outside [0, 1] (beyond rounding) or NaN, one end without the other,
    an interval without a value, or ``low > high``. The interval need not contain the value
    (a percentile bootstrap's may not); it is drawn as given.
    """

    value: float | None
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        for name in ("value", "low", "high"):
            number = getattr(self, name)
            if number is not None:
                _check_rate(number, f"Estimate.{name}")
        if (self.low is None) != (self.high is None):
            raise ValueError(f"Estimate needs both interval ends or neither, got low={self.low} high={self.high}")
        if self.value is None and self.low is not None:
            raise ValueError("Estimate has an interval but no value")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"Estimate interval is reversed: low={self.low} > high={self.high}")


def radar(axes: Sequence[str], series: Mapping[str, Sequence[float | None]], *, title: str) -> str:
    """Every card's value per axis on one radar, on a 0-100 scale (all axes higher-is-better).

    ``series`` maps a card label to one value in [0, 1] per axis (drawn as 0-100), or None where
    the card has no value: drawn at 0 with a cross, and the axis label says ``(n/a)`` (naming
    the cards when only some lack it). With fewer than 3 axes a radar means nothing: the same
    data is drawn as grouped horizontal bars and the title says so. No axes or no series: a
    small "no data" chart. Raises ValueError on a series of the wrong length or a value outside
    [0, 1]. Show the numbers beside it: a radar alone misleads.
    """
    names = [str(name) for name in axes]
    rows = [(str(label), _rates(values, len(names), f"radar series {label!r}")) for label, values in series.items()]
    key = ("radar", title, names, rows)
    if not names or not rows:
        return _no_data(key, title)
    if len(names) < RADAR_MIN_AXES:
        bar_title = f"{title} (bars: a radar needs {RADAR_MIN_AXES} or more axes)"
        estimates = [(label, [Estimate(value) for value in values]) for label, values in rows]
        return _render(key, bar_title, lambda: _grouped_bars(bar_title, names, estimates, "value (0-100)"))
    return _render(key, title, lambda: _radar_figure(title, names, rows))


def interval_bars(
    categories: Sequence[str],
    series: Mapping[str, Sequence[Estimate]],
    *,
    title: str,
    ylabel: str,
    ceiling: Sequence[float | None] | None = None,
    ceiling_label: str = "ceiling",
) -> str:
    """Grouped horizontal bars, one per card per category, on a 0-100 scale, with each
    estimate's interval as an error bar.

    ``ceiling``, when given, is one rate per category (None: none there), drawn as a dashed
    mark across the category's bars (the best score the env allows, the oracle's) and named
    ``ceiling_label`` in the legend, so each bar reads against what it could reach.

    ``series`` maps a card label to one Estimate per category (values in [0, 1], drawn as
    0-100). A None value is drawn as no bar with an "n/a" mark. Bars are horizontal so that
    many categories stay readable (the chart grows taller with them): ``ylabel`` names the
    value axis, which is the horizontal one. No categories or no series: a small "no data"
    chart. Raises ValueError on a series of the wrong length.
    """
    names = [str(name) for name in categories]
    rows = [
        (str(label), _estimates(values, len(names), f"interval_bars series {label!r}"))
        for label, values in series.items()
    ]
    marks = None if ceiling is None else _rates(ceiling, len(names), "interval_bars ceiling")
    key: tuple[object, ...] = ("interval_bars", title, ylabel, names, rows)
    if marks is not None:
        key += (ceiling_label, marks)
    if not names or not rows:
        return _no_data(key, title)
    return _render(key, title, lambda: _grouped_bars(title, names, rows, ylabel, marks, ceiling_label))


def stacked_counts(groups: Sequence[str], stacks: Mapping[str, Sequence[int]], *, title: str, xlabel: str) -> str:
    """One horizontal bar per group, split into one segment per stack (e.g. failure labels
    per env), with a legend of the segments and each bar's total at its end.

    ``stacks`` maps a segment name to one count (a non-negative integer) per group; segments
    are stacked and coloured in the mapping's order. No groups: a small "no data" chart;
    groups with no stacks or all-zero counts are drawn as empty bars with total 0. Raises
    ValueError on a stack of the wrong length or a negative count, TypeError on a non-integer.
    """
    names = [str(name) for name in groups]
    segments = [
        (str(label), _counts(values, len(names), f"stacked_counts stack {label!r}")) for label, values in stacks.items()
    ]
    key = ("stacked_counts", title, xlabel, names, segments)
    if not names:
        return _no_data(key, title)
    return _render(key, title, lambda: _stacked_figure(title, names, segments, xlabel))


def histograms(series: Mapping[str, Sequence[float]], *, title: str, xlabel: str) -> str:
    """Overlaid step histograms (e.g. completion lengths), one per card, on the same bins.

    Heights are each card's share of its own values, so cards with different counts compare;
    the legend gives each card's count and median, and a dotted line marks the median. Integer
    data over a short range gets one bin per integer; otherwise numpy's "auto" bins, at most 60.
    A card with no values stays in the legend as "(no data)" (colours keep their order). No
    series, or no values at all: a small "no data" chart. Raises ValueError on NaN or infinity.
    """
    rows = [(str(label), _finite(values, f"histograms series {label!r}")) for label, values in series.items()]
    key = ("histograms", title, xlabel, rows)
    if not any(values for _, values in rows):
        return _no_data(key, title)
    return _render(key, title, lambda: _histogram_figure(title, rows, xlabel))


def curves(
    xs: Sequence[int], series: Mapping[str, Sequence[float | None]], *, title: str, xlabel: str, ylabel: str
) -> str:
    """One line with markers per card (e.g. pass@k against k), on a 0-100 scale.

    ``xs`` are strictly increasing integers; ``series`` maps a card label to one value in
    [0, 1] per x (drawn as 0-100), None leaving a gap. The x axis is logarithmic (base 2) when
    every x is at least 1 and they span a factor of 8 or more; up to 12 xs are each labelled.
    No xs or no series: a small "no data" chart. Raises ValueError on xs that are not strictly
    increasing, a series of the wrong length or a value outside [0, 1]; TypeError on a
    non-integer x.
    """
    ks = [operator.index(x) for x in xs]
    if any(b <= a for a, b in itertools.pairwise(ks)):
        raise ValueError(f"curves: xs must be strictly increasing, got {ks}")
    rows = [(str(label), _rates(values, len(ks), f"curves series {label!r}")) for label, values in series.items()]
    key = ("curves", title, xlabel, ylabel, ks, rows)
    if not ks or not rows:
        return _no_data(key, title)
    return _render(key, title, lambda: _curves_figure(title, ks, rows, xlabel, ylabel))


@dataclass(frozen=True)
class Delta:
    """A paired difference in [-1, 1] (candidate minus base) with an optional interval (both
    ends or neither); ``weak`` marks one over too few tasks to say (drawn hollow).

    Raises ValueError on a value or end outside [-1, 1] (beyond rounding) or NaN, one end
    without the other, an interval without a value, or ``low > high``.
    """

    value: float | None
    low: float | None = None
    high: float | None = None
    weak: bool = False

    def __post_init__(self) -> None:
        for name in ("value", "low", "high"):
            number = getattr(self, name)
            if number is not None and not -1 - _RATE_SLACK <= float(number) <= 1 + _RATE_SLACK:
                raise ValueError(f"Delta.{name}: {number!r} is not in [-1, 1]")
        if (self.low is None) != (self.high is None):
            raise ValueError(f"Delta needs both interval ends or neither, got low={self.low} high={self.high}")
        if self.value is None and self.low is not None:
            raise ValueError("Delta has an interval but no value")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"Delta interval is reversed: low={self.low} > high={self.high}")


def paired_curves(
    ks: Sequence[int],
    series: Mapping[str, Sequence[float | None]],
    deltas: Sequence[Delta],
    *,
    title: str,
    crossing: int | None = None,
    delta_label: str = "paired delta, 95% interval",
) -> str:
    """Cards' pass@k against k (the upper panel, 0-100) above the paired delta at each k with
    its interval (the lower panel, in percentage points, a line at 0), on one log2 k axis.

    ``ks`` are strictly increasing integers of at least 1; ``series`` maps a card label to one
    value in [0, 1] per k (None leaves a gap), ``deltas`` has one Delta per k (a None value
    draws nothing there). ``crossing``, a k of ``ks``, is marked on both panels by a dashed
    line and named in the legend; without one the legend says the curves do not cross. The
    curves' markers are in groups with ids ending ``-curve-<i>`` (the i-th series) and the
    delta's in ``-delta``, so that a test can count the points. No ks or no series: a small
    "no data" chart. Raises ValueError on ks that are not strictly increasing or below 1, a
    series or deltas of the wrong length, a value out of range or a crossing not in ``ks``;
    TypeError on a non-integer k or a delta that is not a Delta.
    """
    numbers = [operator.index(k) for k in ks]
    if any(b <= a for a, b in itertools.pairwise(numbers)) or any(k < 1 for k in numbers):
        raise ValueError(f"paired_curves: ks must be strictly increasing and at least 1, got {numbers}")
    rows = [(str(label), _rates(v, len(numbers), f"paired_curves series {label!r}")) for label, v in series.items()]
    if len(deltas) != len(numbers):
        raise ValueError(f"paired_curves has {len(deltas)} deltas for {len(numbers)} ks")
    for delta in deltas:
        if not isinstance(delta, Delta):
            raise TypeError(f"paired_curves: {delta!r} is not a Delta")
    if crossing is not None and crossing not in numbers:
        raise ValueError(f"paired_curves: crossing k = {crossing} is not one of {numbers}")
    key = ("paired_curves", title, delta_label, numbers, rows, list(deltas), crossing)
    if not numbers or not rows:
        return _no_data(key, title)
    return _render(key, title, lambda: _paired_figure(title, numbers, rows, list(deltas), crossing, delta_label))


# --- figures -------------------------------------------------------------------------------
# Layout is computed here, in points, from measured text: matplotlib's constrained layout draws
# every figure twice, which doubles the time of a chart with many categories.


def _radar_figure(title: str, names: list[str], rows: list[tuple[str, list[float | None]]]) -> Figure:
    labels = [_axis_label(j, name, rows) for j, name in enumerate(names)]
    # Axis j points at compass angle 2*pi*j/n, clockwise from the top; its label sits just
    # outside the rim, aligned away from the circle so that no label covers it.
    angles = [2 * math.pi * j / len(names) for j in range(len(names))]
    sides = [math.sin(angle) for angle in angles]
    side = max((_width(label) for label, x in zip(labels, sides, strict=True) if abs(x) > _UPRIGHT), default=0.0)
    diameter = max(_RADAR_MIN_PT, min(_FIGURE_PT - 2 * (side + _RADAR_GAP + _PAD), _RADAR_MAX_PT))
    margin = (_FIGURE_PT - diameter) / 2
    rim = max(label.count("\n") + 1 for label in labels) * _LINE + _RADAR_GAP + _PAD
    handles = [_line_handle(i) for i in range(len(rows))]
    legend = [label for label, _ in rows]
    fig, rect = _chart(title, handles, legend, body=diameter, left=margin, right=margin, top=rim, bottom=rim)
    ax = fig.add_axes(rect, projection="polar")
    assert isinstance(ax, PolarAxes)
    ax.set_theta_offset(math.pi / 2)
    ax.set_theta_direction(-1)
    loop = [*angles, angles[0]]
    for i, (_, values) in enumerate(rows):
        colour, marker, _ = _style(i)
        radii = [0.0 if v is None else 100 * v for v in values]
        ax.plot(loop, [*radii, radii[0]], color=colour, marker=marker, markersize=4, linewidth=1.5)
        ax.fill(loop, [*radii, radii[0]], color=colour, alpha=0.08, linewidth=0)
        missing = [angle for angle, v in zip(angles, values, strict=True) if v is None]
        if missing:
            ax.plot(missing, [0.0] * len(missing), linestyle="none", marker="x", markersize=7, color=colour)
    ax.set_xticks(angles, labels=[""] * len(angles))
    for angle, label in zip(angles, labels, strict=True):
        x, y = math.sin(angle), math.cos(angle)
        ax.annotate(
            label,
            xy=(angle, 100),
            xytext=(_RADAR_GAP * x, _RADAR_GAP * y),
            textcoords="offset points",
            ha="left" if x > _UPRIGHT else "right" if x < -_UPRIGHT else "center",
            va="bottom" if y > _UPRIGHT else "top" if y < -_UPRIGHT else "center",
            multialignment="center",
            annotation_clip=False,
        )
    ax.set_ylim(0, 100)
    ax.set_yticks(PERCENT_TICKS, labels=[str(t) for t in PERCENT_TICKS], color=_GREY, fontsize=7)
    ax.set_rlabel_position(180 / len(names))  # between the first two axes, on no series' line
    # matplotlib never labels the centre of a polar plot; the scale's 0 is labelled beside it.
    ax.annotate("0", xy=(0, 0), xytext=(3, 2), textcoords="offset points", color=_GREY, fontsize=7)
    ax.grid(color="#cccccc", linewidth=0.6)
    return fig


def _axis_label(j: int, name: str, rows: list[tuple[str, list[float | None]]]) -> str:
    """A radar axis's label, saying on a second line which cards have no value on it."""
    lacking = [label for label, values in rows if values[j] is None]
    label = _short(name, _RADAR_LABEL_CHARS)
    if len(lacking) == len(rows):
        return f"{label} ({_NA})"
    if lacking and len(lacking) <= 2:
        return f"{label}\n({_NA}: {', '.join(_short(card, 14) for card in lacking)})"
    if lacking:
        return f"{label}\n({_NA}: {len(lacking)} cards)"
    return label


def _grouped_bars(
    title: str,
    names: list[str],
    rows: list[tuple[str, list[Estimate]]],
    value_label: str,
    ceiling: list[float | None] | None = None,
    ceiling_label: str = "ceiling",
) -> Figure:
    shown = [_short(name, LABEL_CHARS) for name in names]
    top_ticks = len(names) > _TOP_TICKS_FROM
    handles = [_bar_handle(i) for i in range(len(rows))]
    labels = [label for label, _ in rows]
    if ceiling is not None:
        handles.append(Line2D([], [], color=_CEILING, linestyle="--", linewidth=1.4))
        labels.append(ceiling_label)
    fig, rect = _chart(
        title,
        handles,
        labels,
        body=len(names) * max(20.0, 12.0 * len(rows)),
        left=_category_margin(shown),
        bottom=_TICKS + _LINE + 2 * _PAD,
        top=_TICKS if top_ticks else _PAD,
    )
    ax = fig.add_axes(rect)
    height = 0.8 / len(rows)
    spans: tuple[list[float], list[float], list[float]] = ([], [], [])
    for i, (_, estimates) in enumerate(rows):
        colour, _, hatch = _style(i)
        ys = [k + (i - (len(rows) - 1) / 2) * height for k in range(len(names))]
        drawn = [(y, e) for y, e in zip(ys, estimates, strict=True) if e.value is not None]
        ax.barh(
            [y for y, _ in drawn],
            [100 * _clip(e.value) for _, e in drawn],
            height=height * 0.9,
            color=colour,
            hatch=hatch,
            edgecolor=_HATCH_EDGE if hatch else colour,
            linewidth=0,
        )
        for y, e in drawn:
            if e.low is not None and e.high is not None:
                spans[0].append(y)
                spans[1].append(100 * _clip(e.low))
                spans[2].append(100 * _clip(e.high))
        for y, e in zip(ys, estimates, strict=True):
            if e.value is None:
                ax.text(1, y, _NA, va="center", ha="left", fontsize=7, color=_GREY)
    if spans[0]:
        ax.hlines(spans[0], spans[1], spans[2], color="#222222", linewidth=1)
        cap = min(6.0, 30 * height)
        ax.plot(spans[1] + spans[2], spans[0] * 2, linestyle="none", marker="|", markersize=cap, color="#222222")
    marked = [(k, value) for k, value in enumerate(ceiling or []) if value is not None]
    if marked:
        ax.vlines(
            [100 * _clip(value) for _, value in marked],
            [k - 0.45 for k, _ in marked],
            [k + 0.45 for k, _ in marked],
            colors=_CEILING,
            linestyles="--",
            linewidth=1.4,
        )
    _categories(ax, shown)
    _percent_axis(ax, "x")
    ax.set_xlabel(value_label)
    if top_ticks:
        ax.tick_params(axis="x", labeltop=True, top=True)
    return fig


def _stacked_figure(title: str, names: list[str], segments: list[tuple[str, list[int]]], xlabel: str) -> Figure:
    shown = [_short(name, LABEL_CHARS) for name in names]
    handles = [_bar_handle(i) for i in range(len(segments))]
    fig, rect = _chart(
        title,
        handles,
        [label for label, _ in segments],
        body=len(names) * 22.0,
        left=_category_margin(shown),
        bottom=_TICKS + _LINE + 2 * _PAD,
    )
    ax = fig.add_axes(rect)
    left = np.zeros(len(names))
    for i, (_, counts) in enumerate(segments):
        colour, _, hatch = _style(i)
        edge = _HATCH_EDGE if hatch else colour
        ax.barh(
            range(len(names)), counts, left=left, height=0.7, color=colour, hatch=hatch, edgecolor=edge, linewidth=0
        )
        left += counts
    totals = [int(total) for total in left]
    for k, total in enumerate(totals):
        ax.text(total, k, f" {total}", va="center", ha="left", fontsize=8, color=_GREY)
    _categories(ax, shown)
    ax.set_xlim(0, max(1, max(totals)) * 1.12)  # room for the totals
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", color=_GRID, linewidth=0.6)
    ax.set_axisbelow(True)
    return fig


def _histogram_figure(title: str, rows: list[tuple[str, list[float]]], xlabel: str) -> Figure:
    edges = _bins(np.concatenate([np.asarray(values, dtype=float) for _, values in rows if values]))
    labels = []
    for label, values in rows:
        card = _short(label, LEGEND_CHARS)
        labels.append(
            f"{card} (no data)" if not values else f"{card} (n={len(values)}, median {np.median(values):.4g})"
        )
    handles = [_line_handle(i, marker=False) for i in range(len(rows))]
    fig, rect = _chart(
        title,
        handles,
        labels,
        body=_PLOT_PT,
        left=_value_margin(),
        bottom=_TICKS + _LINE + 2 * _PAD,
        legend_chars=2 * LEGEND_CHARS,
    )
    ax = fig.add_axes(rect)
    for i, (_, values) in enumerate(rows):
        if values:
            colour, _, _ = _style(i)
            counts, _ = np.histogram(values, bins=edges)
            ax.stairs(100 * counts / len(values), edges, color=colour, linewidth=1.5)
            ax.axvline(float(np.median(values)), color=colour, linestyle=":", linewidth=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("% of the card's values")
    ax.grid(axis="y", color=_GRID, linewidth=0.6)
    ax.set_axisbelow(True)
    return fig


def _curves_figure(
    title: str, ks: list[int], rows: list[tuple[str, list[float | None]]], xlabel: str, ylabel: str
) -> Figure:
    handles = [_line_handle(i) for i in range(len(rows))]
    fig, rect = _chart(
        title,
        handles,
        [label for label, _ in rows],
        body=_PLOT_PT,
        left=_value_margin(),
        bottom=_TICKS + _LINE + 2 * _PAD,
    )
    ax = fig.add_axes(rect)
    for i, (_, values) in enumerate(rows):
        colour, marker, _ = _style(i)
        ys = [math.nan if v is None else 100 * v for v in values]
        ax.plot(ks, ys, color=colour, marker=marker, markersize=5, linewidth=1.5)
    if ks[0] >= 1 and ks[-1] >= 8 * ks[0]:
        ax.set_xscale("log", base=2)
    else:
        pad = 0.05 * (ks[-1] - ks[0]) or 1
        ax.set_xlim(ks[0] - pad, ks[-1] + pad)
    if len(ks) <= _LABELLED_XS:
        ax.set_xticks(ks, labels=[str(k) for k in ks])
        ax.xaxis.set_minor_locator(NullLocator())
    _percent_axis(ax, "y")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig


def _paired_figure(
    title: str,
    ks: list[int],
    rows: list[tuple[str, list[float | None]]],
    deltas: list[Delta],
    crossing: int | None,
    delta_label: str,
) -> Figure:
    handles = [_line_handle(i) for i in range(len(rows))]
    labels = [label for label, _ in rows]
    handles.append(Line2D([], [], color=_CEILING, marker="o", markersize=5, linestyle="none"))
    labels.append(delta_label)
    if any(d.weak and d.value is not None for d in deltas):
        handles.append(
            Line2D([], [], color=_CEILING, marker="o", markersize=5, markerfacecolor="white", linestyle="none")
        )
        labels.append("too few tasks to say")
    if crossing is None:
        handles.append(Line2D([], [], linestyle="none"))
        labels.append(f"the curves do not cross up to k = {ks[-1]}")
    else:
        handles.append(Line2D([], [], color=_GREY, linestyle="--", linewidth=1.2))
        labels.append(f"the curves cross at k = {crossing}")
    upper, gap, lower = _PLOT_PT * 0.8, 2 * _PAD, _PLOT_PT * 0.5
    fig, (x, y, width, height) = _chart(
        title, handles, labels, body=upper + gap + lower, left=_value_margin(), bottom=_TICKS + _LINE + 2 * _PAD
    )
    per_pt = height / (upper + gap + lower)
    top_ax = fig.add_axes((x, y + (lower + gap) * per_pt, width, upper * per_pt))
    low_ax = fig.add_axes((x, y, width, lower * per_pt), sharex=top_ax)
    for i, (_, values) in enumerate(rows):
        colour, marker, _ = _style(i)
        ys = [math.nan if v is None else 100 * v for v in values]
        (line,) = top_ax.plot(ks, ys, color=colour, marker=marker, markersize=5, linewidth=1.5)
        line.set_gid(f"curve-{i}")
    _percent_axis(top_ax, "y")
    top_ax.set_ylabel("pass@k (%)")
    top_ax.tick_params(axis="x", labelbottom=False)
    drawn = [(k, d) for k, d in zip(ks, deltas, strict=True) if d.value is not None]
    spans = [(k, 100 * d.low, 100 * d.high) for k, d in drawn if d.low is not None and d.high is not None]
    if spans:
        at, lows, highs = zip(*spans, strict=True)
        low_ax.vlines(at, lows, highs, color=_CEILING, linewidth=1.2, gid="delta-interval")
        low_ax.plot([*at, *at], [*lows, *highs], linestyle="none", marker="_", markersize=7, color=_CEILING)
    if drawn:
        (points,) = low_ax.plot(
            [k for k, _ in drawn],
            [100 * (d.value or 0.0) for _, d in drawn],
            linestyle="none",
            marker="o",
            markersize=5,
            color=_CEILING,
        )
        points.set_gid("delta")
        weak = [(k, d) for k, d in drawn if d.weak]
        if weak:  # too few tasks to say: hollow, over the filled point
            low_ax.plot(
                [k for k, _ in weak],
                [100 * (d.value or 0.0) for _, d in weak],
                linestyle="none",
                marker="o",
                markersize=5,
                color=_CEILING,
                markerfacecolor="white",
            )
    reach = max([abs(v) for _, a, b in spans for v in (a, b)] + [100 * abs(d.value or 0.0) for _, d in drawn] + [5.0])
    low_ax.set_ylim(-1.15 * reach, 1.15 * reach)
    low_ax.yaxis.set_major_locator(MaxNLocator(nbins=4, symmetric=True))
    low_ax.axhline(0, color=_GREY, linewidth=0.8)
    low_ax.grid(axis="y", color=_GRID, linewidth=0.6)
    low_ax.set_axisbelow(True)
    low_ax.set_ylabel("delta (points)")
    if crossing is not None:
        for panel, ax in (("upper", top_ax), ("lower", low_ax)):
            ax.axvline(crossing, color=_GREY, linestyle="--", linewidth=1.2, gid=f"crossing-{panel}")
    low_ax.set_xscale("log", base=2)
    low_ax.set_xlim(ks[0] / 2**0.3, ks[-1] * 2**0.3)
    if len(ks) <= _LABELLED_XS:
        low_ax.set_xticks(ks, labels=[str(k) for k in ks])
        low_ax.xaxis.set_minor_locator(NullLocator())
    low_ax.set_xlabel("k (samples per task, log2 scale)")
    return fig


# --- parts ---------------------------------------------------------------------------------

_FONT = 9.0
_TITLE_FONT = 11.0
_FIGURE_PT = 540.0  # 7.5 in
#: Height of the plot area of a chart that does not grow with categories.
_PLOT_PT = 220.0
_PAD = 4.0
_LINE = 1.3 * _FONT  # one line of text
_TICKS = _LINE + 7.0  # tick labels with the tick and its pad
_TOP_TICKS_FROM = 15  # categories past which the value axis is labelled on top too
_LABELLED_XS = 12
_RADAR_MIN_PT = 200.0
_RADAR_MAX_PT = 330.0
_RADAR_GAP = 6.0  # between the rim and an axis label
_RADAR_LABEL_CHARS = 22
_UPRIGHT = 0.1  # |sin| or |cos| below this: a label is centred on its axis
_GRID = "#e5e5e5"
_HATCH_EDGE = "#333333"
_CEILING = "#222222"


def _chart(
    title: str,
    handles: list[Artist],
    labels: list[str],
    *,
    body: float,
    left: float,
    bottom: float,
    top: float = _PAD,
    right: float = 16.0,
    legend_chars: int = LEGEND_CHARS,
) -> tuple[Figure, tuple[float, float, float, float]]:
    """A figure with the title and the legend above the plot, and the plot's rectangle (figure
    fractions) for ``fig.add_axes``. All lengths are points: ``body`` is the plot's height,
    the others the room beside it for tick labels and axis labels."""
    shown = [_short(label, legend_chars) for label in labels]
    entry = max((_width(label) for label in shown), default=0.0) + 2.8 * _FONT  # handle and its gap
    columns = max(1, min(len(shown), int((_FIGURE_PT - 2 * _PAD + 2 * _FONT) // (entry + 2 * _FONT))))
    rows = -(-len(shown) // columns)
    legend = rows * _LINE + (rows - 1) * 0.5 * _FONT + 2 * _PAD if shown else 0.0
    head = 2 * _PAD + 1.3 * _TITLE_FONT + legend
    height = head + top + body + bottom
    fig = Figure(figsize=(_FIGURE_PT / 72, height / 72))
    fig.text(0.5, 1 - _PAD / height, title, ha="center", va="top", fontsize=_TITLE_FONT, fontweight="bold")
    if shown:
        # Handles and labels are passed explicitly: a label starting with "_" is then still shown.
        fig.legend(
            handles,
            shown,
            loc="upper center",
            bbox_to_anchor=(0.5, 1 - (2 * _PAD + 1.3 * _TITLE_FONT) / height),
            ncols=columns,
            borderaxespad=0,
            borderpad=0,
        )
    width = _FIGURE_PT - left - right
    return fig, (left / _FIGURE_PT, bottom / height, width / _FIGURE_PT, body / height)


def _category_margin(labels: list[str]) -> float:
    return max(_width(label) for label in labels) + 7.0 + 2 * _PAD


def _value_margin() -> float:
    """Room for a vertical value axis: tick labels up to "100.0" and the axis label."""
    return _width("100.0") + 7.0 + _LINE + 3 * _PAD


def _categories(ax: Axes, labels: list[str]) -> None:
    ax.set_yticks(range(len(labels)), labels=labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # the first category on top


def _percent_axis(ax: Axes, which: Literal["x", "y"]) -> None:
    labels = [str(t) for t in PERCENT_TICKS]
    if which == "x":
        ax.set_xlim(0, 100)
        ax.set_xticks(PERCENT_TICKS, labels=labels)
    else:
        ax.set_ylim(0, 100)
        ax.set_yticks(PERCENT_TICKS, labels=labels)
    ax.grid(axis=which, color=_GRID, linewidth=0.6)
    ax.set_axisbelow(True)


def _width(text: str) -> float:
    """Width in points of ``text`` (its widest line) in the charts' font at 9 pt."""
    return max(_line_width(line) for line in text.split("\n"))


@functools.lru_cache(maxsize=4096)
def _line_width(line: str) -> float:
    font = FontProperties(family=["DejaVu Sans"], size=_FONT)  # as _RC sets it
    width, _, _ = text_to_path.get_text_width_height_descent(line, font, ismath=False)
    return float(width)


def _style(index: int) -> tuple[str, str, str]:
    """Colour, marker and hatch of the index-th series: the colour by position; past the
    palette, marker and hatch change so that no two series look alike."""
    turn = index // len(PALETTE)
    return (
        PALETTE[index % len(PALETTE)],
        _MARKERS[(index + turn) % len(_MARKERS)],
        _HATCHES[turn % len(_HATCHES)],
    )


def _line_handle(index: int, *, marker: bool = True) -> Artist:
    colour, symbol, _ = _style(index)
    return Line2D([], [], color=colour, marker=symbol if marker else "", markersize=5, linewidth=1.5)


def _bar_handle(index: int) -> Artist:
    colour, _, hatch = _style(index)
    return Patch(facecolor=colour, hatch=hatch, edgecolor=_HATCH_EDGE if hatch else colour, linewidth=0)


def _bins(values: np.ndarray[Any, np.dtype[np.float64]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Shared bin edges: one bin per integer for integers over a short range, else numpy's
    "auto" choice, at most ``_HIST_MAX_BINS``."""
    low, high = float(values.min()), float(values.max())
    if np.all(values == np.round(values)) and high - low <= _HIST_MAX_BINS:
        return np.arange(low - 0.5, high + 1.5)
    edges = np.histogram_bin_edges(values, bins="auto")
    if len(edges) - 1 > _HIST_MAX_BINS:
        edges = np.histogram_bin_edges(values, bins=_HIST_MAX_BINS)
    return edges


def _short(text: str, limit: int) -> str:
    """``text``, or its start and end around an ellipsis when longer than ``limit``: the end
    is kept because names that share a long prefix differ there."""
    if len(text) <= limit:
        return text
    tail = limit // 3
    return f"{text[: limit - 1 - tail]}…{text[len(text) - tail :]}"


def _clip(rate: float | None) -> float:
    assert rate is not None
    return min(1.0, max(0.0, rate))


# --- inputs --------------------------------------------------------------------------------

#: Rates a hair outside [0, 1] (floating-point sums) are accepted and drawn at the edge.
_RATE_SLACK = 1e-9


def _check_rate(number: float, what: str) -> None:
    if not -_RATE_SLACK <= float(number) <= 1 + _RATE_SLACK:  # NaN fails too
        raise ValueError(f"{what}: {number!r} is not in [0, 1]")


def _rates(values: Sequence[float | None], n: int, what: str) -> list[float | None]:
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} values for {n} positions")
    out: list[float | None] = []
    for value in values:
        if value is not None:
            _check_rate(value, what)
        out.append(None if value is None else _clip(float(value)))
    return out


def _estimates(values: Sequence[Estimate], n: int, what: str) -> list[Estimate]:
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} estimates for {n} categories")
    for value in values:
        if not isinstance(value, Estimate):
            raise TypeError(f"{what}: {value!r} is not an Estimate")
    return list(values)


def _counts(values: Sequence[int], n: int, what: str) -> list[int]:
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} counts for {n} groups")
    counts = [operator.index(value) for value in values]
    if any(count < 0 for count in counts):
        raise ValueError(f"{what} has a negative count: {counts}")
    return counts


def _finite(values: Sequence[float], what: str) -> list[float]:
    out = [float(value) for value in values]
    if not all(math.isfinite(value) for value in out):
        raise ValueError(f"{what} has a NaN or infinite value")
    return out


# --- SVG -----------------------------------------------------------------------------------

_TAG = re.compile(r"<[^>]*>")
_ID = re.compile(r'(\sid=")([^"]*)(")')
_REFERENCE = re.compile(r'(href="#|url\(#)')


def _no_data(key: object, title: str) -> str:
    def draw() -> Figure:
        fig = Figure(figsize=(_FIGURE_PT / 72, 0.9))
        fig.text(0.5, 0.68, title, ha="center", va="center", fontsize=11, fontweight="bold")
        fig.text(0.5, 0.28, "no data", ha="center", va="center", color=_GREY)
        return fig

    return _render(("no data", key), title, draw)


def _render(key: object, title: str, draw: Callable[[], Figure]) -> str:
    """Draw and save one figure as an inline ``<svg>`` element whose ids all start with a
    digest of ``key`` (the chart's normalised inputs)."""
    prefix = "fg" + hashlib.sha256(repr(key).encode("utf-8")).hexdigest()[:12]
    buffer = io.StringIO()
    with _LOCK, matplotlib.rc_context({**_RC, "svg.id": prefix}):
        fig = draw()
        fig.savefig(buffer, format="svg", metadata={"Title": title, "Date": None, "Creator": None})
    return _inline(buffer.getvalue(), prefix)


def _inline(document: str, prefix: str) -> str:
    """matplotlib's SVG document as an element for an HTML page: no prolog or DOCTYPE, ids
    prefixed (every chart has a ``figure_1``), its one style rule scoped to this svg (an
    inline ``<style>`` applies to the whole page), scaling down with the page, and announced
    as one image named by its ``<title>``."""
    svg = document[document.index("<svg") :].rstrip() + "\n"

    def tag(match: re.Match[str]) -> str:
        text = _ID.sub(
            lambda m: m.group(0) if m.group(2) == prefix else f"{m.group(1)}{prefix}-{m.group(2)}{m.group(3)}",
            match.group(0),
        )
        return _REFERENCE.sub(lambda m: f"{m.group(1)}{prefix}-", text)

    svg = _TAG.sub(tag, svg)
    style = '<style type="text/css">*{'
    if svg.count(style) != 1:
        raise AssertionError("matplotlib's SVG style rule changed: update frostgym.report.plots._inline")
    svg = svg.replace(style, f'<style type="text/css">#{prefix} *{{', 1)
    return svg.replace("<svg ", '<svg role="img" style="max-width: 100%; height: auto" ', 1)
