"""Sampling parameters: explicit, recorded with every call, and seeded per request."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class SamplingParams:
    """``temperature == 0`` means greedy decoding. ``seed`` is mixed with each request's
    own seed, so a request samples the same text whatever else is in its batch."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int = 0
    logprobs: bool = False

    def __post_init__(self) -> None:
        if self.temperature < 0 or not (0 < self.top_p <= 1) or self.max_new_tokens < 1:
            raise ValueError(f"invalid sampling parameters: {self}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stop"] = list(self.stop)
        return data
