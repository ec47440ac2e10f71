"""Bad input to step: a clear error or a graded failure, never a crash or a hang."""

from __future__ import annotations

import json
import time

import pytest
from gymnasium.error import ResetNeeded

from frostgym.core.errors import EpisodeNotActiveError, InvalidActionError
from tests.conftest import make_env

ENV = "frostgym/Math-v0"


@pytest.mark.parametrize("action", [None, 18, 18.0, ["18"], {"answer": 18}, object()])
def test_non_string_action_raises_and_keeps_the_episode(action: object) -> None:
    env = make_env(ENV)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="expects the assistant reply as str"):
        env.step(action)  # type: ignore[arg-type]
    _, reward, terminated, _, _ = env.step(env.oracle_action())  # the episode is still usable
    assert terminated and reward == 1.0


def test_ten_megabyte_reply_is_graded_fast() -> None:
    env = make_env(ENV)
    env.reset(seed=0)
    started = time.perf_counter()
    obs, reward, terminated, _, info = env.step("7" * 10_000_000)
    assert time.perf_counter() - started < 2.0
    assert terminated and reward == 0.0
    assert info["grade"]["label"] == "too_long"
    assert len(obs[-1]["content"]) < 30_000  # the history keeps a bounded copy
    assert "truncated" in obs[-1]["content"]


def test_lone_surrogates_are_replaced_not_fatal() -> None:
    env = make_env(ENV)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("<answer>\ud800 18</answer>")
    assert terminated and reward == 0.0
    assert info["action_sanitized"] is True
    json.dumps(obs, ensure_ascii=False).encode("utf-8")  # the record stays writable


def test_invalid_utf8_bytes_are_decoded_with_replacement() -> None:
    env = make_env(ENV)
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(b"<answer>\xff\xfe</answer>")
    assert terminated and info["action_sanitized"] is True
    assert info["grade"]["score"] == 0.0


def test_valid_utf8_bytes_are_accepted() -> None:
    env = make_env(ENV)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(env.oracle_action().encode("utf-8"))
    assert reward == 1.0 and "action_sanitized" not in info


def test_step_before_reset_and_after_termination() -> None:
    env = make_env(ENV)
    with pytest.raises(EpisodeNotActiveError, match="before reset"):
        env.step("18")
    env.reset(seed=0)
    env.step("18")
    with pytest.raises(ResetNeeded, match="after the episode ended"):
        env.step("18")


def test_structured_action_with_content_is_accepted() -> None:
    env = make_env(ENV)
    env.reset(seed=0)
    _, reward, _, _, _ = env.step({"content": env.oracle_action()})
    assert reward == 1.0


def test_constructor_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        make_env(ENV, max_turns=0)
    with pytest.raises(ValueError, match="'split' must be one of 'train', 'dev', 'test', 'private'"):
        make_env(ENV, split="validation")
    with pytest.raises(ValueError, match="render_mode"), pytest.warns(UserWarning, match="render_mode"):
        make_env(ENV, render_mode="human")
    with pytest.raises(ValueError, match="unknown math source"):
        make_env(ENV, source="nope")
