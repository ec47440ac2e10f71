"""``ReplayAgent``: plays the actions recorded in a rollout card, by episode id and turn.

Episode ids are a pure function of the env, the seed and the task, so re-running the
same plan meets the same ids. A request with no recorded action gets an errored reply
(a ``replay_miss`` drop), never a made-up action."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.core.episode import action_is_whole
from frostgym.core.messages import Action


class ReplayAgent:
    name = "replay"

    def __init__(self, actions: dict[tuple[str, int], Action], source: str = "", sha256: str = "") -> None:
        self.actions = actions
        self.source = source
        self.sha256 = sha256

    @classmethod
    def from_card(cls, directory: str | Path) -> ReplayAgent:
        """The actions of every completed episode in the card at ``directory``."""
        path = Path(directory) / "episodes.jsonl"
        raw = path.read_bytes()
        actions: dict[tuple[str, int], Action] = {}
        for line in raw.splitlines():
            episode = orjson.loads(line)
            for step in episode["steps"]:
                if action_is_whole(step):  # a prefix is not the action: its turn is a replay miss
                    actions[(episode["episode_id"], step["turn"])] = step["action"]
        return cls(actions, str(directory), hashlib.sha256(raw).hexdigest())

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = []
        for r in requests:
            action = self.actions.get((r.episode_id, r.turn))
            if action is None:
                miss = f"replay miss: no recorded action for episode {r.episode_id} turn {r.turn}"
                replies.append(AgentReply(action="", error=miss, error_class="replay_miss"))
            else:
                replies.append(AgentReply(action=action, finish_reason="replay"))
        return replies

    def describe(self) -> dict[str, Any]:
        return {"spec": f"replay:{self.source}", "episodes_sha256": self.sha256, "actions": len(self.actions)}
