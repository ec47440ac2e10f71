from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import pytest

import frostgym
from frostgym.core.env import FrozenEnv

ENV_IDS = [e.id for e in frostgym.ENTRIES]


def make_env(env_id: str, **kwargs: object) -> FrozenEnv:
    env = gymnasium.make(env_id, **kwargs).unwrapped
    assert isinstance(env, FrozenEnv)
    return env


def play(env: FrozenEnv, policy: Callable[[], object], max_steps: int = 500) -> tuple[float, dict[str, Any]]:
    """Step ``policy()``'s actions until the episode ends (multi-step envs need several);
    the last reward and info."""
    for _ in range(max_steps):
        _, reward, terminated, truncated, info = env.step(policy())  # type: ignore[arg-type]
        if terminated or truncated:
            return float(reward), info
    raise AssertionError(f"the episode did not end within {max_steps} steps")


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


#: How a module says every test in it is slow.
WHOLE_MODULE_SLOW = "\npytestmark = pytest.mark.slow\n"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under exactly ``-m "not slow"`` (``make test-fast``), a module whose every test is slow
    is not imported at all: several import torch, Ray, hypothesis or a browser driver, seconds
    in every worker for tests the expression deselects anyway."""
    if config.getoption("markexpr") != "not slow" or not collection_path.name.startswith("test_"):
        return None
    if collection_path.suffix != ".py":
        return None
    return True if WHOLE_MODULE_SLOW in collection_path.read_text(encoding="utf-8") else None
