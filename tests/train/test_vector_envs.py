"""Batched stepping (Gymnasium's sync and async vector envs) and GRPO group resets, on
real frostgym envs: every registered id steps a batch of oracle actions deterministically."""

from __future__ import annotations

import json
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import frostgym
from frostgym.sandbox.backends import AUTO_ORDER, unavailable_reason
from frostgym.train.vector import (
    FrozenAsyncVectorEnv,
    FrozenSyncVectorEnv,
    group_reset,
    group_seeds,
    make_vector_env,
    sub_env_seeds,
)

ENV_IDS = [e.id for e in frostgym.ENTRIES]
NUM_ENVS = 3
STEPS = 4


def split_kwargs(env_id: str) -> dict[str, Any]:
    """``split="test"`` for ids whose dev split is empty (Code, Tools, ToolsMultiTurn)."""
    skip_without_sandbox(env_id)
    env = gymnasium.make(env_id)
    try:
        return {"split": "test"} if env.unwrapped.source.size("dev") == 0 else {}  # type: ignore[attr-defined]
    finally:
        env.close()


def skip_without_sandbox(env_id: str) -> None:
    if env_id != "frostgym/Code-v0":
        return
    reasons = {backend: unavailable_reason(backend) for backend in AUTO_ORDER}
    if all(reason is not None for reason in reasons.values()):
        pytest.skip(f"Code-v0 needs a sandbox backend and none can run here: {reasons}")


def jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def oracle_rollout(envs: FrozenSyncVectorEnv | FrozenAsyncVectorEnv, seed: int) -> str:
    """Reset with ``seed``, step ``STEPS`` batches of oracle actions; everything seen, as JSON."""
    obs, info = envs.reset(seed=seed)
    assert envs.observation_space.contains(obs)
    trace: list[Any] = [jsonable(obs), jsonable(info)]
    for _ in range(STEPS):
        actions = envs.call("oracle_action")
        obs, rewards, terminated, truncated, info = envs.step(actions)
        assert envs.observation_space.contains(obs)
        # The oracle scores 1.0 on every episode it finishes.
        assert all(rewards[terminated] == 1.0), (rewards, terminated, info.get("grade"))
        trace.append(jsonable([obs, rewards, terminated, truncated, info]))
    return json.dumps(trace, sort_keys=True, default=str)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sync_oracle_batch_is_deterministic(env_id: str) -> None:
    kwargs = split_kwargs(env_id)
    runs = []
    for _ in range(2):
        envs = make_vector_env(env_id, NUM_ENVS, **kwargs)
        try:
            runs.append(oracle_rollout(envs, seed=7))
        finally:
            envs.close()
    assert runs[0] == runs[1]
    first_obs = json.loads(runs[0])[0]
    assert len(first_obs) == NUM_ENVS and all(chat[-1]["role"] == "user" for chat in first_obs)


@pytest.mark.parametrize("env_id", ["frostgym/Math-v0", "frostgym/SQL-v0", "frostgym/Code-v0"])
def test_async_matches_sync(env_id: str) -> None:
    """Worker processes (Code-v0: each starts its own sandbox) see exactly what the sync
    env sees, and group resets work across processes too."""
    kwargs = split_kwargs(env_id)
    sync_envs = make_vector_env(env_id, NUM_ENVS, **kwargs)
    try:
        expected = oracle_rollout(sync_envs, seed=11)
    finally:
        sync_envs.close()
    async_envs = make_vector_env(env_id, NUM_ENVS, asynchronous=True, **kwargs)
    try:
        assert isinstance(async_envs, FrozenAsyncVectorEnv)
        assert oracle_rollout(async_envs, seed=11) == expected
        group = group_reset(async_envs, seed=5)
        assert len(set(group.episode_ids)) == NUM_ENVS
        assert set(group.infos["task_id"]) == {group.task_id}
    finally:
        async_envs.close()


def test_nearby_batch_seeds_never_share_an_episode() -> None:
    envs = make_vector_env("frostgym/Math-v0", 4)
    try:
        episodes: dict[str, tuple[int, int]] = {}
        for seed in range(40, 50):
            _, info = envs.reset(seed=seed)
            for i, episode_id in enumerate(info["episode_id"]):
                assert episode_id not in episodes, f"batch seed {seed} sub-env {i} replays {episodes[episode_id]}"
                episodes[str(episode_id)] = (seed, i)
    finally:
        envs.close()
    seeds = [s for seed in range(1000) for s in sub_env_seeds(seed, 8)]
    assert len(set(seeds)) == len(seeds)
    assert not set(seeds) & {s for seed in range(1000) for s in group_seeds(seed, 8)}


def test_plain_gymnasium_seeding_collides_which_is_why_we_derive() -> None:
    """Documents the problem: Gymnasium's ``seed + i`` gives batch 42 sub-env 1 the
    episode of batch 43 sub-env 0."""
    plain = gymnasium.make_vec("frostgym/Math-v0", num_envs=2, vectorization_mode="sync")
    try:
        _, info42 = plain.reset(seed=42)
        _, info43 = plain.reset(seed=43)
    finally:
        plain.close()
    assert info42["episode_id"][1] == info43["episode_id"][0]


@pytest.mark.parametrize("env_id", ["frostgym/Math-v0", "frostgym/SQL-v0", "frostgym/ToolsHTTP-v0"])
def test_group_reset_one_task_distinct_episodes(env_id: str) -> None:
    envs = make_vector_env(env_id, 4)
    try:
        drawn = group_reset(envs, seed=3)
        assert set(drawn.infos["task_id"]) == {drawn.task_id}
        assert len(set(drawn.episode_ids)) == 4
        assert len({json.dumps(o) for o in drawn.observations}) == 1  # same task, same prompt
        assert group_reset(envs, seed=3).episode_ids == drawn.episode_ids  # deterministic
        other = group_reset(envs, seed=4)
        assert not set(other.episode_ids) & set(drawn.episode_ids)

        pinned = group_reset(envs, seed=9, task_id=drawn.task_id)
        assert pinned.task_id == drawn.task_id and set(pinned.infos["task_id"]) == {drawn.task_id}
        assert not set(pinned.episode_ids) & set(drawn.episode_ids)
        # Every member plays its episode to a grade.
        _, rewards, terminated, _, _ = envs.step(envs.call("oracle_action"))
        while not all(terminated):
            _, rewards, terminated, _, _ = envs.step(envs.call("oracle_action"))
        assert list(rewards) == [1.0] * 4
    finally:
        envs.close()


def test_group_reset_honours_split() -> None:
    envs = make_vector_env("frostgym/Arithmetic-v0", 2)
    try:
        group = group_reset(envs, seed=1, split="test")
        assert set(group.infos["split"]) == {"test"} and "/test/" in group.task_id
    finally:
        envs.close()


def test_next_step_autoreset_ignores_the_action_and_starts_a_new_episode() -> None:
    envs = make_vector_env("frostgym/Arithmetic-v0", 2)
    assert envs.autoreset_mode == AutoresetMode.NEXT_STEP
    try:
        group = group_reset(envs, seed=2)
        _, rewards, terminated, _, info = envs.step(envs.call("oracle_action"))
        assert list(terminated) == [True, True] and list(rewards) == [1.0, 1.0]
        assert "grade" in info
        obs, rewards, terminated, truncated, info = envs.step(["not even an answer", 12345])  # ignored
        assert list(rewards) == [0.0, 0.0] and not any(terminated) and not any(truncated)
        assert "grade" not in info and list(info["turn"]) == [0, 0]
        assert not set(info["episode_id"]) & set(group.episode_ids)
        assert all(len(chat) == len(group.observations[0]) for chat in obs)  # fresh conversations
    finally:
        envs.close()


def test_infos_with_mixed_types_widen_to_object() -> None:
    envs = make_vector_env("frostgym/Arithmetic-v0", 3)
    try:
        infos: dict[str, Any] = {}
        infos = envs._add_info(infos, {"details": {"expected": 3, "flag": True}}, 0)
        infos = envs._add_info(infos, {"details": {"expected": "3/4", "flag": None}}, 2)
        expected = infos["details"]["expected"]
        assert expected.dtype == object and list(expected) == [3, None, "3/4"]
        assert list(infos["details"]["_expected"]) == [True, False, True]
        assert list(infos["details"]["flag"]) == [True, None, None]
    finally:
        envs.close()


def test_batched_spaces_are_tuples_with_reproducible_samples() -> None:
    envs = make_vector_env("frostgym/Arithmetic-v0", 3)
    again = make_vector_env("frostgym/Arithmetic-v0", 3)
    try:
        assert isinstance(envs.action_space, gymnasium.spaces.Tuple) and len(envs.action_space) == 3
        assert envs.action_space.sample() == again.action_space.sample()
        assert envs.observation_space.contains(envs.observation_space.sample())
    finally:
        envs.close()
        again.close()
