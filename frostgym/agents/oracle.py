"""The oracle: plays the env's gold action. The ceiling every env must reach (1.0)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from frostgym.agents.base import AgentReply, AgentRequest


class OracleAgent:
    """Plays the env's gold action for each request: every episode it plays should score
    1.0, so it checks an env's ceiling (and its grader's) rather than a policy.

    Takes no arguments and never samples, so it is deterministic. ``act`` returns one
    ``AgentReply`` per request, in order, whose action is ``request.oracle()`` and whose
    ``finish_reason`` is ``"oracle"``. Raises ``ValueError`` for a request that carries no
    ``oracle`` (the runner always gives one), and whatever the env's ``oracle_action`` raises.
    """

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
