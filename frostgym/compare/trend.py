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
from frostgym.compare.facts import BoolArray, EpisodeFacts, IntArray
from frostgym.compare.reading import read_card_facts
from frostgym.compare.views import components_of, counted, task_sums, view_names
from frostgym.core.stats import ratio, stable

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
        row = _row(str(path), read_card_facts(path).facts, held_out)
        if rows:
            row = TrendRow(**{**row.__dict__, "flags": _flags(rows[-1], row)})
        rows.append(row)
    return rows


def _row(card: str, facts: EpisodeFacts, held_out: Sequence[str]) -> TrendRow:
    per_task_n = np.bincount(facts.task, minlength=len(facts.task_keys))
    ks = default_ks(int(per_task_n.max()) if len(facts) else 1)
    scored = counted(facts, "errors_as_failures")
    tasks = sorted(facts.task_keys[t] for t in np.unique(facts.task[scored]).tolist())
    row_of = {task: row for row, task in enumerate(tasks)}
    task_row = np.array([row_of.get(key, -1) for key in facts.task_keys], dtype=np.int64)[facts.task]
    names = view_names(ks, components_of(facts))
    sums = task_sums(facts, scored, task_row, len(tasks), ks, names)
    views: dict[str, float | None] = {name: ratio(sums[:, v, 0], sums[:, v, 1]) for v, name in enumerate(names)}
    env_of_task = facts.env_of_task()
    private = _of(facts.split, [name == "private" for name in facts.names])
    kept_out = _of(facts.task, [env in held_out for env in env_of_task])
    diagnostics = diagnose(facts)
    return TrendRow(
        card=card,
        episodes=len(facts),
        views=views,
        public_reward=_mean_reward(facts, scored & ~private & ~kept_out),
        private_reward=_mean_reward(facts, scored & private),
        held_out_reward={
            env: _mean_reward(facts, scored & _of(facts.task, [e == env for e in env_of_task])) for env in held_out
        },
        diagnostics={metric: diagnostics.value(metric) for metric in DIAGNOSTIC_METRICS},
        flags=(),
    )


def _of(codes: IntArray, table: list[bool]) -> BoolArray:
    """Whether each row's code is one the table marks."""
    marked: BoolArray = np.array(table, dtype=bool)[codes] if table else np.zeros(len(codes), dtype=bool)
    return marked


def _mean_reward(facts: EpisodeFacts, rows: BoolArray) -> float | None:
    """Mean reward of the counted ``rows``, in row order."""
    scored = facts.reward[rows]
    return stable(float(np.mean(scored))) if len(scored) else None


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
