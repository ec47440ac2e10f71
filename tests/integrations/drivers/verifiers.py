"""The verifiers adapter's driver for the contract test: an episode played as a verifiers
eval plays it.

The env is ``load_environment``'s (a real ``verifiers.v1.Env``), its task the row's (the
plan's tasks for the contract test's ``n`` and seed, picked by task id), and the episode a
real rollout: ``env.run_episode`` inside ``env.serving()``, every model call going through
verifiers' interception server to a loopback OpenAI-compatible server (``ChatServer``) that
answers the given actions in order (a structured action as an assistant message with
``tool_calls``). What the agent saw is what the model was sent: the first request's messages,
then what each next request added after the reply; the last step's additions (which no
request carries) are the ones the env left on the trace. The grade's score is the reward
verifiers' scoring recorded.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from typing import Any

from frostgym.core.messages import Action
from frostgym.train.session import TaskRow, messages_text
from tests.chat_server import Answer, ChatServer
from tests.integrations.reference import Played

PACKAGE = "verifiers"
#: The plan the contract test's rows come from (``reference.cases``: two per id, seed 0).
PLAN_N, PLAN_SEED = 2, 0
KEY_VAR = "FROSTGYM_VERIFIERS_TEST_KEY"


def reply_message(action: Action, index: int) -> dict[str, Any]:
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    calls = [
        {
            "id": f"call_{index}_{i}",
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": call["arguments"]
                if isinstance(call.get("arguments"), str)
                else json.dumps(call.get("arguments", {})),
            },
        }
        for i, call in enumerate(action.get("tool_calls") or [])
    ]
    return {"role": "assistant", "content": action.get("content") or None, "tool_calls": calls or None}


class Scripted:
    """Answers each chat request with the next action."""

    def __init__(self, actions: list[Action]) -> None:
        self.actions = list(actions)
        self.sent = 0

    def __call__(self, body: dict[str, Any]) -> Answer:
        if self.sent >= len(self.actions):
            return 500, {"error": {"message": "no more scripted replies"}}, {}
        message = reply_message(self.actions[self.sent], self.sent)
        self.sent += 1
        payload = {
            "id": f"chatcmpl-{self.sent}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        return 200, payload, {}


def rollout(env: Any, task: Any, actions: list[Action]) -> tuple[Any, list[dict[str, Any]]]:
    """One real rollout of ``task`` on ``env`` against a loopback server answering ``actions``
    in order: the verifiers episode and every request body the model was sent."""
    import verifiers.v1 as vf

    os.environ.setdefault(KEY_VAR, "test")
    with ChatServer(Scripted(actions)) as server:
        ctx = vf.ModelContext(
            model="scripted", client=vf.EvalClientConfig(base_url=server.base_url, api_key_var=KEY_VAR)
        )

        async def run() -> Any:
            async with env.serving():
                return await env.run_episode(task, ctx)

        episode = asyncio.run(run())
        return episode, list(server.bodies)


def play(row: TaskRow, actions: list[Action]) -> Played:
    from frostgym.integrations.verifiers import GRADE_KEY, load_environment

    env = load_environment(row.env_id, split=row.split, n=PLAN_N, seed=PLAN_SEED)
    (task,) = list(env.taskset.include(ids=[f"{row.env_id}:{row.task_id}"]))
    assert task.data.info["episode_seed"] == row.episode_seed
    episode, sent = rollout(env, task, actions)
    bodies = [b["messages"] for b in sent]
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    first = messages_text(bodies[0])
    added = [messages_text(after[len(before) + 1 :]) for before, after in itertools.pairwise(bodies)]
    grade = trace.info.get(GRADE_KEY)
    if grade is None:
        return Played.of(first, added, None)
    added.append(messages_text(trace.info.get("frostgym_final_messages", [])))
    # The score as verifiers' scoring recorded it (the task's reward), the label as graded.
    return Played.of(first, added, {"score": trace.rewards["frostgym_score"].score, "label": grade.get("label")})
