"""The TRL driver of the adapter contract: plays actions through what TRL's ``GRPOTrainer``
calls (``frostgym.train.trl``), the trainer's own tool loop and reward path.

Per task: the dataset row ``env_dataset`` makes for it (``rows_dataset``), whose prompt is
what the model first sees. An id with an ``environment_factory`` (SQL-v0, Code-v0,
ToolsHTTP-v0, ToolsMultiTurn-v0) gets a factory object (the row's ``environment`` picks it
from a dict factory) and ``reset(**row)``, as TRL does; then each action:

- with tool calls (a dict's ``tool_calls``, or the calls ``parse_reply`` reads in a text):
  the tool methods they name, gathered on one event loop as TRL gathers a reply's async
  tools; what the model got back is their results, the empty ones left out (a reply's
  calls are one env step: the first call gets the env's message, the others "");
- without calls, on ToolsMultiTurn-v0 and not the last action: ``finish_turn()``, the
  TRL form of a reply that ends a user request (its result is the next request);
- otherwise the reward path: the conversation ends there (TRL stops at a reply without a
  tool call) and the score reward function reads ``final_grade(text)``, which steps the
  text on every turn the episode has left. Every action left must then be that same text
  (TRL cannot play another reply after it). The env's messages on those steps are listed
  as it gave them, though under TRL the model never sees them: the conversation is over.

An id without a factory (single-turn) is graded by the reward functions on the reply text.

What TRL cannot show as ``gym.make`` does, and so what this driver does not compare: the
chat template's own rendering around tool results (each is a ``tool`` message) and its
tool listing (alphabetical, all of a ToolsMultiTurn-v0 entry's functions from the first
turn, schemas as ``get_json_schema`` renders them); a tool call that ends the episode is
answered ``graded: <label>`` (the env adds no message); a reply's text outside its tool
calls never reaches the env. None of these arise in the contract's episodes.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from frostgym.core.messages import Action
from frostgym.tools.calls import parse_reply
from frostgym.train.session import TaskRow, messages_text
from frostgym.train.trl import (
    CUSTOMER_ID,
    FINISH_TURN,
    MESSAGE_CUSTOMER,
    MULTI_TURN_ID,
    TOOL_ENVS,
    RewardFunc,
    ToolEnv,
    _Grader,
    environment_factory,
    reward_functions,
    rows_dataset,
)
from tests.integrations.reference import Played

PACKAGE = "trl"


@functools.cache
def _factory(env_id: str) -> Any:
    return environment_factory(env_id)


@functools.cache
def _score(env_id: str) -> RewardFunc:
    return reward_functions(env_id)[-1]


def _calls(action: Action) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls TRL's response parser would hand the tool loop for ``action``."""
    if isinstance(action, Mapping):
        out = []
        for call in action.get("tool_calls") or []:
            function = call.get("function", call)
            arguments = function.get("arguments") or {}
            parsed = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
            out.append((str(function["name"]), parsed))
        return out
    return [(call.name, dict(call.arguments)) for call in parse_reply(str(action)).calls]


def _text(action: Action) -> str:
    if isinstance(action, Mapping):
        return str(action.get("content") or "")
    return str(action)


async def _gather(env: ToolEnv, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    methods: list[Callable[..., Any]] = [getattr(env, name) for name, _ in calls]
    return list(await asyncio.gather(*(m(**args) for m, (_, args) in zip(methods, calls, strict=True))))


def play(row: TaskRow, actions: list[Action]) -> Played:
    data = rows_dataset([row])
    dataset_row = dict(data[0])
    first = [str(m["content"]) for m in dataset_row["prompt"]]
    columns = {k: [dataset_row[k]] for k in ("task_id", "episode_seed", "split")}
    if row.env_id not in TOOL_ENVS:  # single-turn: TRL grades the one completion
        (text,) = (_text(a) for a in actions)
        completions = [[{"role": "assistant", "content": text}]]
        (grade,) = _Grader(row.env_id, {}).batch(completions, columns)  # what the reward functions compute
        (score,) = _score(row.env_id)(prompts=[dataset_row["prompt"]], completions=completions, **columns)
        assert grade is not None and score == grade["score"]
        return Played.of(first, [[]], grade)

    factory = _factory(row.env_id)
    env: ToolEnv = (factory[dataset_row["environment"]] if isinstance(factory, dict) else factory)()
    env.reset(**{k: v for k, v in dataset_row.items() if k != "environment"})  # as TRL: every column but the router
    added: list[list[str]] = []
    for i, action in enumerate(actions):
        calls = _calls(action)
        if calls:
            added.append([r for r in asyncio.run(_gather(env, calls)) if r])
            continue
        if row.env_id == MULTI_TURN_ID and i < len(actions) - 1:
            added.append([asyncio.run(getattr(env, FINISH_TURN)())])
            continue
        if row.env_id == CUSTOMER_ID and i < len(actions) - 1:
            added.append([asyncio.run(getattr(env, MESSAGE_CUSTOMER)(_text(action)))])
            continue
        text = _text(action)
        before = len(env.steps)
        completions = [[{"role": "assistant", "content": text}]]
        _score(row.env_id)(prompts=[dataset_row["prompt"]], completions=completions, environments=[env], **columns)
        stepped = env.steps[before:]
        rest = actions[i:]
        if len(stepped) != len(rest) or any(_text(a) != text or _calls(a) for a in rest):
            raise AssertionError(f"TRL cannot play {rest!r} after a reply without tool calls: it ends the conversation")
        added.extend(messages_text(step.messages) for step in stepped)
        break
    assert env.episode is not None
    return Played.of(first, added, env.episode.grade)
