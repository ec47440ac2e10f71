"""The adaptive curriculum: moves between levels to keep the running pass rate in its band,
logs each decision, and is a pure function of its config, seed and history."""

from __future__ import annotations

import itertools
from typing import cast

import gymnasium
import pytest

from frostgym.train.curriculum import Curriculum, CurriculumConfig, CurriculumEnv, CurriculumSampler


def test_config_refuses_what_cannot_be_a_curriculum() -> None:
    for bad in (
        {"levels": (), "start": 1},
        {"levels": (1, 1), "start": 1},
        {"levels": (1, 2), "start": 3},
        {"levels": (1, 2), "start": 1, "band": (0.7, 0.3)},
        {"levels": (1, 2), "start": 1, "band": (-0.1, 0.5)},
        {"levels": (1, 2), "start": 1, "window": 0},
    ):
        with pytest.raises(ValueError, match=r"levels|start|band|window"):
            CurriculumConfig(**bad)  # type: ignore[arg-type]


def test_moves_up_when_too_easy_and_down_when_too_hard_once_the_window_is_full() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3), start=2, band=(0.3, 0.7), window=4))
    assert curriculum.record([True, True, True]) is None  # window not full yet
    assert curriculum.pass_rate is None
    assert curriculum.record([True]) == "up"
    assert curriculum.level == 3 and curriculum.pass_rate is None  # a new level starts a new window
    assert curriculum.record([True] * 8) is None  # no level above 3
    assert curriculum.level == 3
    assert curriculum.record([False] * 4) == "down"  # the last 4 at level 3 all failed
    assert curriculum.level == 2
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3), start=2, window=4))
    assert curriculum.record([False, False, True, False]) == "down"
    assert curriculum.level == 1
    assert curriculum.record([False] * 4) is None  # no level below 1
    assert curriculum.level == 1


def test_stays_inside_the_band() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3), start=2, band=(0.3, 0.7), window=10))
    for _ in range(20):
        assert curriculum.record([True, False]) is None
    assert curriculum.level == 2 and curriculum.pass_rate == 0.5


def test_outcomes_of_a_level_left_behind_are_logged_not_counted() -> None:
    curriculum = Curriculum(CurriculumConfig(levels=(1, 2), start=1, window=2))
    assert curriculum.record([True, True]) == "up"
    assert curriculum.record([True, True], level=1) is None  # drawn before the move
    assert curriculum.level == 2 and curriculum.pass_rate is None
    log = curriculum.log_records()
    assert [(s["level"], s["passed"], s["move"]) for s in log] == [(1, 2, "up"), (1, 2, None)]
    assert [s["step"] for s in log] == [0, 1]


def test_the_level_is_a_pure_function_of_the_history() -> None:
    history = [[i % 3 == 0, i % 2 == 0, True] for i in range(40)]

    def levels() -> list[int]:
        curriculum = Curriculum(CurriculumConfig(levels=(1, 2, 3, 4), start=1, window=6))
        seen = []
        for batch in history:
            curriculum.record(batch)
            seen.append(curriculum.level)
        return seen

    assert levels() == levels()


def _sampler(seed: int = 0, window: int = 4) -> CurriculumSampler:
    return CurriculumSampler("frostgym/Arithmetic-v0", CurriculumConfig((1, 2, 3), 1, window=window), seed=seed)


def test_the_sampler_draws_at_the_current_level_from_the_seed_and_history() -> None:
    first, second, other = _sampler(), _sampler(), _sampler(seed=1)
    try:
        drawn = first.next(4)
        assert drawn == second.next(4)
        assert drawn != other.next(4)
        assert all(t.level == 1 and t.task_id.startswith("arithmetic~L1/train/") for t in drawn)
        for sampler in (first, second):
            sampler.record([True] * 4)  # too easy: up a level
        assert first.curriculum.level == 2
        after = first.next(3)
        assert after == second.next(3)
        assert all(t.level == 2 and t.task_id.startswith("arithmetic~L2/train/") for t in after)
    finally:
        for sampler in (first, second, other):
            sampler.close()


def test_curriculum_envs_in_a_vector_env_move_up_on_oracle_play() -> None:
    sampler = _sampler(window=4)
    vector = gymnasium.vector.SyncVectorEnv([lambda: CurriculumEnv(sampler) for _ in range(2)])
    try:
        levels = []
        for _ in range(4):
            _, infos = vector.reset()
            levels.append(list(infos["level"]))
            actions = tuple(cast(CurriculumEnv, env).oracle_action() for env in vector.envs)
            _, rewards, terminated, _, _ = vector.step(actions)
            assert list(rewards) == [1.0, 1.0] and all(terminated)
        assert levels == [[1, 1], [1, 1], [2, 2], [2, 2]]  # 4 passes at a level: up one
        assert [s["move"] for s in sampler.curriculum.log_records()].count("up") == 2
        assert sampler.curriculum.level == 3
    finally:
        vector.close()
        sampler.close()


def test_trl_rewards_feed_the_curriculum_back() -> None:
    pytest.importorskip("datasets", reason="datasets is not installed")
    from frostgym.train.trl import curriculum_dataset, reward_functions

    sampler = _sampler(window=4)
    try:
        funcs = reward_functions("frostgym/Arithmetic-v0", curriculum=sampler)
        rows = list(itertools.islice(iter(curriculum_dataset(sampler, batch=4)), 4))
        assert [r["level"] for r in rows] == [1, 1, 1, 1]
        gold = []
        for row in rows:
            env = sampler.env(row["level"])
            env.reset(seed=row["episode_seed"], options={"task_id": row["task_id"]})
            gold.append(env.oracle_action())
        columns = {k: [r[k] for r in rows] for k in ("task_id", "episode_seed", "split", "level")}
        scores = funcs[-1](prompts=[r["prompt"] for r in rows], completions=gold, **columns)
        assert scores == [1.0] * 4
        assert sampler.curriculum.level == 2 and sampler.batches == [(1,)]
    finally:
        sampler.close()
