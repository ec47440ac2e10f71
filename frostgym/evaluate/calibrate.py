"""Calibration: the pass rate of one agent at each level of an env, and the level nearest a target.

Why: a benchmark where a model scores near 0 or near 1 says nothing about it, and RL learns
where the reward varies. A small probe per level (a rollout card of ``episodes`` tasks, one
sample each) places an agent: its pass@1 per level with a Wilson interval, and the level
whose pass rate is nearest the target (0.5 by default), which is where to evaluate or train.

Each probe is a real card (``DIR/level-N``), so a calibration is replayed and compared like
any other run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frostgym.agents.base import Agent
from frostgym.core.splits import parse_splits
from frostgym.core.stats import Interval, wilson_interval
from frostgym.envs.registry import make_env
from frostgym.envs.specs import EnvSpec
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions

#: The pass rate a calibration looks for by default: where a benchmark separates models
#: best, and in the middle of the band where RL has a signal.
DEFAULT_TARGET = 0.5


@dataclass(frozen=True)
class LevelProbe:
    """One level's probe: ``passed`` of ``episodes`` planned episodes (a drop counts as a
    failure), their pass rate and its Wilson interval, and the card it is read from."""

    level: int
    episodes: int
    passed: int
    pass_rate: float | None
    interval: Interval | None
    card: Path

    def as_json_data(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "episodes": self.episodes,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "interval": None if self.interval is None else [self.interval.low, self.interval.high],
            "card": str(self.card),
        }


def probe_levels(
    spec: EnvSpec,
    agent: Agent,
    levels: Sequence[int],
    *,
    agent_spec: str,
    sampling: Mapping[str, Any],
    episodes: int,
    out: Path,
    split: str = "dev",
    seed: int = 0,
    resume: bool = False,
    batch_size: int = 64,
    on_level: Callable[[LevelProbe], None] | None = None,
) -> list[LevelProbe]:
    """Probe ``agent`` on ``episodes`` tasks of ``split`` (all of them where a level has
    fewer) at each of ``levels`` of ``spec`` (its own arguments kept, ``level`` set), each
    into the card ``out/level-N``, and return the probes in the order given. ``resume``
    finishes cards a killed calibration left. Raises what ``run_to_card`` raises (a level
    the env lacks: ``ValueError``)."""
    probes = []
    for level in levels:
        kwargs = {**spec.kwargs, "level": level}
        options = RunOptions(split=split, env_options={spec.env_id: kwargs}, batch_size=batch_size)
        env = make_env(spec.env_id, split, kwargs)
        try:
            size = env.source.drawable_size(parse_splits(split)[0])
        finally:
            env.close()
        config = card_config(
            env_ids=[spec.env_id],
            agent_spec=agent_spec,
            sampling=sampling,
            episodes=None if size is not None and size <= episodes else episodes,
            samples=1,
            seed=seed,
            options=options,
        )
        directory = out / f"level-{level}"
        card = run_to_card(directory, agent, config, options, resume=resume and directory.exists())
        probe = probe_of(level, card, directory)
        probes.append(probe)
        if on_level is not None:
            on_level(probe)
    return probes


def probe_of(level: int, card: Mapping[str, Any], directory: Path) -> LevelProbe:
    """A level's probe read from its closed one-sample card: every planned episode is a
    trial, and only a pass (``succeeded``) a success."""
    accounting = card["accounting"]
    trials, passed = int(accounting["planned"]), int(accounting["succeeded"])
    rate = passed / trials if trials else None
    return LevelProbe(level, trials, passed, rate, wilson_interval(passed, trials), directory)


def nearest_level(probes: Sequence[LevelProbe], target: float = DEFAULT_TARGET) -> LevelProbe | None:
    """The probe whose pass rate is nearest ``target`` (on a tie, the easier level), or
    None when no probe has a pass rate."""
    rated = [p for p in probes if p.pass_rate is not None]
    if not rated:
        return None
    return min(rated, key=lambda p: (abs(float(p.pass_rate or 0.0) - target), p.level))
