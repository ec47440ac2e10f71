"""What each side spent: tokens, turns, tool calls, time and money, per episode and per success.

Why per success: a checkpoint that solves more while spending more per episode may still be
cheaper per solved task, and a checkpoint that got better by writing twice as much is a
cost a release rule should see (``max_increase`` gates). Every episode the plan ran counts
toward spend, drops included: their tokens were spent too.

Why percentiles of wall time: a latency SLO is a tail, not a mean (``max`` on
``wall_seconds_p95`` is "95% of episodes finish within X seconds"). They are exact order
statistics of the episodes' ``wall_seconds`` with numpy's default definition (``linear``,
Hyndman and Fan's type 7: for ``n`` sorted values the q-th percentile sits at rank
``(n - 1) * q / 100``, interpolated linearly between its two neighbours), over every episode
that ran: completed ones and the drops counted as failures; ``skipped`` and ``cancelled``
drops never ran and would only pull the tail down.

Why time to first token only where recorded: ``ttft_seconds_p50``/``p95`` and
``seconds_per_output_token_p50``/``p95`` are the same percentiles of each episode's mean
``ttft_s`` and ``tpot_s`` over its steps, which only an agent that sees its first token records
(the HF agent: ``frostgym.agents.hf``; the OpenAI agent sends non-streaming requests and never
sees it). They are over the episodes that ran and recorded one, and a comparison has them only
where either side does.

Why money needs a price table (``frostgym.compare.prices``): ``cost_per_episode`` is the mean
over episodes of ``(prompt_tokens * input + completion_tokens * output) / 1e6`` USD, from the
counts the card's steps record and the declared price of each side's model. A side whose
agent reported no count of a token kind that has a price (the oracle, a replay) has no cost,
and a gate on it fails saying so, rather than reading 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from frostgym.compare.facts import EpisodeFacts, FloatArray
from frostgym.compare.prices import Price

#: The percentiles of wall time per episode, by metric name.
WALL_PERCENTILES: dict[str, float] = {"wall_seconds_p50": 50.0, "wall_seconds_p95": 95.0, "wall_seconds_p99": 99.0}
#: The percentiles of the agent's own timings, by metric name: (``EpisodeFacts`` column, q).
TOKEN_TIMINGS: dict[str, tuple[str, float]] = {
    "ttft_seconds_p50": ("ttft_seconds", 50.0),
    "ttft_seconds_p95": ("ttft_seconds", 95.0),
    "seconds_per_output_token_p50": ("tpot_seconds", 50.0),
    "seconds_per_output_token_p95": ("tpot_seconds", 95.0),
}
#: Every percentile metric: none has an interval (a percentile is no ratio of per-task sums).
PERCENTILE_METRICS: tuple[str, ...] = (*WALL_PERCENTILES, *TOKEN_TIMINGS)
#: The mean USD per episode: only with a price table.
MONEY = "cost_per_episode"
COST_METRICS: tuple[str, ...] = (
    "tokens_per_episode",
    "tokens_per_success",
    "turns_per_success",
    "tool_calls_per_episode",
    "wall_seconds_per_episode",
    *WALL_PERCENTILES,
    *TOKEN_TIMINGS,
    MONEY,
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


def costs(facts: EpisodeFacts, price: Price | None = None) -> dict[str, float | None]:
    """Each cost metric of one side (``cost_per_episode`` only with its model's ``price``).
    Token costs are None when the agent reported no token counts (the oracle, a replay);
    per-success costs are None with no success; percentiles are None with no episode that ran."""
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
        **wall_percentiles(facts),
        **token_timings(facts),
        **({} if price is None else {MONEY: cost_per_episode(facts, price)}),
    }


def percentile(values: FloatArray, q: float) -> float | None:
    """The ``q``-th percentile of ``values`` (numpy's default ``linear`` definition: the
    module docstring), None for no values."""
    return float(np.percentile(values, q, method="linear")) if len(values) else None


def wall_percentiles(facts: EpisodeFacts) -> dict[str, float | None]:
    """``WALL_PERCENTILES`` of the wall seconds of every episode that ran (completed, or
    dropped and counted as a failure)."""
    ran = facts.wall_seconds[facts.done | facts.failure_drop]
    return {metric: percentile(ran, q) for metric, q in WALL_PERCENTILES.items()}


def token_timings(facts: EpisodeFacts) -> dict[str, float | None]:
    """``TOKEN_TIMINGS`` over the episodes that ran and recorded the timing (None: none did)."""
    ran = facts.done | facts.failure_drop
    out: dict[str, float | None] = {}
    for metric, (column, q) in TOKEN_TIMINGS.items():
        values: FloatArray = getattr(facts, column)[ran]
        out[metric] = percentile(values[~np.isnan(values)], q)
    return out


def episode_dollars(facts: EpisodeFacts, price: Price) -> FloatArray | None:
    """Each row's USD at ``price`` (a step with no count counts 0 of it), or None when a
    token kind with a nonzero price was reported by no row (the cost is then unknown)."""
    prompt, completion = facts.prompt_tokens, facts.completion_tokens
    for counts, rate in ((prompt, price.input_per_million), (completion, price.output_per_million)):
        if rate and not bool((~np.isnan(counts)).any()):
            return None
    dollars: FloatArray = (
        np.nan_to_num(prompt, nan=0.0) * price.input_per_million
        + np.nan_to_num(completion, nan=0.0) * price.output_per_million
    ) / 1e6
    return dollars


def cost_per_episode(facts: EpisodeFacts, price: Price) -> float | None:
    """The mean USD per episode at ``price`` (``episode_dollars``), None when unknown."""
    dollars = episode_dollars(facts, price)
    return None if dollars is None or not len(dollars) else float(sum(dollars.tolist())) / len(dollars)


def cost_deltas(
    label: str, base_facts: EpisodeFacts, cand_facts: EpisodeFacts, prices: tuple[Price, Price] | None = None
) -> list[CostDelta]:
    """Every cost of one slice's paired episodes (row i of each side is one pair), base
    against cand; ``cost_per_episode`` only with ``prices`` (base's, cand's)."""
    base = costs(base_facts, None if prices is None else prices[0])
    cand = costs(cand_facts, None if prices is None else prices[1])
    out = []
    for metric in (m for m in COST_METRICS if m in base):
        if metric in TOKEN_TIMINGS and base[metric] is None and cand[metric] is None:
            continue  # neither agent records it (every card before it, the OpenAI agent)
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
