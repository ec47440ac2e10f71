"""The oracle: plays the env's gold action. The ceiling every env must reach (1.0)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from frostgym.agents.base import AgentReply, AgentRequest


class OracleAgent:
    name = "oracle"

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = []
        for request in requests:
            if request.oracle is None:
                raise ValueError("the oracle agent needs requests that carry the env's oracle")
            replies.append(AgentReply(action=request.oracle(), finish_reason="oracle"))
        return replies

    def describe(self) -> dict[str, Any]:
        return {"spec": "oracle"}
