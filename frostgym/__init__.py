"""frostgym: frozen, seeded Gymnasium environments for LLM agents.

``import frostgym`` registers every ``frostgym/...`` id with Gymnasium.
"""

from frostgym.core.grade import Grade
from frostgym.envs.registry import ENTRIES, register_envs
from frostgym.version import __version__

register_envs()

__all__ = ["ENTRIES", "Grade", "__version__", "register_envs"]
