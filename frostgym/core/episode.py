"""The one episode record type: what an episode was, step by step, as plain data.

Envs do not build these (their ``info`` must stay free of timings to be frozen); the
runner does, adding what only it can see: agent traces and wall-clock times.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from frostgym.core.messages import Action, Observation

EpisodeStatus = Literal["completed", "errored"]


@dataclass
class StepRecord:
    observation: Observation  # what the agent saw before acting
    action: Action
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    agent: dict[str, Any] = field(default_factory=dict)  # tokens, finish reason, ...
    agent_seconds: float = 0.0
    env_seconds: float = 0.0


@dataclass
class EpisodeRecord:
    episode_id: str
    env_id: str
    task_id: str
    split: str
    seed: int  # the seed passed to env.reset
    seed_derivation: list[str | int]  # the derive_seed parts that gave ``seed``
    env_version: str
    fixture_sha256: str
    task_sha256: str
    steps: list[StepRecord] = field(default_factory=list)
    final_observation: Observation = field(default_factory=list)
    reward: float = 0.0
    grade: dict[str, Any] | None = None
    status: EpisodeStatus = "completed"
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
