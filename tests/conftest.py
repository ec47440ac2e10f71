from __future__ import annotations

import gymnasium
import pytest

import frostgym
from frostgym.core.env import FrozenEnv

ENV_IDS = [e.id for e in frostgym.ENTRIES]


def make_env(env_id: str, **kwargs: object) -> FrozenEnv:
    env = gymnasium.make(env_id, **kwargs).unwrapped
    assert isinstance(env, FrozenEnv)
    return env


@pytest.fixture(params=ENV_IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    return str(request.param)
