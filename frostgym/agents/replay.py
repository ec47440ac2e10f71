"""``ReplayAgent``: plays the actions recorded in a ``frostgym eval`` result, by episode
id and turn. Episode ids are a pure function of the env, the seed and the task, so
re-running the same plan meets the same ids. A request with no recorded action gets
an errored reply (a replay miss), never a made-up action."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.core.messages import Action


class ReplayAgent:
    name = "replay"

    def __init__(self, actions: dict[tuple[str, int], Action], source: str = "", sha256: str = "") -> None:
        self.actions = actions
        self.source = source
        self.sha256 = sha256

    @classmethod
    def from_result(cls, path: str | Path) -> ReplayAgent:
        path = Path(path)
        if path.is_dir():
            path = path / "result.json"
        raw = path.read_bytes()
        data = json.loads(raw)
        actions: dict[tuple[str, int], Action] = {}
        for episode in data["episodes"]:
            for turn, step in enumerate(episode["steps"]):
                actions[(episode["episode_id"], turn)] = step["action"]
        return cls(actions, str(path), hashlib.sha256(raw).hexdigest())

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = []
        for r in requests:
            action = self.actions.get((r.episode_id, r.turn))
            if action is None:
                replies.append(AgentReply(action="", error=f"replay miss: no action for {r.episode_id} turn {r.turn}"))
            else:
                replies.append(AgentReply(action=action, finish_reason="replay"))
        return replies

    def describe(self) -> dict[str, Any]:
        return {"spec": f"replay:{self.source}", "result_sha256": self.sha256, "actions": len(self.actions)}
