"""Seeded junk: the floor. Mixes the failure shapes real models produce (wrong numbers
in perfect format, bare numbers, hedges, empty replies, rambling), deterministically
from each request's seed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.core.seeding import derive_generator

_WORDS = np.array(
    ["the", "a", "of", "answer", "is", "maybe", "number", "think", "total", "so", "we", "get", "each", "more", "than"]
)


def _junk(rng: np.random.Generator) -> str:
    n = int(rng.integers(0, 1000))
    words = " ".join(rng.choice(_WORDS, size=int(rng.integers(0, 20))).tolist())
    shapes = (
        f"<think>{words}</think><answer>{n}</answer>",
        f"{n}",
        f"<answer>{n} or {n + 1}</answer>",
        "",
        words,
        f"The answer is {n}.",
    )
    return shapes[int(rng.integers(0, len(shapes)))]


class RandomAgent:
    """The floor: a short junk reply per request, drawn from the shapes real models get
    wrong (a wrong number in perfect format, a bare number, a hedge, an empty reply,
    rambling words).

    ``seed`` (default 0) and each request's own ``seed`` decide the reply and nothing else
    does: no global randomness, so the same request gets the same junk in any batch and
    any run. ``act`` returns one ``AgentReply`` per request, in order, with
    ``finish_reason="stop"``; it never raises.
    """

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        return [
            AgentReply(action=_junk(derive_generator("random-agent", self.seed, r.seed)), finish_reason="stop")
            for r in requests
        ]

    def describe(self) -> dict[str, Any]:
        return {"spec": "random", "seed": self.seed}
