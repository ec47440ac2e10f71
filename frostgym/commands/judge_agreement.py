"""``frostgym judge-agreement``: how far a judged card's verdicts agree with labels (human
ones, or another grader's), as accuracy and Cohen's kappa with bootstrap intervals.

The labels file is JSONL, one object a line: ``{"episode_id": ID, "label": true|false}``,
or ``{"task_id": ID, "label": ...}`` where the card plays that task exactly once. The
judge's verdict on an episode is whether its grade (an ``llm_judge`` grade, written by
``frostgym judge``) passed. Labelled episodes the judge gave no verdict on (drops) are
listed apart and left out of the statistics. What cannot be matched (a missing file, a line
that is not a label, an id named twice or not in the card, a card with no judge grades)
stops the command with one line naming the file and line (``LabelsError``, exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from frostgym.commands.common import console
from frostgym.core.errors import LabelsError


@dataclass(frozen=True)
class _Target:
    """One record of the card a label can name: an episode's verdict, or a drop."""

    episode_id: str | None
    task_id: str
    verdict: bool | None  # None for a drop
    drop: Mapping[str, str] | None = None


def _card_targets(card_dir: Path) -> list[_Target]:
    from frostgym.cards.card import load_card
    from frostgym.core.grade import passes
    from frostgym.graders.judge import GRADER

    _, episodes, drops = load_card(card_dir)
    targets = []
    others: set[str] = set()
    for episode in episodes:
        if episode.grade is None or episode.grade["grader"] != GRADER.name:
            others.add(episode.grade["grader"] if episode.grade is not None else "no grade")
            continue
        targets.append(_Target(episode.episode_id, episode.task_id, passes(episode.grade)))
    if others:
        graded = "no judge grades" if not targets else f"grades of {', '.join(sorted(others))} besides the judge's"
        raise LabelsError(f"{card_dir}: the card holds {graded} ({GRADER.name}); judge it first with frostgym judge")
    if not targets and not any(d.drop.stage == "grade" for d in drops):
        raise LabelsError(
            f"{card_dir}: the card holds no judge grades ({GRADER.name}); judge it first with frostgym judge"
        )
    for drop in drops:
        info = {"drop_class": drop.drop.drop_class, "stage": drop.drop.stage, "error": drop.drop.error}
        targets.append(_Target(drop.episode_id, drop.task_id, None, info))
    return targets


def _read_labels(path: Path, targets: list[_Target]) -> list[tuple[_Target, bool]]:
    """Each label of the file at ``path`` with the card record it names, in file order."""
    by_episode = {t.episode_id: t for t in targets if t.episode_id is not None}
    by_task: dict[str, list[_Target]] = {}
    for target in targets:
        by_task.setdefault(target.task_id, []).append(target)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise LabelsError(f"{path}: cannot read the labels ({error.strerror or error})") from error
    except UnicodeDecodeError as error:
        raise LabelsError(f"{path}: not UTF-8 text ({error.reason})") from error
    labelled: list[tuple[_Target, bool]] = []
    seen: dict[int, int] = {}  # id() of a target -> the line that labelled it
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(text)
        except ValueError as error:
            raise LabelsError(f"{where}: not JSON ({error})") from error
        target = _one_label(data, where, by_episode, by_task)
        label = data["label"]
        if id(target) in seen:
            raise LabelsError(f"{where}: labels an episode line {seen[id(target)]} labelled already")
        seen[id(target)] = number
        labelled.append((target, label))
    if not labelled:
        raise LabelsError(f"{path}: no labels")
    return labelled


def _one_label(
    data: Any, where: str, by_episode: Mapping[str, _Target], by_task: Mapping[str, list[_Target]]
) -> _Target:
    if not isinstance(data, dict) or not isinstance(data.get("label"), bool):
        raise LabelsError(f'{where}: a label is {{"episode_id" or "task_id": ID, "label": true or false}}')
    keys = set(data) - {"label"}
    if len(keys) != 1 or not keys <= {"episode_id", "task_id"} or not isinstance(data[next(iter(keys))], str):
        raise LabelsError(f"{where}: a label names its episode by one string episode_id or task_id, and nothing else")
    if "episode_id" in data:
        found = by_episode.get(data["episode_id"])
        if found is None:
            raise LabelsError(f"{where}: episode_id {data['episode_id']!r} is not in the card")
        return found
    matches = by_task.get(data["task_id"], [])
    if not matches:
        raise LabelsError(f"{where}: task_id {data['task_id']!r} is not in the card")
    if len(matches) > 1:
        raise LabelsError(
            f"{where}: the card plays task_id {data['task_id']!r} {len(matches)} times: label it by episode_id"
        )
    return matches[0]


def _interval(value: float | None, interval: Any) -> dict[str, float | None]:
    return {
        "value": value,
        "low": None if interval is None else interval.low,
        "high": None if interval is None else interval.high,
    }


def judge_agreement_cmd(
    labels: Annotated[Path, typer.Argument(help='JSONL labels: {"episode_id" or "task_id": ID, "label": bool}.')],
    card_dir: Annotated[Path, typer.Argument(help="A card judged by frostgym judge.")],
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap resampling.")] = 0,
    resamples: Annotated[int, typer.Option(min=1, help="Bootstrap resamples per interval.")] = 2000,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of a table.")] = False,
) -> None:
    """Agreement of the judge's verdicts on CARD (an episode passed) with LABELS: n, accuracy
    and Cohen's kappa with seeded 95% percentile bootstrap intervals, the confusion counts,
    and the labelled episodes the judge dropped, apart."""
    from frostgym.compare.agreement import agreement

    targets = _card_targets(card_dir)
    labelled = _read_labels(labels, targets)
    judged = [(target, label) for target, label in labelled if target.verdict is not None]
    dropped = [target for target, _ in labelled if target.verdict is None]
    result = agreement(
        [label for _, label in judged], [bool(t.verdict) for t, _ in judged], seed=seed, resamples=resamples
    )
    table = result.confusion
    report = {
        "labels": len(labelled),
        "n": result.n,
        "accuracy": _interval(result.accuracy, result.accuracy_interval),
        "kappa": _interval(result.kappa, result.kappa_interval),
        "confusion": {
            "label_pass_judge_pass": table.both_pass,
            "label_pass_judge_fail": table.label_only,
            "label_fail_judge_pass": table.judge_only,
            "label_fail_judge_fail": table.both_fail,
        },
        "dropped": [{"episode_id": t.episode_id, "task_id": t.task_id, **(t.drop or {})} for t in dropped],
        "seed": seed,
        "resamples": resamples,
    }
    if json_out:
        typer.echo(json.dumps(report, indent=1, ensure_ascii=False, allow_nan=False))
        return

    def number(value: float | None, interval: Any) -> str:
        if value is None:
            return "undefined"
        shown = f"{value:.3f}"
        return shown if interval is None else f"{shown}  95% CI [{interval.low:.3f}, {interval.high:.3f}]"

    out = console.print
    out(f"{len(labelled)} labels: {result.n} judged, {len(dropped)} without a verdict (drops)", highlight=False)
    out(f"accuracy  {number(result.accuracy, result.accuracy_interval)}", highlight=False)
    out(f"kappa     {number(result.kappa, result.kappa_interval)}", highlight=False)
    out("                 judge pass  judge fail", highlight=False)
    out(f"label pass       {table.both_pass:>10}  {table.label_only:>10}", highlight=False)
    out(f"label fail       {table.judge_only:>10}  {table.both_fail:>10}", highlight=False)
    if dropped:
        out("without a verdict (drops, not counted):", highlight=False)
        for t in dropped:
            drop = t.drop or {}
            out(
                f"  {t.episode_id or t.task_id}  {drop.get('drop_class')}  {drop.get('error')}",
                markup=False,
                highlight=False,
                soft_wrap=True,  # one line per drop, however long its reason
            )
    out(f"bootstrap: {resamples} resamples, seed {seed}", highlight=False)
