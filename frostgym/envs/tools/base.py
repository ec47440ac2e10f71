"""What every tool-calling env shares: how a structured action becomes reply text."""

from __future__ import annotations

from typing import Any

from frostgym.core.env import FrozenEnv
from frostgym.core.messages import Action
from frostgym.tools.calls import structured_to_text


class ToolCallingEnv(FrozenEnv):
    """A ``FrozenEnv`` whose agents call tools. ``self.tools`` holds the episode's OpenAI
    function schemas (the runner hands them to agents)."""

    tools: list[dict[str, Any]]

    def coerce_action(self, action: Action) -> tuple[str, bool]:
        """A structured ``{"content", "tool_calls"}`` action becomes the equivalent Hermes
        text (``structured_to_text``), so the history and the grader see one form."""
        if isinstance(action, dict) and "tool_calls" in action:
            return super().coerce_action(structured_to_text(action))
        return super().coerce_action(action)
