"""The scripted customer: a deterministic second party, from the task's user scenario alone.

Why: the oracle, the contract tests and the differential check against tau2's evaluator
need a customer whose every word is a pure function of the task and the conversation, with
no model behind it. It is not a realistic customer (the LLM customer,
``frostgym.envs.customer.users``, is): it states its whole ticket at once and answers by
rule.

- It opens with the scenario's reason for the call and what it knows (``opening``).
- To a message with a question it answers: "yes" to a request for confirmation (a question
  that asks to confirm or proceed), else what it knows again.
- To a message without a question, or after ``MAX_REPLIES`` answers, it ends the
  conversation with tau2's ``###STOP###``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from frostgym.customer.tau2_data import STOP

#: Answers the scripted customer gives before it ends the conversation whatever is asked.
MAX_REPLIES: Final = 4
CONFIRM: Final = "Yes, I confirm. Please go ahead."
_CONFIRMATION = re.compile(
    r"\b(confirm|proceed|go ahead|shall i|should i|do you want me to|would you like me to)\b", re.I
)


def _instructions(scenario: Mapping[str, Any]) -> Mapping[str, Any]:
    instructions = scenario.get("instructions") or {}
    return instructions if isinstance(instructions, Mapping) else {}


def opening(scenario: Mapping[str, Any]) -> str:
    """The customer's first message: its reason for the call, then what it knows."""
    instructions = _instructions(scenario)
    parts = [
        "Hello. This is my request, as written on my support ticket:",
        str(instructions.get("reason_for_call") or "").strip(),
    ]
    known = str(instructions.get("known_info") or "").strip()
    if known:
        parts += ["What I can tell you:", known]
    return "\n\n".join(part for part in parts if part)


def answer(scenario: Mapping[str, Any], agent_text: str, replies_so_far: int) -> str:
    """The customer's answer to the agent's message ``agent_text``, its ``replies_so_far``-th."""
    if replies_so_far >= MAX_REPLIES or "?" not in agent_text:
        return STOP
    if _CONFIRMATION.search(agent_text):
        return CONFIRM
    known = str(_instructions(scenario).get("known_info") or "").strip()
    return f"All I can tell you is this: {known}" if known else "I have no more information than that."
