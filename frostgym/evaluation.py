"""Evaluate an agent on envs: seeded episodes, agent calls batched across episodes.

This is the first runner; the rollout-card runner grows from it. Per-episode failures
(an agent or env exception) are recorded on the episode and never stop the run.
"""

from __future__ import annotations

import json
import os
import platform
import time
import traceback
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import gymnasium

from frostgym.agents.base import Agent, AgentRequest
from frostgym.core.env import FrozenEnv
from frostgym.core.episode import EpisodeRecord, StepRecord
from frostgym.core.messages import copy_messages
from frostgym.core.seeding import derive_seed
from frostgym.core.splits import Split
from frostgym.version import __version__

RESULT_SCHEMA = "frostgym.eval/1"


@dataclass(frozen=True)
class EpisodePlan:
    env_id: str
    index: int
    seed_derivation: tuple[str | int, ...]

    @property
    def seed(self) -> int:
        return derive_seed(*self.seed_derivation)


def plan_episodes(env_ids: Sequence[str], episodes: int, seed: int) -> list[EpisodePlan]:
    """Every episode the run will play, each with its own hashed seed."""
    return [EpisodePlan(env_id, i, ("episode", seed, env_id, i)) for env_id in env_ids for i in range(episodes)]


class AgentFailure(RuntimeError):
    """The agent reported that it could not act for one episode."""


def _failed(record: EpisodeRecord, error: BaseException) -> None:
    record.status = "errored"
    record.error = "".join(traceback.format_exception(error)).strip()
    record.reward = 0.0


def run_batch(env_id: str, plans: Sequence[EpisodePlan], agent: Agent, envs: list[FrozenEnv]) -> list[EpisodeRecord]:
    """Play ``plans`` (one env each) to the end, one batched agent call per turn."""
    records: list[EpisodeRecord] = []
    observations = []
    for plan, env in zip(plans, envs, strict=True):
        obs, info = env.reset(seed=plan.seed)
        observations.append(obs)
        records.append(
            EpisodeRecord(
                episode_id=info["episode_id"],
                env_id=env_id,
                task_id=info["task_id"],
                split=info["split"],
                seed=plan.seed,
                seed_derivation=list(plan.seed_derivation),
                env_version=info["env_version"],
                fixture_sha256=info["fixture_sha256"],
                task_sha256=info["task_sha256"],
            )
        )
    active = list(range(len(plans)))
    while active:
        requests = [
            AgentRequest(
                observation=copy_messages(observations[i]),
                episode_id=records[i].episode_id,
                turn=envs[i].turn,
                seed=derive_seed("agent", plans[i].seed, envs[i].turn),
                oracle=envs[i].oracle_action,
                tools=getattr(envs[i], "tools", None),
            )
            for i in active
        ]
        started = time.perf_counter()
        try:
            replies = agent.act(requests)
            if len(replies) != len(requests):
                raise RuntimeError(f"agent returned {len(replies)} replies for {len(requests)} requests")
        except Exception as error:  # the agent failed the whole batch: every episode in it is errored
            for i in active:
                _failed(records[i], error)
            break
        agent_seconds = (time.perf_counter() - started) / len(requests)
        still_active = []
        for i, request, reply in zip(active, requests, replies, strict=True):
            record = records[i]
            if reply.error is not None:
                _failed(record, AgentFailure(reply.error))
                continue
            step_started = time.perf_counter()
            try:
                obs, reward, terminated, truncated, info = envs[i].step(reply.action)
            except Exception as error:
                _failed(record, error)
                continue
            record.steps.append(
                StepRecord(
                    observation=request.observation,
                    action=reply.action,
                    reward=float(reward),
                    terminated=terminated,
                    truncated=truncated,
                    info=info,
                    agent=reply.trace(),
                    agent_seconds=agent_seconds,
                    env_seconds=time.perf_counter() - step_started,
                )
            )
            record.reward += float(reward)
            observations[i] = obs
            if terminated or truncated:
                record.final_observation = obs
                record.grade = info.get("grade")
            else:
                still_active.append(i)
        active = still_active
    return records


def evaluate(
    env_ids: Sequence[str],
    agent: Agent,
    *,
    episodes: int,
    seed: int = 0,
    split: Split = "dev",
    batch_size: int = 64,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[EpisodeRecord]:
    if episodes < 1:
        raise ValueError("episodes must be >= 1")
    records: list[EpisodeRecord] = []
    plans = plan_episodes(env_ids, episodes, seed)
    for env_id in env_ids:
        mine = [p for p in plans if p.env_id == env_id]
        envs = [
            cast(FrozenEnv, gymnasium.make(env_id, split=split, **(env_kwargs or {})).unwrapped)
            for _ in range(min(batch_size, len(mine)))
        ]
        for start in range(0, len(mine), batch_size):
            chunk = mine[start : start + batch_size]
            records.extend(run_batch(env_id, chunk, agent, envs[: len(chunk)]))
        for env in envs:
            env.close()
    return records


def summarize(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Per-env means computed from the episodes; errored episodes count as reward 0."""
    by_env: dict[str, list[EpisodeRecord]] = {}
    for r in records:
        by_env.setdefault(r.env_id, []).append(r)
    out: dict[str, Any] = {}
    for env_id, rs in by_env.items():
        graded = [r.grade for r in rs if r.grade is not None]
        components: dict[str, list[float]] = {}
        for g in graded:
            for name, value in g["components"].items():
                components.setdefault(name, []).append(value)
        out[env_id] = {
            "episodes": len(rs),
            "completed": sum(r.status == "completed" for r in rs),
            "errored": sum(r.status == "errored" for r in rs),
            "mean_reward": sum(r.reward for r in rs) / len(rs),
            "component_means": {k: sum(v) / len(v) for k, v in sorted(components.items())},
            "labels": dict(sorted(Counter(g["label"] or "passed" for g in graded).items())),
        }
    return out


def write_result(out_dir: Path, config: dict[str, Any], agent: Agent, records: Sequence[EpisodeRecord]) -> Path:
    """Write ``result.json`` atomically (temp file, fsync, rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {
        "schema": RESULT_SCHEMA,
        "frostgym_version": __version__,
        "config": config,
        "agent": agent.describe(),
        "host": {"python": platform.python_version(), "platform": platform.platform()},
        "summary": summarize(records),
        "episodes": [r.to_dict() for r in records],
    }
    path = out_dir / "result.json"
    tmp = path.with_suffix(".json.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return path
