"""``write_report``: one or more cards as a static HTML report in a directory.

Why a directory and not one file: the page (``index.html``) holds the numbers and the
plots, and the trajectories stay beside it in ``data/`` (``frostgym.report.records``), so
a 100,000-episode report opens as fast as a 100-episode one. The page is written last, so
a report that was interrupted never points at data that is not there. Comparisons are
``frostgym compare``'s own (``compare_facts`` of the cards as the report read them, gates
included): the report shows the decision, it does not make another one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from frostgym.compare.compare import compare_facts
from frostgym.compare.gates import Gate
from frostgym.compare.reading import plan_difference
from frostgym.compare.training_log import TrainingLog
from frostgym.core.errors import ReportError
from frostgym.report.index import index_script
from frostgym.report.page import CardComparison, render_page
from frostgym.report.records import ReportCard, read_report_card

INDEX_FILE = "index.html"
DATA_DIR = "data"


def write_report(
    directories: Sequence[Path],
    out: Path,
    *,
    baseline: Path | None = None,
    gates: Sequence[Gate] | None = None,
    training: TrainingLog | None = None,
) -> Path:
    """Write the report of the cards in ``directories`` to ``out`` and return its
    ``index.html``. With several cards (or a ``baseline``), every card is compared with the
    baseline (``baseline``, else the first card), with ``gates`` judged when given; cards
    whose plans differ are compared on their shared episodes, and the report says so (or
    that they share none). ``training`` (``frostgym.compare.training_log.training_diagnostics``)
    adds the trainer's KL and entropy per window of steps and their flags.

    Raises ``ReportError`` for no card or gates without a second card, and what
    ``frostgym compare`` raises for a card it cannot read (``CardCorruptError``,
    ``CardNotCompleteError``). ``out/data`` is replaced; nothing else in ``out`` is touched."""
    paths = [Path(d) for d in directories]
    if baseline is not None:
        paths = [Path(baseline), *(p for p in paths if p.resolve() != Path(baseline).resolve())]
    if not paths:
        raise ReportError("no card to report on")
    if gates and len(paths) < 2:
        raise ReportError("gates judge a candidate against a baseline: give two cards, or --baseline")
    out.mkdir(parents=True, exist_ok=True)
    data_dir = out / DATA_DIR
    shutil.rmtree(data_dir, ignore_errors=True)
    index_path = out / INDEX_FILE
    index_path.unlink(missing_ok=True)
    cards: list[ReportCard] = []
    for number, (path, label) in enumerate(zip(paths, card_labels(paths), strict=True)):
        card = read_report_card(path, label, number, data_dir)
        (data_dir / f"c{number}" / "index.js").write_bytes(index_script(card))
        cards.append(card)
    comparisons = [_compare(cards[0], cand, gates) for cand in cards[1:]]
    partial = index_path.with_name(INDEX_FILE + ".partial")
    partial.write_text(render_page(cards, comparisons, training), encoding="utf-8")
    os.replace(partial, index_path)
    return index_path


def card_labels(paths: Sequence[Path]) -> list[str]:
    """Each card's name in the report: its directory's name, with its parent's (then a
    number) prepended where two cards would share one."""
    names = [p.resolve().name or str(p) for p in paths]
    labels = [
        f"{path.resolve().parent.name}/{name}" if names.count(name) > 1 else name
        for path, name in zip(paths, names, strict=True)
    ]
    seen: dict[str, int] = {}
    for position, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            labels[position] = f"{label} ({seen[label]})"
    return labels


def _compare(base: ReportCard, cand: ReportCard, gates: Sequence[Gate] | None) -> CardComparison:
    """``cand`` against ``base`` from the facts the report already read (never a second read)."""
    if base.facts.plan.keys().isdisjoint(cand.facts.plan.keys()):
        return CardComparison(base.label, cand.label, None, "the cards' plans share no episode: nothing to compare")
    difference = plan_difference(base.facts, cand.facts)
    comparison = compare_facts(base.facts, cand.facts, gates, overlap=difference is not None)
    note = (
        "" if difference is None else f"the cards' plans differ: {difference}: compared on the episodes both cards hold"
    )
    return CardComparison(base.label, cand.label, comparison, note)
