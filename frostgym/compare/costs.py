"""What each side spent: tokens, turns, tool calls and time, per episode and per success.

Why per success: a checkpoint that solves more while spending more per episode may still be
cheaper per solved task, and a checkpoint that got better by writing twice as much is a
cost a release rule should see (``max_increase`` gates). Every episode the plan ran counts
toward spend, drops included: their tokens were spent too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from frostgym.compare.facts import EpisodeFacts

COST_METRICS: tuple[str, ...] = (
    "tokens_per_episode",
    "tokens_per_success",
    "turns_per_success",
    "tool_calls_per_episode",
    "wall_seconds_per_episode",
)


@dataclass(frozen=True)
class CostDelta:
    """One cost of one slice on both sides; ``ratio`` is cand / base."""

    slice: str
    metric: str
    base: float | None
    cand: float | None
    delta: float | None
    ratio: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "slice": self.slice,
            "metric": self.metric,
            "base": self.base,
            "cand": self.cand,
            "delta": self.delta,
            "ratio": self.ratio,
        }


def costs(facts: EpisodeFacts) -> dict[str, float | None]:
    """Each cost metric of one side. Token costs are None when the agent reported no
    token counts (the oracle, a replay); per-success costs are None with no success."""
    episodes = len(facts)
    successes = int(facts.passed.sum())
    reported = facts.completion_tokens[~np.isnan(facts.completion_tokens)]
    # Python's sum in row order, as the per-episode loop this replaces added them.
    tokens = float(sum(reported.tolist())) if len(reported) else None
    turns, calls = int(facts.turns.sum()), int(facts.tool_calls.sum())
    return {
        "tokens_per_episode": None if tokens is None or not episodes else tokens / episodes,
        "tokens_per_success": None if tokens is None or not successes else tokens / successes,
        "turns_per_success": turns / successes if successes else None,
        "tool_calls_per_episode": calls / episodes if episodes else None,
        "wall_seconds_per_episode": sum(facts.wall_seconds.tolist()) / episodes if episodes else None,
    }


def cost_deltas(label: str, base_facts: EpisodeFacts, cand_facts: EpisodeFacts) -> list[CostDelta]:
    """Every cost of one slice's paired episodes (row i of each side is one pair), base
    against cand."""
    base = costs(base_facts)
    cand = costs(cand_facts)
    out = []
    for metric in COST_METRICS:
        b, c = base[metric], cand[metric]
        both = b is not None and c is not None
        out.append(
            CostDelta(
                slice=label,
                metric=metric,
                base=b,
                cand=c,
                delta=c - b if both else None,  # type: ignore[operator]
                ratio=c / b if both and b else None,  # type: ignore[operator]
            )
        )
    return out
