"""Scripted agents, the evaluation loop and the CLI, end to end on real envs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.agents import AgentReply, AgentRequest, OracleAgent, RandomAgent, make_agent
from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.core.seeding import derive_seed
from frostgym.run.plan import make_plan
from frostgym.run.runner import RunOptions, evaluate

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


def test_plan_seeds_are_hashed_and_distinct() -> None:
    plan = make_plan([MATH, "frostgym/Arithmetic-v0"], split="dev", episodes=50, samples=2, seed=0)
    assert len({p.seed for p in plan}) == len({p.plan_id for p in plan}) == 200
    first = plan[1]
    assert first.sample == 1 and first.seed == derive_seed("episode", 0, MATH, first.task_id, 1)
    assert len({p.task_id for p in plan if p.env_id == MATH}) == 50  # distinct tasks per env
    assert make_plan([MATH], split="dev", episodes=50, samples=2, seed=0) == plan[:100]
    with pytest.raises(ValueError, match="fewer than"):
        make_plan(["frostgym/SQL-v0"], split="dev", episodes=1000, samples=1, seed=0)
    with pytest.raises(ValueError, match="unbounded"):
        make_plan([MATH], split="train", episodes=None, samples=1, seed=0)


def test_evaluate_oracle_and_random() -> None:
    oracle = evaluate([MATH], OracleAgent(), episodes=30, seed=1, options=RunOptions(batch_size=8))
    assert [r.reward for r in oracle.episodes] == [1.0] * 30 and not oracle.drops
    assert all(len(r.steps) == 1 for r in oracle.episodes)
    junk = evaluate([MATH], RandomAgent(seed=1), episodes=30, seed=1, options=RunOptions(batch_size=7))
    assert sum(r.reward for r in junk.episodes) / 30 < 0.2
    assert sorted(r.plan_id for r in junk.episodes) == sorted(r.plan_id for r in oracle.episodes)


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
    run = evaluate([MATH], _Flaky(), episodes=12, seed=0, options=RunOptions(batch_size=4, retries=0))
    assert len(run.episodes) == 8 and len(run.drops) == 4
    drop = run.drops[0]
    assert drop.drop.drop_class == "agent_error" and drop.drop.stage == "agent" and drop.counted_as == "failure"
    assert drop.traceback is not None and "model server went away" in drop.traceback
    retried = evaluate([MATH], _Flaky(), episodes=12, seed=0, options=RunOptions(batch_size=4, retries=1))
    assert len(retried.episodes) == 12 and not retried.drops  # the retry from reset succeeds
    assert sorted(r.attempts for r in retried.episodes) == [1] * 8 + [2] * 4


def test_cli_eval_writes_a_card(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", "--env", f"{MATH},frostgym/Fractions-v0", "--agent", "oracle", "--episodes", "5", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert result.output.index("accounting") < result.output.index("scores")
    card, episodes, drops = load_card(out)
    assert card["schema"] == "frostgym.card/4" and card["status"] == "complete"
    assert len(episodes) == 10 and not drops
    assert card["views"]["by_env"][MATH]["errors_as_failures"]["mean_reward"] == 1.0
    episode = episodes[0]
    assert episode.episode_id and episode.seed_derivation and episode.fixture_sha256 and episode.grade is not None
    assert episode.observation[0]["role"] == "system"
    again = CliRunner().invoke(app, ["eval", "--env", MATH, "--episodes", "5", "--out", str(out)])
    assert again.exit_code == 2 and "--resume" in again.output  # never overwrites a card


def test_cli_rejects_bad_arguments(tmp_path: Path) -> None:
    runner = CliRunner()
    bad_env = runner.invoke(app, ["eval", "--env", "frostgym/Nope-v0", "--out", str(tmp_path)])
    assert bad_env.exit_code == 2 and "Nope-v0" in bad_env.output
    bad_agent = runner.invoke(app, ["eval", "--env", MATH, "--agent", "gpt-9", "--out", str(tmp_path)])
    assert bad_agent.exit_code == 2 and "unknown agent spec" in bad_agent.output


@pytest.mark.slow
@pytest.mark.slow
def test_cli_lock_check_passes() -> None:
    result = CliRunner().invoke(app, ["lock"])
    assert result.exit_code == 0, result.output
    assert "MISMATCH" not in result.output
