"""Real cards for the report's tests: an oracle and a random card of the same plan (math,
a tool env and sandboxed code), and a card with drops whose replies carry markup.

Shared by ``test_report.py`` and ``test_report_browser.py`` so both read the same cards.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frostgym.agents import OracleAgent
from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions

ENVS = ["frostgym/Arithmetic-v0", "frostgym/ToolsHTTP-v0", "frostgym/Code-v0"]
#: A reply the browser must show as text: run as markup it would open a dialog.
MARKUP = '<img src=x onerror="alert(1)"></script><script>alert(2)</script> & <b>bold</b>'


class MarkupAgent:
    """The oracle on some episodes; markup on others (graded as a wrong answer); an agent
    error (a drop) on every third episode by id, as a flaky model server would give."""

    name = "markup"

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = OracleAgent().act(requests)
        out = []
        for request, reply in zip(requests, replies, strict=True):
            number = int(request.episode_id, 16)
            if number % 3 == 0:
                out.append(AgentReply.failed("model server said 503 <html>busy</html>"))
            elif number % 3 == 1:
                out.append(AgentReply(MARKUP))
            else:
                out.append(reply)
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": "markup"}


def make_card(
    out: Path,
    agent: Any,
    envs: Sequence[str],
    episodes: int | None,
    samples: int = 2,
    env_options: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """A complete card of ``agent`` on ``envs`` (test split; ``episodes`` None: every task),
    each env with its own ``env_options`` (``{"frostgym/Arithmetic-v0": {"level": 1}}``) when given."""
    options = RunOptions(split="test", batch_size=8, retries=0, env_options=env_options or {})
    config = card_config(
        env_ids=list(envs), agent_spec=agent.describe()["spec"], sampling={}, episodes=episodes, samples=samples,
        seed=3, options=options,
    )  # fmt: skip
    run_to_card(out, agent, config, options)
    return out
