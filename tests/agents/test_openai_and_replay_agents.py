"""The OpenAI-compatible agent against a real HTTP server on loopback, and the replay agent."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from frostgym.agents.base import AgentRequest
from frostgym.agents.openai_compat import OpenAIAgent
from frostgym.agents.random_agent import RandomAgent
from frostgym.agents.replay import ReplayAgent
from frostgym.agents.sampling import SamplingParams
from frostgym.agents.spec import make_agent
from frostgym.cli import app
from frostgym.run.runner import evaluate
from tests.chat_server import ChatServer


def _requests(n: int) -> list[AgentRequest]:
    return [AgentRequest([{"role": "user", "content": f"q{i}"}], f"e{i}", 0, seed=i) for i in range(n)]


def test_batch_runs_concurrently_and_accounts_usage() -> None:
    with ChatServer() as server:
        agent = OpenAIAgent(server.base_url, "echo", sampling=SamplingParams(temperature=0.7, stop=("\n",), seed=3))
        replies = agent.act(_requests(6))
    assert [r.action for r in replies] == [f"you said: q{i}" for i in range(6)]
    assert all(r.drop is None and r.finish_reason == "stop" and r.completion_tokens == 7 for r in replies)
    assert agent.usage["requests"] == 6 and agent.usage["completion_tokens"] == 42
    body = server.bodies[0]
    assert body["temperature"] == 0.7 and body["stop"] == ["\n"] and 0 <= body["seed"] < 2**31
    assert len({b["seed"] for b in server.bodies}) == 6  # each request its own derived seed


def test_transient_failures_are_retried_with_backoff() -> None:
    with ChatServer() as server:
        flaky = OpenAIAgent(server.base_url, "flaky", backoff_s=0.01)
        limited = OpenAIAgent(server.base_url, "limited", backoff_s=10.0)  # Retry-After (0.05 s) wins
        assert flaky.act(_requests(2))[0].action == "you said: q0"
        assert limited.act(_requests(1))[0].action == "you said: q0"
    assert flaky.usage["retries"] == 4 and flaky.usage["failures"] == 0
    assert limited.usage["retries"] == 1


def test_final_errors_are_not_retried_and_error_only_their_episode() -> None:
    with ChatServer() as server:
        broken = OpenAIAgent(server.base_url, "broken", backoff_s=0.01)
        garbage = OpenAIAgent(server.base_url, "garbage", backoff_s=0.01)
        reply = broken.act(_requests(1))[0]
        assert reply.drop is not None and "HTTP 400" in reply.drop.error
        assert garbage.act(_requests(1))[0].drop is not None
    assert broken.usage["retries"] == 0 and broken.usage["requests"] == 1


def test_unreachable_server_fails_after_bounded_retries() -> None:
    agent = OpenAIAgent("http://127.0.0.1:9/v1", "echo", max_retries=2, backoff_s=0.01, timeout_s=1.0)
    reply = agent.act(_requests(1))[0]
    assert reply.drop is not None and agent.usage["retries"] == 2


def test_tool_calls_become_structured_actions() -> None:
    with ChatServer() as server:
        reply = OpenAIAgent(server.base_url, "tools").act(_requests(1))[0]
    assert reply.action == {"content": "", "tool_calls": [{"name": "run_sql", "arguments": {"query": "SELECT 1"}}]}


def test_openai_spec_runs_an_evaluation_with_errors_recorded() -> None:
    with ChatServer() as server:
        good = evaluate(["frostgym/Arithmetic-v0"], make_agent(f"openai:{server.base_url}#echo"), episodes=4)
        bad = evaluate(["frostgym/Arithmetic-v0"], make_agent(f"openai:{server.base_url}#broken"), episodes=4)
    assert len(good.episodes) == 4 and not good.drops
    assert len(bad.drops) == 4 and not bad.episodes
    assert all(d.drop.drop_class == "agent_error" and "HTTP 400" in d.drop.error and d.attempts == 2 for d in bad.drops)


def test_replay_agent_reproduces_a_card_and_reports_misses(tmp_path: Path) -> None:
    out = tmp_path / "run"
    envs = ["frostgym/SQL-v0", "frostgym/Math-v0"]
    result = CliRunner().invoke(
        app, ["eval", "--env", ",".join(envs), "--agent", "random", "--episodes", "6", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    original = evaluate(envs, RandomAgent(seed=0), episodes=6)
    replayed = evaluate(envs, ReplayAgent.from_card(out), episodes=6)
    by_id = {r.plan_id: r for r in original.episodes}
    assert len(replayed.episodes) == 12
    for r in replayed.episodes:
        assert (r.reward, len(r.steps)) == (by_id[r.plan_id].reward, len(by_id[r.plan_id].steps))
    missed = evaluate(["frostgym/Math-v0"], ReplayAgent.from_card(out), episodes=6, seed=99)
    assert not missed.episodes
    assert all(d.drop.drop_class == "replay_miss" and d.attempts == 1 for d in missed.drops)
