"""The SkyRL-gym adapter's driver for the contract test: an episode played as SkyRL's
generator plays it.

The row is the SkyRL dataset row ``skyrl_row`` writes; as SkyRL's ``PromptDataset`` does,
``prompt`` and ``env_class`` are taken out and every other column is the env's ``extras``.
The env is made through skyrl-gym's own ``make``, ``init`` gets the dataset prompt, and each
action is stepped as the text a model would have produced (a structured tool-call action
through ``structured_to_text``).
"""

from __future__ import annotations

from typing import Any

from frostgym.core.messages import Action
from frostgym.tools.calls import structured_to_text
from frostgym.train.session import TaskRow, messages_text
from tests.integrations.reference import Played

PACKAGE = "skyrl_gym"


def action_text(action: Action) -> str:
    return action if isinstance(action, str) else structured_to_text(action)


def play(row: TaskRow, actions: list[Action]) -> Played:
    import skyrl_gym

    from frostgym.integrations.skyrl_gym import register_skyrl_envs, skyrl_row

    register_skyrl_envs()
    data = skyrl_row(row)
    prompt = data.pop("prompt")
    env_class = data.pop("env_class")
    env = skyrl_gym.make(env_class, env_config={}, extras=data)
    try:
        observations, _ = env.init(prompt)
        first = messages_text(observations)
        added: list[list[str]] = []
        grade: dict[str, Any] | None = None
        for action in actions:
            out = env.step(action_text(action))
            added.append(messages_text(out["observations"]))
            if out["done"]:
                grade = out["metadata"]["grade"]
                break
        return Played.of(first, added, grade)
    finally:
        env.close()
