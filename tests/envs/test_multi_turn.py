"""Retry turns: feedback names the failure, never the gold; reward is the final attempt's."""

from __future__ import annotations

from tests.conftest import make_env


def test_retry_after_wrong_answer() -> None:
    env = make_env("frostgym/Arithmetic-v0", max_turns=2)
    obs, _ = env.reset(seed=11)
    gold = env.task.answer
    wrong = str(int(gold) + 1)
    obs, reward, terminated, _, info = env.step(f"<think>hmm</think><answer>{wrong}</answer>")
    assert not terminated and reward == 0.0
    assert "grade" not in info and info["turn_grade"]["label"] == "wrong_answer"
    assert obs[-1]["role"] == "user" and "wrong_answer" in obs[-1]["content"]
    assert gold not in obs[-1]["content"]
    assert env.oracle_action().endswith(f"<answer>{gold}</answer>")
    obs, reward, terminated, _, info = env.step(env.oracle_action())
    assert terminated and reward == 1.0 and info["turn"] == 2
    assert [m["role"] for m in obs] == ["system", "user", "assistant", "user", "assistant"]


def test_last_turn_ends_the_episode_with_its_grade() -> None:
    env = make_env("frostgym/Arithmetic-v0", max_turns=2)
    env.reset(seed=11)
    env.step("no idea")
    _, reward, terminated, _, info = env.step("still no idea")
    assert terminated and reward == 0.0 and info["grade"]["label"] == "no_answer"


def test_correct_first_answer_ends_early() -> None:
    env = make_env("frostgym/Arithmetic-v0", max_turns=3)
    env.reset(seed=11)
    _, reward, terminated, _, _ = env.step(env.oracle_action())
    assert terminated and reward == 1.0
