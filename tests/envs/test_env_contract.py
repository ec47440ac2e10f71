"""The frozen-env contract, checked on every registered id."""

from __future__ import annotations

import json
import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from frostgym.core.errors import UnknownTaskError
from frostgym.core.hashing import canonical_json
from tests.conftest import ENV_IDS, make_env, play

INFO_KEYS = {"task_id", "episode_id", "env_version", "fixture_sha256", "task_sha256", "split", "turn"}


def test_every_id_is_registered_under_the_namespace() -> None:
    assert ENV_IDS, "no envs registered"
    for env_id in ENV_IDS:
        assert env_id.startswith("frostgym/")
        assert env_id in gymnasium.registry


def test_check_env_passes(env_id: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checker warning is a contract bug too
        check_env(make_env(env_id), skip_render_check=True)


def test_make_wraps_and_steps(env_id: str) -> None:
    env = gymnasium.make(env_id)
    obs, info = env.reset(seed=1)
    assert obs[-1]["role"] == "user"
    for _ in range(500):  # multi-turn envs answer a plain reply with their next turn
        _, reward, terminated, truncated, info = env.step("<answer>0</answer>")
        if terminated or truncated:
            break
    assert terminated and not truncated
    assert reward == info["grade"]["score"]


def test_same_seed_same_episode_and_nearby_seeds_differ(env_id: str) -> None:
    env = make_env(env_id)
    first = [env.reset(seed=s) for s in range(40)]
    again = [env.reset(seed=s) for s in range(40)]
    assert canonical_json(first) == canonical_json(again)
    tasks = [info["task_id"] for _, info in first]
    episodes = {info["episode_id"] for _, info in first}
    assert len(episodes) == 40
    # No shifted overlap between nearby seeds (the seed+idx defect): seed s's second
    # episode must not be seed s+1's first.
    successors = []
    for s in range(40):
        env.reset(seed=s)
        successors.append(env.reset()[1]["task_id"])
    assert sum(a == b for a, b in zip(successors[:-1], tasks[1:], strict=True)) <= 2


def test_info_keys_and_grade(env_id: str) -> None:
    env = make_env(env_id)
    _, info = env.reset(seed=3)
    assert set(info) >= INFO_KEYS
    assert len(info["fixture_sha256"]) == 64
    reward, info = play(env, env.oracle_action)
    grade = info["grade"]
    assert {"score", "components", "weights", "grader_version", "label"} <= set(grade)
    assert grade["score"] == reward == 1.0 and grade["label"] is None
    assert set(grade["weights"]) <= set(grade["components"])
    # maj@k votes with it: without one, a perfect agent's maj@k reads 0.
    assert isinstance(grade["details"].get("answer_key"), str), "the grade gives maj@k no answer key"
    json.dumps(info)  # plain data all the way down


def test_reset_task_id_option_gives_the_group_the_same_task(env_id: str) -> None:
    env = make_env(env_id)
    _, info = env.reset(seed=0)
    task_id = info["task_id"]
    group = [env.reset(seed=s, options={"task_id": task_id}) for s in range(8)]
    assert {i["task_id"] for _, i in group} == {task_id}
    assert len({i["episode_id"] for _, i in group}) == 8
    assert len({canonical_json(o) for o, _ in group}) == 1


def test_reset_split_option(env_id: str) -> None:
    env = make_env(env_id)
    for split in ("train", "dev", "test", "private"):
        if env.source.size(split) == 0:  # a fixed benchmark (HumanEval) has only 'test'
            with pytest.raises(UnknownTaskError, match="split"):
                env.reset(seed=5, options={"split": split})
            continue
        _, info = env.reset(seed=5, options={"split": split})
        assert info["split"] == split
        assert info["task_id"].split("/")[-2] == split


def test_bad_reset_options_raise_clearly(env_id: str) -> None:
    env = make_env(env_id)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"taskid": "x"})
    with pytest.raises(ValueError, match="unknown split"):
        env.reset(seed=0, options={"split": "validation"})
    with pytest.raises(UnknownTaskError, match="malformed task id"):
        env.reset(seed=0, options={"task_id": "nope"})
    _, info = env.reset(seed=0, options={"split": env.split})
    other = "dev" if env.split == "test" else "test"
    with pytest.raises(UnknownTaskError, match=f"not '{other}'"):
        env.reset(seed=0, options={"task_id": info["task_id"], "split": other})
    source = info["task_id"].split("/")[0]
    with pytest.raises(UnknownTaskError, match="outside split"):
        env.reset(seed=0, options={"task_id": f"{source}/{env.split}/999999"})


def test_render_ansi() -> None:
    env = make_env(ENV_IDS[0], render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert text is not None and "[user]" in text
