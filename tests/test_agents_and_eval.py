"""Scripted agents, the evaluation loop and the CLI, end to end on real envs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.agents import AgentReply, AgentRequest, OracleAgent, RandomAgent, make_agent
from frostgym.cli import app
from frostgym.core.seeding import derive_seed
from frostgym.evaluation import evaluate, plan_episodes, summarize

MATH = "frostgym/Math-v0"


def _request(seed: int, oracle: Any = None) -> AgentRequest:
    return AgentRequest(
        observation=[{"role": "user", "content": "q"}], episode_id="e", turn=0, seed=seed, oracle=oracle
    )


def test_random_agent_is_deterministic_per_request_seed() -> None:
    agent = RandomAgent(seed=3)
    a = [r.action for r in agent.act([_request(s) for s in range(50)])]
    b = [r.action for r in agent.act([_request(s) for s in reversed(range(50))])][::-1]
    assert a == b  # depends on the request's seed, not on batch position
    assert len(set(a)) > 10
    assert [r.action for r in RandomAgent(seed=4).act([_request(s) for s in range(50)])] != a


def test_oracle_agent_needs_the_oracle() -> None:
    assert OracleAgent().act([_request(0, oracle=lambda: "gold")])[0].action == "gold"
    with pytest.raises(ValueError, match="oracle"):
        OracleAgent().act([_request(0)])


def test_make_agent_rejects_unknown_specs() -> None:
    assert make_agent("random", seed=1).describe() == {"spec": "random", "seed": 1}
    with pytest.raises(ValueError, match="unknown agent spec"):
        make_agent("gpt-9")


def test_episode_seeds_are_hashed_and_distinct() -> None:
    plans = plan_episodes([MATH, "frostgym/Arithmetic-v0"], 100, seed=0)
    seeds = [p.seed for p in plans]
    assert len(set(seeds)) == 200
    assert plans[1].seed == derive_seed("episode", 0, MATH, 1)


def test_evaluate_oracle_and_random() -> None:
    oracle = evaluate([MATH], OracleAgent(), episodes=30, seed=1, batch_size=8)
    assert [r.reward for r in oracle] == [1.0] * 30
    assert all(r.status == "completed" and len(r.steps) == 1 for r in oracle)
    junk = evaluate([MATH], RandomAgent(seed=1), episodes=30, seed=1, batch_size=7)
    assert summarize(junk)[MATH]["mean_reward"] < 0.2
    assert [r.task_id for r in junk] == [r.task_id for r in oracle]  # same plan, same tasks


class _Flaky:
    """A real agent that fails on its second batch, as a crashing model server would."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("model server went away")
        return OracleAgent().act(requests)

    def describe(self) -> dict[str, Any]:
        return {"spec": "flaky"}


def test_agent_failure_is_recorded_not_raised() -> None:
    records = evaluate([MATH], _Flaky(), episodes=12, seed=0, batch_size=4)
    statuses = [r.status for r in records]
    assert statuses.count("errored") == 4 and statuses.count("completed") == 8
    failed = next(r for r in records if r.status == "errored")
    assert failed.error is not None and "model server went away" in failed.error
    assert summarize(records)[MATH]["errored"] == 4


def test_cli_eval_writes_result(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", "--env", f"{MATH},frostgym/Fractions-v0", "--agent", "oracle", "--episodes", "5", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "result.json").read_text())
    assert data["schema"] == "frostgym.eval/1"
    assert len(data["episodes"]) == 10
    assert data["summary"][MATH]["mean_reward"] == 1.0
    episode = data["episodes"][0]
    assert {"episode_id", "task_id", "seed", "seed_derivation", "fixture_sha256", "steps", "grade"} <= set(episode)
    assert episode["steps"][0]["observation"][0]["role"] == "system"


def test_cli_rejects_bad_arguments(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_env = runner.invoke(app, ["eval", "--env", "frostgym/Nope-v0", "--out", str(tmp_path)])
    assert bad_env.exit_code == 2 and "Nope-v0" in bad_env.output
    bad_agent = runner.invoke(app, ["eval", "--env", MATH, "--agent", "gpt-9", "--out", str(tmp_path)])
    assert bad_agent.exit_code == 2 and "unknown agent spec" in bad_agent.output


def test_cli_lock_check_passes() -> None:
    result = CliRunner().invoke(app, ["lock"])
    assert result.exit_code == 0, result.output
    assert "MISMATCH" not in result.output
