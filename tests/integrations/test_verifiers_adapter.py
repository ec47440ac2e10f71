"""The verifiers adapter beyond the shared contract: its taskset is the plan's tasks, its
scoring logs every grade component, the row's seed and task reach the episode, the env's
tools reach the model, and an exchange the trainer's turn limit ends scores 0."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from frostgym.train.session import TrainingEpisode, grade_metrics, messages_text, task_rows
from tests.integrations.reference import JUNK, oracle_actions

pytest.importorskip("verifiers", reason="verifiers is not installed (make install installs it)")

from frostgym.integrations.verifiers import GRADE_KEY, FrostgymEnv, load_environment
from tests.chat_server import ChatServer
from tests.integrations.drivers.verifiers import KEY_VAR, Scripted, rollout

WRONG_CODE = "```python\ndef wrong():\n    return None\n```"
#: A structured ``run_tests`` call: a multi-turn Code-v0 episode goes on after it.
RUN_TESTS: dict[str, Any] = {
    "content": "",
    "tool_calls": [{"name": "run_tests", "arguments": {"code": "def wrong():\n    return None"}}],
}


def tasks(env: FrostgymEnv) -> list[Any]:
    return list(env.taskset)


def test_the_taskset_is_the_plans_tasks_prompted_with_the_reset_observation() -> None:
    env = load_environment("frostgym/Arithmetic-v0", split="dev", level=2, n=3, seed=7)
    rows = task_rows("frostgym/Arithmetic-v0", split="dev", n=3, seed=7, level=2)
    got = tasks(env)
    assert [{k: t.data.info[k] for k in ("env_id", "split", "task_id", "episode_seed")} for t in got] == [
        r.to_dict() for r in rows
    ]
    assert all(t.data.info["env_kwargs"] == {"level": 2} for t in got)
    episode = TrainingEpisode("frostgym/Arithmetic-v0", "dev", level=2)
    try:
        for task, row in zip(got, rows, strict=True):
            first = episode.start(row.task_id, row.episode_seed)
            assert [(m.role, m.content) for m in task.data.prompt] == [(m["role"], m["content"]) for m in first]
    finally:
        episode.close()


def test_another_seed_gives_the_plans_other_tasks() -> None:
    a = [t.data.info["task_id"] for t in tasks(load_environment("frostgym/Math-v0", split="dev", n=4, seed=0))]
    b = [t.data.info["task_id"] for t in tasks(load_environment("frostgym/Math-v0", split="dev", n=4, seed=1))]
    assert b == [r.task_id for r in task_rows("frostgym/Math-v0", split="dev", n=4, seed=1)]
    assert a != b


def test_reward_is_the_score_and_each_component_a_metric() -> None:
    env = load_environment("frostgym/Math-v0", split="dev", n=1, seed=0)
    (task,) = tasks(env)
    row = task_rows("frostgym/Math-v0", split="dev", n=1, seed=0)[0]
    episode, bodies = rollout(env, task, oracle_actions(row))
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    grade = trace.info[GRADE_KEY]
    expected = grade_metrics(grade)
    assert trace.rewards["frostgym_score"].score == expected["score"] == 1.0
    assert trace.reward == 1.0
    for name in grade["components"]:
        assert trace.metrics[name] == expected[name]
    assert trace.metrics["ended"] == 1.0
    # The seed and task reached the episode: the model was sent that task's reset observation.
    first = TrainingEpisode("frostgym/Math-v0", "dev").start(row.task_id, row.episode_seed)
    assert messages_text(bodies[0]["messages"]) == messages_text(first)


def test_the_envs_tools_are_offered_to_the_model() -> None:
    env = load_environment("frostgym/Tools-v0", split="test", n=1, seed=0)
    (task,) = tasks(env)
    assert task.data.tools
    _, bodies = rollout(env, task, [JUNK])
    assert bodies[0]["tools"] == task.data.tools


def test_an_exchange_the_turn_limit_ends_scores_zero() -> None:
    env = load_environment("frostgym/Code-v0", split="test", n=1, seed=0, max_turns=3, player_max_turns=1)
    (task,) = tasks(env)
    episode, bodies = rollout(env, task, [RUN_TESTS, WRONG_CODE, WRONG_CODE])
    (trace,) = episode.traces
    assert len(bodies) == 1
    assert trace.info[GRADE_KEY] is None
    assert trace.rewards["frostgym_score"].score == 0.0
    assert trace.metrics["ended"] == 0.0


def test_code_with_several_turns_plays_until_the_env_ends() -> None:
    env = load_environment("frostgym/Code-v0", split="test", n=1, seed=0, max_turns=2)
    (task,) = tasks(env)
    episode, bodies = rollout(env, task, [RUN_TESTS, WRONG_CODE])
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert len(bodies) == 2
    assert trace.info["frostgym_turns"] == 2
    reference = TrainingEpisode("frostgym/Code-v0", "test", max_turns=2)
    reference.start(task.data.info["task_id"], task.data.info["episode_seed"])
    assert not reference.step(RUN_TESTS).done
    result = reference.step(WRONG_CODE)
    assert result.done
    assert trace.rewards["frostgym_score"].score == grade_metrics(result.grade)["score"]
    # The structured call reached the model's history as a tool call, and the env's test
    # results were the second request's new turn.
    assert bodies[1]["messages"][len(bodies[0]["messages"])]["tool_calls"][0]["function"]["name"] == "run_tests"
    assert len(bodies[1]["messages"]) > len(bodies[0]["messages"]) + 1


def test_episodes_one_after_another_reuse_one_frozen_env() -> None:
    import verifiers.v1 as vf

    env = load_environment("frostgym/Math-v0", split="dev", n=2, seed=0)
    rows = task_rows("frostgym/Math-v0", split="dev", n=2, seed=0)
    actions = [a for row in rows for a in oracle_actions(row)]
    os.environ.setdefault(KEY_VAR, "test")
    with ChatServer(Scripted(actions)) as server:
        ctx = vf.ModelContext(
            model="scripted", client=vf.EvalClientConfig(base_url=server.base_url, api_key_var=KEY_VAR)
        )

        async def run() -> list[Any]:
            async with env.serving():
                episodes = [await env.run_episode(task, ctx) for task in tasks(env)]
                assert env._pool.idle() == 1
                return episodes

        episodes = asyncio.run(run())
    assert [e.traces[0].reward for e in episodes] == [1.0, 1.0]
    assert env._pool.idle() == 0  # closed when serving ends
