"""What the SkyRL-gym adapter adds beyond the shared contract (``test_adapter_contract``):
its registration, the dataset rows SkyRL reads, the step metadata and metrics, and SkyRL's
``max_turns`` convention."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("skyrl_gym", reason="skyrl-gym is not installed (make install installs it)")

import skyrl_gym

from frostgym.envs.registry import ENTRIES
from frostgym.integrations.skyrl_gym import (
    ENTRY_POINT,
    FrozenTextEnv,
    register_skyrl_envs,
    skyrl_row,
    skyrl_rows,
    task_row_of,
    write_skyrl_dataset,
)
from frostgym.train.session import TaskRow, TrainingEpisode, grade_metrics, messages_text, task_rows
from tests.integrations.reference import JUNK, cases, oracle_actions, split_of

IDS = tuple(e.id for e in ENTRIES)


def extras_of(row: dict[str, Any]) -> dict[str, Any]:
    """What SkyRL's ``PromptDataset`` hands the env: every column but prompt and env_class."""
    return {k: v for k, v in row.items() if k not in ("prompt", "env_class")}


def test_registration_is_idempotent_and_names_every_id() -> None:
    assert register_skyrl_envs() == IDS
    specs = {i: skyrl_gym.registry[i] for i in IDS}
    assert register_skyrl_envs() == IDS  # a second call neither raises nor replaces
    for env_id, spec in specs.items():
        assert skyrl_gym.registry[env_id] is spec
        assert spec.entry_point == ENTRY_POINT
        assert spec.kwargs == {"env_id": env_id}


@pytest.mark.parametrize("env_id", IDS)
def test_every_id_makes_and_inits(env_id: str) -> None:
    register_skyrl_envs()
    row = task_rows(env_id, split=split_of(env_id), n=1, seed=0)[0]
    data = skyrl_row(row)
    env = skyrl_gym.make(env_id, env_config={}, extras=extras_of(data))
    try:
        assert isinstance(env, FrozenTextEnv)
        observations, metadata = env.init(data["prompt"])
        assert observations == data["prompt"]
        assert all(isinstance(v, str) for m in observations for v in m.values())
        assert metadata["task_id"] == row.task_id and metadata["prompt_matches"] is True
    finally:
        env.close()


def test_dataset_rows_are_task_rows_with_the_envs_first_messages() -> None:
    rows = skyrl_rows("frostgym/Arithmetic-v0", split="dev", n=5, seed=3)
    expected = task_rows("frostgym/Arithmetic-v0", split="dev", n=5, seed=3)
    assert [task_row_of(r) for r in rows] == expected
    episode = TrainingEpisode("frostgym/Arithmetic-v0", "dev")
    for row, task in zip(rows, expected, strict=True):
        assert row["env_class"] == row["data_source"] == "frostgym/Arithmetic-v0"
        assert row["reward_spec"] == {"method": "frostgym", "ground_truth": None}
        assert row["prompt"] == [dict(m) for m in episode.start(task.task_id, task.episode_seed)]
        assert json.loads(row["extra_info"]["env_kwargs"]) == {}


def test_env_kwargs_travel_in_the_rows() -> None:
    register_skyrl_envs()
    rows = skyrl_rows("frostgym/Arithmetic-v0", split="dev", n=2, seed=0, level=2)
    assert [task_row_of(r) for r in rows] == task_rows("frostgym/Arithmetic-v0", split="dev", n=2, seed=0, level=2)
    env = skyrl_gym.make("frostgym/Arithmetic-v0", env_config={}, extras=extras_of(rows[0]))
    assert env.episode.env_kwargs == {"level": 2}
    assert env.init(rows[0]["prompt"])[1]["prompt_matches"] is True


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_written_dataset_loads_as_skyrl_loads_it_and_plays(tmp_path: Path, suffix: str) -> None:
    datasets = pytest.importorskip("datasets")
    register_skyrl_envs()
    rows = skyrl_rows("frostgym/SQL-v0", split="dev", n=2, seed=0)
    path = write_skyrl_dataset(tmp_path / f"train{suffix}", rows)
    loaded = datasets.load_dataset("parquet" if suffix == ".parquet" else "json", data_files=str(path))["train"]
    assert [dict(r) for r in loaded] == rows
    first = dict(loaded[0])
    prompt, env_class = first.pop("prompt"), first.pop("env_class")
    env = skyrl_gym.make(env_class, env_config={}, extras=first)
    observations, _ = env.init(prompt)
    assert observations == rows[0]["prompt"]


def test_final_step_carries_the_grade_and_its_components() -> None:
    register_skyrl_envs()
    row = cases()[2]  # an Arithmetic-v0 task
    assert row.env_id == "frostgym/Arithmetic-v0"
    env = skyrl_gym.make(row.env_id, env_config={}, extras=extras_of(skyrl_row(row)))
    env.init(None)
    (action,) = oracle_actions(row)
    out = env.step(str(action))
    assert out["done"] is True and out["observations"] == []
    grade = out["metadata"]["grade"]
    assert out["reward"] == grade["score"] == 1.0
    assert out["metadata"]["task_id"] == row.task_id
    assert out["metadata"]["metrics"] == grade_metrics(grade)
    assert "correctness" in out["metadata"]["metrics"]
    assert env.get_metrics() == {**grade_metrics(grade), "turns": 1.0}


def test_earlier_steps_reward_zero_and_carry_no_grade() -> None:
    register_skyrl_envs()
    row = task_rows("frostgym/SQL-v0", split="dev", n=1, seed=0)[0]
    env = skyrl_gym.make(row.env_id, env_config={}, extras=extras_of(skyrl_row(row)))
    env.init(None)
    out = env.step(JUNK)
    assert out["done"] is False and out["reward"] == 0.0 and "grade" not in out["metadata"]
    assert out["observations"] and all(set(m) >= {"role", "content"} for m in out["observations"])
    assert env.get_metrics() == {"score": 0.0, "turns": 1.0}  # stopped here, it is never graded


def test_skyrl_max_turns_below_the_ids_caps_the_episode() -> None:
    register_skyrl_envs()
    row = task_rows("frostgym/SQL-v0", split="dev", n=1, seed=0)[0]
    extras = {**extras_of(skyrl_row(row)), "max_turns": 2}  # what SkyRL's generator adds
    env = skyrl_gym.make(row.env_id, env_config={}, extras=extras)
    assert env.max_turns == 2
    observations, metadata = env.init(None)
    reference = TrainingEpisode(row.env_id, row.split, max_turns=2)
    assert messages_text(observations) == messages_text(reference.start(row.task_id, row.episode_seed))
    assert metadata["prompt_matches"] is True and metadata["max_turns"] == 2
    assert env.step(JUNK)["done"] is False
    last = env.step(JUNK)
    assert last["done"] is True
    reference.step(JUNK)
    assert last["metadata"]["grade"] == reference.step(JUNK).grade


def test_skyrl_max_turns_above_the_ids_leaves_it() -> None:
    row = task_rows("frostgym/SQL-v0", split="dev", n=1, seed=0)[0]
    env = FrozenTextEnv(extras={**extras_of(skyrl_row(row)), "max_turns": 50}, env_id=row.env_id)
    assert env.max_turns == TrainingEpisode(row.env_id, row.split).max_turns == 6


def test_a_changed_prompt_is_reported_and_the_envs_messages_are_used() -> None:
    data = skyrl_row(task_rows("frostgym/Arithmetic-v0", split="dev", n=1, seed=0)[0])
    env = FrozenTextEnv(extras=extras_of(data), env_id="frostgym/Arithmetic-v0")
    observations, metadata = env.init([{"role": "user", "content": "something else"}])
    assert observations == data["prompt"] and metadata["prompt_matches"] is False


def test_flat_extras_and_a_dictconfig_env_config() -> None:
    omegaconf = pytest.importorskip("omegaconf")
    row = task_rows("frostgym/Arithmetic-v0", split="dev", n=1, seed=0, level=1)[0]
    config = omegaconf.OmegaConf.create({"split": "dev", "env_kwargs": {"level": 1}})
    env = FrozenTextEnv(config, {"task_id": row.task_id, "episode_seed": row.episode_seed}, env_id=row.env_id)
    assert env.split == "dev" and env.episode.env_kwargs == {"level": 1}
    assert env.init(skyrl_row(row, env_kwargs={"level": 1})["prompt"])[1]["prompt_matches"] is True


def test_a_row_of_another_id_or_without_a_task_is_refused() -> None:
    data = skyrl_row(task_rows("frostgym/Arithmetic-v0", split="dev", n=1, seed=0)[0])
    with pytest.raises(ValueError, match="different env ids"):
        FrozenTextEnv(extras=extras_of(data), env_id="frostgym/Math-v0")
    with pytest.raises(ValueError, match="task_id and episode_seed"):
        FrozenTextEnv(extras={}, env_id="frostgym/Math-v0")


def test_write_refuses_another_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.parquet or \.jsonl"):
        write_skyrl_dataset(tmp_path / "rows.csv", [])


def test_task_row_of_round_trips() -> None:
    row = TaskRow("frostgym/Math-v0", "dev", "gsm_symbolic/dev/1", 7)
    assert task_row_of({"extra_info": {**row.to_dict(), "env_kwargs": "{}"}}) == row


def test_frozen_envs_are_lent_one_trajectory_at_a_time_and_reused() -> None:
    register_skyrl_envs()
    row_a, row_b = task_rows("frostgym/SQL-v0", split="dev", n=2, seed=5)
    extras_a, extras_b = extras_of(skyrl_row(row_a)), extras_of(skyrl_row(row_b))
    first = skyrl_gym.make(row_a.env_id, env_config={}, extras=extras_a)
    second = skyrl_gym.make(row_b.env_id, env_config={}, extras=extras_b)
    assert first.episode is not second.episode  # open at once: two envs
    first.init(None)
    second.init(None)
    first.step(JUNK)
    second.step(JUNK)
    lent = second.episode
    second.close()
    second.close()  # a second close gives nothing back twice
    again = skyrl_gym.make(row_b.env_id, env_config={}, extras=extras_b)
    assert again.episode is lent
    fresh = TrainingEpisode(row_b.env_id, row_b.split)
    assert messages_text(again.init(None)[0]) == messages_text(fresh.start(row_b.task_id, row_b.episode_seed))
    assert messages_text(again.step(JUNK)["observations"]) == messages_text(fresh.step(JUNK).messages)
    third = skyrl_gym.make(row_b.env_id, env_config={}, extras=extras_b)
    assert third.episode is not again.episode
    for env in (first, again, third):
        env.close()
