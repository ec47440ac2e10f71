"""tau2-bench's own evaluator as the reference for CustomerService-v0's grader.

Why here: the differential test and ``benchmarks/customer_service.py`` grade the same
conversations with both, so the conversion of one frostgym episode into tau2's message
list, and tau2's default reward over it, are written once. tau2 is the reference (like
scipy for intervals), never a runtime need.

``play`` plays one episode through the env and keeps its steps as ``tau2_messages`` reads
them. ``tau2_messages`` rebuilds the conversation tau2's evaluators read: the customer's messages
as ``UserMessage``, the agent's texts as ``AssistantMessage``, each reply's calls as one
``AssistantMessage`` with ``tool_calls`` followed by a ``ToolMessage`` per call holding what
the env showed (tau2's environment evaluator replays the calls on a fresh database and
checks each result against it). ``tau2_reward`` is tau2's default reward for a conversation
the customer ended: ``EnvironmentEvaluator`` (DB) times ``CommunicateEvaluator``, with
``ActionEvaluator`` alongside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frostgym.core.tasks import Task
from frostgym.customer.tau2_data import domain_data
from frostgym.envs.customer import CustomerServiceEnv


@dataclass(frozen=True)
class Tau2Verdict:
    reward: float
    db: float
    communicate: float
    actions: float


def play(
    env: CustomerServiceEnv, task: Task, replies: Sequence[str] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Play ``task`` with ``replies`` (None: the oracle's, to the end): the final grade, the
    steps as ``tau2_messages`` reads them (each reply's ``action``, ``tool_calls`` and
    ``tool_results``, and for a message the ``customer``'s answer), and the opening."""
    observation, _ = env.reset(seed=0, options={"task_id": task.task_id})
    opening = observation[-1]["content"]
    steps: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    for reply in replies if replies is not None else iter(env.oracle_action, None):
        before = len(observation)
        observation, _, done, _, info = env.step(reply)
        step = {"action": reply, "tool_calls": info.get("tool_calls", []), "tool_results": info.get("tool_results", [])}
        if not step["tool_calls"]:
            new = observation[before + 1 :]
            step["customer"] = new[0]["content"] if new else env._customer_messages[-1]
        steps.append(step)
        if done:
            break
    return info["grade"], steps, opening


def tau2_messages(opening: str, steps: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The conversation of one episode, from its opening and each step's ``action`` text,
    parsed ``tool_calls``, ``tool_results`` and the customer's answer (``customer``)."""
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage

    messages: list[Any] = [UserMessage(role="user", content=opening)]
    for n, step in enumerate(steps):
        calls = step["tool_calls"]
        if calls:
            ids = [f"call_{n}_{i}" for i in range(len(calls))]
            tool_calls = [
                ToolCall(id=i, name=c["name"], arguments=dict(c["arguments"])) for i, c in zip(ids, calls, strict=True)
            ]
            messages.append(AssistantMessage(role="assistant", content=None, tool_calls=tool_calls))
            for i, result in zip(ids, step["tool_results"], strict=True):
                error = not result["ok"]
                messages.append(
                    ToolMessage(id=i, role="tool", content=str(result["content"]), requestor="assistant", error=error)
                )
            continue
        messages.append(AssistantMessage(role="assistant", content=step["action"]))
        if step.get("customer") is not None:
            messages.append(UserMessage(role="user", content=step["customer"]))
    return messages


def _record(task: Task) -> dict[str, Any]:
    domain, tau2_id = str(task.metadata["domain"]), str(task.metadata["tau2_id"])
    return next(dict(r) for r in domain_data(domain).tasks if str(r["id"]) == tau2_id)


def tau2_reward(task: Task, messages: list[Any]) -> Tau2Verdict:
    """tau2's default reward (DB x COMMUNICATE) of ``messages`` for ``task``, and its parts."""
    from tau2.data_model.tasks import Task as Tau2Task
    from tau2.evaluator.evaluator_action import ActionEvaluator
    from tau2.evaluator.evaluator_communicate import CommunicateEvaluator
    from tau2.evaluator.evaluator_env import EnvironmentEvaluator

    domain = str(task.metadata["domain"])
    if domain == "airline":
        from tau2.domains.airline.environment import get_environment
    else:
        from tau2.domains.retail.environment import get_environment
    reference = Tau2Task.model_validate(_record(task))
    env = EnvironmentEvaluator.calculate_reward(
        environment_constructor=get_environment, task=reference, full_trajectory=messages
    )
    communicate = CommunicateEvaluator.calculate_reward(task=reference, full_trajectory=messages)
    actions = ActionEvaluator.calculate_reward(task=reference, full_trajectory=messages)
    basis = {str(b.value) for b in reference.evaluation_criteria.reward_basis}
    assert basis == {"DB", "COMMUNICATE"}, basis  # every airline and retail task: tau2's default
    return Tau2Verdict(
        reward=env.reward * communicate.reward,
        db=env.reward,
        communicate=communicate.reward,
        actions=actions.reward,
    )
