"""CustomerService-v0's grader against tau2-bench's own evaluator, on the same conversations.

For every dev task and every sixth test task of both domains: the oracle's conversation, and perturbations
of it (the last gold action left out; a wrong value in a writing action's arguments; an
extra write; the closing message without the information to communicate). Each is played
through the env with the scripted customer and graded by both; the test reports the
agreement and requires it on every conversation: frostgym's ``db`` and ``communicate``
components equal tau2's DB and COMMUNICATE rewards, its ``actions`` is full exactly when
tau2's ActionEvaluator gives 1, and its score equals tau2's reward except where frostgym's
safety component voids an unsanctioned write that left the database as the gold left it
(tau2 has no such check): those are counted apart.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from frostgym.core.tasks import Task
from frostgym.envs.customer import CustomerServiceEnv
from frostgym.envs.customer.env import MAX_CALLS_PER_TURN
from frostgym.tools.calls import ToolCall, render_calls
from tests.conftest import make_env
from tests.envs.customer.tau2_reference import play, tau2_messages, tau2_reward

pytestmark = pytest.mark.slow
#: Every dev task, and every this-many-th test task (tau2's evaluator copies the database per
#: conversation: the whole test split would take minutes).
TEST_EVERY = 6


def _calls(actions: list[dict[str, Any]]) -> list[str]:
    """The replies that make ``actions``, at most ``MAX_CALLS_PER_TURN`` calls each."""
    chunks = [actions[i : i + MAX_CALLS_PER_TURN] for i in range(0, len(actions), MAX_CALLS_PER_TURN)]
    return [render_calls([ToolCall(a["name"], dict(a["arguments"])) for a in chunk]) for chunk in chunks]


def _closing(task: Task, say_info: bool = True) -> str:
    info = [str(i) for i in task.metadata["communicate_info"]]
    if info and say_info:
        return "Here is what you asked about: " + "; ".join(info) + ". Thank you."
    return "All done. Thank you."


def _wrong(action: dict[str, Any]) -> dict[str, Any] | None:
    changed = copy.deepcopy(action)
    for key, value in changed["arguments"].items():
        if isinstance(value, str) and key.endswith("_id"):
            changed["arguments"][key] = value + "0"
            return changed
    return None


def variants(task: Task, writing: frozenset[str]) -> dict[str, list[str]]:
    gold = [dict(a) for a in task.metadata["actions"]]
    out: dict[str, list[str]] = {"oracle": [*_calls(gold), _closing(task)]}
    if gold:
        out["missing_action"] = [*_calls(gold[:-1]), _closing(task)]
    writes = [i for i, a in enumerate(gold) if a["name"] in writing]
    if writes and (wrong := _wrong(gold[writes[-1]])) is not None:
        perturbed = [*gold[: writes[-1]], wrong, *gold[writes[-1] + 1 :]]
        out["wrong_argument"] = [*_calls(perturbed), _closing(task)]
    if writes:
        out["extra_write"] = [*_calls([*gold, gold[writes[-1]]]), _closing(task)]
    if task.metadata["communicate_info"]:
        out["not_communicated"] = [*_calls(gold), _closing(task, say_info=False)]
    return out


def test_the_grader_agrees_with_tau2s_evaluator(record_property: Any) -> None:
    from frostgym.customer.tau2_data import writing_tools

    env = make_env("frostgym/CustomerService-v0")
    assert isinstance(env, CustomerServiceEnv)
    tally: Counter[str] = Counter()
    disagreements: list[str] = []
    safety_only: list[str] = []
    tasks = [*env.source.tasks("dev"), *list(env.source.tasks("test"))[::TEST_EVERY]]
    for task in tasks:
        writing = frozenset(writing_tools(str(task.metadata["domain"])))
        for name, replies in variants(task, writing).items():
            grade, steps, opening = play(env, task, replies)
            reference = tau2_reward(task, tau2_messages(opening, steps))
            parts = grade["components"]
            tally[name] += 1
            where = f"{task.task_id} {name}"
            if (parts["db"], parts["communicate"]) != (reference.db, reference.communicate):
                disagreements.append(
                    f"{where}: db/communicate {parts['db']}/{parts['communicate']} vs tau2 {reference}"
                )
            if (parts["actions"] == 1.0) != (reference.actions == 1.0):
                disagreements.append(f"{where}: actions {parts['actions']} vs tau2 {reference.actions}")
            if grade["score"] != reference.reward:
                if grade["label"] == "unsafe" and reference.reward == 1.0:
                    safety_only.append(where)
                else:
                    disagreements.append(f"{where}: score {grade['score']} vs tau2 {reference.reward}")
    total = sum(tally.values())
    summary = (
        f"{len(tasks)} tasks, {total} conversations ({dict(tally)}): {len(disagreements)} disagreements, "
        f"{len(safety_only)} voided by safety only"
    )
    record_property("tau2_differential", summary)
    print(summary)
    assert not disagreements, "\n".join(disagreements[:20])
    assert tally["oracle"] == len(tasks)
