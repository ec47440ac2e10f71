"""A series of cards in checkpoint order: each view and diagnostic as a row per card, and flags.

Why: a single comparison says whether B beats A; a training run needs the shape of the
curve. The tell of tuning to the test set (or of overfitting one env) is the public score
rising while the private split, or an env held out of training, falls: those steps are
flagged. Cards need not share a plan here (checkpoints are often evaluated on growing
plans); each card's values are its own, computed with the cards' estimators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from frostgym.cards.views import default_ks
from frostgym.compare.diagnostics import DIAGNOSTIC_METRICS, diagnose
from frostgym.compare.facts import EpisodeFacts
from frostgym.compare.reading import read_card_facts
from frostgym.compare.stats import ratio, stable
from frostgym.compare.views import counted, per_task, task_matrix, view_names

#: A move smaller than this (in reward points as a fraction) is not a rise or a fall.
TREND_EPSILON = 1e-9


@dataclass(frozen=True)
class TrendRow:
    """One card of the series: its views (errors as failures), held-out values and diagnostics."""

    card: str
    episodes: int
    views: dict[str, float | None]
    #: Mean reward on the episodes that are neither private-split nor in a held-out env.
    public_reward: float | None
    private_reward: float | None
    held_out_reward: dict[str, float | None]
    diagnostics: dict[str, float | None]
    flags: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "card": self.card,
            "episodes": self.episodes,
            "views": self.views,
            "public_reward": self.public_reward,
            "private_reward": self.private_reward,
            "held_out_reward": self.held_out_reward,
            "diagnostics": self.diagnostics,
            "flags": list(self.flags),
        }


def trend(cards: Sequence[Path], held_out: Sequence[str] = ()) -> list[TrendRow]:
    """One row per card, in the order given (checkpoint order); ``held_out`` names env ids
    kept out of training. A row's flags say where, since the card before it, the public
    reward rose while the private split or a held-out env fell."""
    rows: list[TrendRow] = []
    for path in cards:
        facts = list(read_card_facts(path).facts.values())
        row = _row(str(path), facts, held_out)
        if rows:
            row = TrendRow(**{**row.__dict__, "flags": _flags(rows[-1], row)})
        rows.append(row)
    return rows


def _row(card: str, facts: list[EpisodeFacts], held_out: Sequence[str]) -> TrendRow:
    samples = max((sum(1 for f in facts if f.task == t) for t in {f.task for f in facts}), default=1)
    ks = default_ks(samples)
    table = per_task(counted(facts, "errors_as_failures"), ks)
    tasks = sorted(table)
    components = {name for f in facts for name in f.as_sample.components or ()}
    names = view_names(ks, components)
    # One-sided use of the comparison's matrix: the card is both base and cand.
    matrix = task_matrix(tasks, {"errors_as_failures": (table, table), "errors_excluded": ({}, {})}, names)
    views: dict[str, float | None] = {}
    for v, name in enumerate(names):
        views[name] = ratio(matrix[:, 0, v, 0], matrix[:, 0, v, 1])
    public = [f for f in facts if f.split != "private" and f.env_id not in held_out]
    diagnostics = diagnose(facts)
    return TrendRow(
        card=card,
        episodes=len(facts),
        views=views,
        public_reward=_mean_reward(public),
        private_reward=_mean_reward([f for f in facts if f.split == "private"]),
        held_out_reward={env: _mean_reward([f for f in facts if f.env_id == env]) for env in held_out},
        diagnostics={metric: diagnostics.value(metric) for metric in DIAGNOSTIC_METRICS},
        flags=(),
    )


def _mean_reward(facts: list[EpisodeFacts]) -> float | None:
    scored = [f.reward for f in counted(facts, "errors_as_failures")]
    return stable(float(np.mean(scored))) if scored else None


def _flags(before: TrendRow, now: TrendRow) -> tuple[str, ...]:
    if before.public_reward is None or now.public_reward is None:
        return ()
    if now.public_reward - before.public_reward <= TREND_EPSILON:
        return ()
    rise = f"public reward rose {now.public_reward - before.public_reward:+.3f}"
    flags = []
    old_private, new_private = before.private_reward, now.private_reward
    if old_private is not None and new_private is not None and old_private - new_private > TREND_EPSILON:
        flags.append(f"{rise} while the private split fell {new_private - old_private:+.3f}")
    for env, value in now.held_out_reward.items():
        old = before.held_out_reward.get(env)
        if old is not None and value is not None and old - value > TREND_EPSILON:
            flags.append(f"{rise} while held-out {env} fell {value - old:+.3f}")
    return tuple(flags)
