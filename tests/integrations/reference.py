"""The reference every trainer adapter is held to: episodes played through ``gym.make``.

``CASES`` names, for every registered id, the split and the tasks (two per id, from
``task_rows``: the plan's seeded order) the contract test plays. ``reference_play`` plays
a list of actions through ``gym.make`` and records what the agent saw (each message's
text, the first messages and then what each step added) and the grade;
``oracle_actions`` is the oracle's action list for a task, ``JUNK`` a reply that is never
right. An adapter's driver (``tests/integrations/drivers/*.py``) plays the same actions
through the adapter's real package and must return an equal ``Played``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym

import frostgym  # noqa: F401  (registers the ids)
from frostgym.core.env import FrozenEnv
from frostgym.core.messages import Action
from frostgym.envs.registry import ENTRIES
from frostgym.train.session import TaskRow, messages_text, task_rows

#: Ids whose tasks are all in ``test`` (HumanEval, BFCL); every other id is played on ``dev``.
TEST_ONLY = frozenset({"frostgym/Code-v0", "frostgym/Tools-v0", "frostgym/ToolsMultiTurn-v0"})
JUNK = "I am not sure, sorry."
ALL_IDS = tuple(entry.id for entry in ENTRIES)


def split_of(env_id: str) -> Any:
    return "test" if env_id in TEST_ONLY else "dev"


def cases(per_id: int = 2) -> list[TaskRow]:
    return [row for env_id in ALL_IDS for row in task_rows(env_id, split=split_of(env_id), n=per_id, seed=0)]


@dataclass(frozen=True)
class Played:
    """What an agent saw in one episode (each message's text: the first messages, then the
    messages each step added) and the episode's final grade (``score`` and ``label``)."""

    first: list[str]
    added: list[list[str]]
    score: float | None
    label: str | None

    @classmethod
    def of(cls, first: list[str], added: list[list[str]], grade: dict[str, Any] | None) -> Played:
        if grade is None:
            return cls(first, added, None, None)
        return cls(first, added, float(grade["score"]), grade.get("label"))


def oracle_actions(row: TaskRow) -> list[Action]:
    """The oracle's actions for ``row``'s episode, played through ``gym.make``."""
    env = gym.make(row.env_id, split=row.split)
    frozen = cast(FrozenEnv, env.unwrapped)
    try:
        env.reset(seed=row.episode_seed, options={"task_id": row.task_id})
        actions: list[Action] = []
        done = False
        while not done:
            action = frozen.oracle_action()
            actions.append(action)
            _, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
        return actions
    finally:
        env.close()


def junk_actions(row: TaskRow) -> list[Action]:
    """``JUNK`` as every reply until the episode ends (through ``gym.make``)."""
    env = gym.make(row.env_id, split=row.split)
    try:
        env.reset(seed=row.episode_seed, options={"task_id": row.task_id})
        actions: list[Action] = []
        done = False
        while not done:
            actions.append(JUNK)
            _, _, terminated, truncated, _ = env.step(JUNK)
            done = terminated or truncated
        return actions
    finally:
        env.close()


def reference_play(row: TaskRow, actions: list[Action]) -> Played:
    """``actions`` played through ``gym.make`` on ``row``'s task: what the agent saw and the grade."""
    env = gym.make(row.env_id, split=row.split)
    try:
        observation, _ = env.reset(seed=row.episode_seed, options={"task_id": row.task_id})
        first = messages_text(observation)
        seen = len(observation)
        added: list[list[str]] = []
        grade: dict[str, Any] | None = None
        for action in actions:
            observation, _, terminated, truncated, info = env.step(action)
            added.append(messages_text(observation[seen + 1 :]))
            seen = len(observation)
            if terminated or truncated:
                grade = info.get("grade")
                break
        return Played.of(first, added, grade)
    finally:
        env.close()
