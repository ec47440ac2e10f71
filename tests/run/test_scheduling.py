"""How the runner feeds an agent (``frostgym.agents.base.Scheduling``), on a real chat
server on loopback: a ``per_request`` agent's episodes step as soon as their own replies
arrive, so a straggler holds only its own episode; the records are the same as in
lockstep turns (their order may differ); a card written this way replays exactly."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from frostgym.agents.base import concurrency_of, scheduling_of
from frostgym.agents.openai_compat import OpenAIAgent
from frostgym.agents.oracle import OracleAgent
from frostgym.agents.sampling import SamplingParams
from frostgym.core.episode import EpisodeRecord
from frostgym.evaluate.replay import replay_card
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.plan import make_plan
from frostgym.run.runner import MemorySink, Outcome, RunOptions, run_plan
from tests.chat_server import Answer, ChatServer

MATH = "frostgym/Arithmetic-v0"
SQL = "frostgym/SQL-v0"


def _agent(server: ChatServer, concurrency: int, model: str = "echo") -> OpenAIAgent:
    sampling = SamplingParams(max_new_tokens=8)  # every episode in flight from the start: what these tests vary
    return OpenAIAgent(server.base_url, model, sampling=sampling, concurrency=concurrency, adaptive_concurrency=False)


def _content(outcomes: list[Outcome]) -> dict[str, Any]:
    """Each record by plan id, without what only the clock decides."""
    seen = {}
    for outcome in outcomes:
        assert isinstance(outcome, EpisodeRecord)
        steps = [(s.action, s.grade, s.reward, s.observation, s.tool_calls, s.tool_results) for s in outcome.steps]
        seen[outcome.plan_id] = (outcome.seed, outcome.reward, outcome.grade, outcome.observation, steps)
    return seen


def test_agents_declare_how_they_are_fed() -> None:
    with ChatServer() as server:
        agent = _agent(server, 5)
        assert scheduling_of(agent) == "per_request" and concurrency_of(agent, 64) == 5
        agent.close()
    assert scheduling_of(OracleAgent()) == "batched" and concurrency_of(OracleAgent(), 64) == 64
    assert scheduling_of(object()) == "batched"  # an agent that declares nothing is fed in turns


def test_a_straggler_holds_only_its_own_episode() -> None:
    """One reply takes 1.5 s, the others none: fed per request, every other episode ends
    before it (in lockstep turns, its turn-mates would wait for it)."""
    plan = make_plan([MATH], split="train", episodes=12, samples=1, seed=0)
    slow_prompt: list[str] = []
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Answer | None:
        prompt = body["messages"][-1]["content"]
        with lock:
            if not slow_prompt:
                slow_prompt.append(prompt)
        if prompt == slow_prompt[0]:
            time.sleep(1.5)
        return None

    ended: list[str] = []
    with ChatServer(respond) as server:
        agent = _agent(server, 4)
        sink = MemorySink()
        run_plan(
            plan, agent, sink, RunOptions(split="train", batch_size=4), on_outcome=lambda o: ended.append(o.plan_id)
        )
        agent.close()
    assert len(sink.episodes) == 12 and not sink.drops
    slow = [e.plan_id for e in sink.episodes if e.observation[-1]["content"] == slow_prompt[0]]
    assert ended[-1] in slow  # the eleven others did not wait for it


def test_per_request_and_lockstep_give_the_same_records() -> None:
    """The same plan, single-turn and multi-turn (SQL with tool calls), fed per request and
    in lockstep turns (the agent told to be batched): the same records by plan id, with
    jittered reply times so the order of completion differs."""

    def respond(body: dict[str, Any]) -> Answer | None:
        time.sleep((body["seed"] % 7) / 500)
        return None

    for env_id, split, model in ((MATH, "train", "echo"), (SQL, "dev", "tools")):
        plan = make_plan([env_id], split=split, episodes=6, samples=2, seed=3)
        results = {}
        with ChatServer(respond) as server:
            for scheduling in ("per_request", "batched"):
                agent = _agent(server, 4, model)
                agent.scheduling = scheduling  # type: ignore[assignment]
                sink = MemorySink()
                run_plan(plan, agent, sink, RunOptions(split=split, batch_size=4))
                agent.close()
                assert not sink.drops, sink.drops[0].error
                results[scheduling] = _content(sink.outcomes)
        assert results["per_request"] == results["batched"], env_id


def test_a_card_written_per_request_replays_exactly(tmp_path: Path) -> None:
    with ChatServer() as server:
        agent = _agent(server, 3)
        options = RunOptions(split="train", batch_size=8)
        sampling = agent.sampling.to_dict()
        config = card_config(
            env_ids=[MATH],
            agent_spec=agent.describe()["spec"],
            sampling=sampling,
            episodes=5,
            samples=2,
            seed=0,
            options=options,
        )
        card = run_to_card(tmp_path / "c", agent, config, options)
        agent.close()
    assert card["status"] == "complete" and card["accounting"]["completed"] == 10
    assert replay_card(tmp_path / "c").ok
