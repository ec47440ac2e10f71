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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the adversarial suites' coverage reports. Tests attach them as properties,
    which pytest-xdist carries back from its workers, unlike their stdout."""
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        for name, value in getattr(report, "user_properties", []):
            if name == "adversarial_report" and report.when == "call":
                terminalreporter.write_line(str(value))
