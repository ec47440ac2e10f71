"""frostgym: frozen, seeded Gymnasium environments for LLM agents.

``import frostgym`` registers every ``frostgym/...`` id with Gymnasium (``gym.make`` then
makes them) and imports nothing else. The names below are the public API a user calls; each
is imported on first use (``frostgym.core.lazy``). Reference: docs/README.md.
"""

from typing import TYPE_CHECKING

from frostgym.core.errors import FrostgymError
from frostgym.core.grade import Grade
from frostgym.core.lazy import lazy_exports
from frostgym.envs.registry import ENTRIES, register_envs
from frostgym.version import __version__

if TYPE_CHECKING:
    from frostgym.agents.spec import make_agent
    from frostgym.cards.card import load_card
    from frostgym.compare.compare import compare_cards
    from frostgym.core.env import FrozenEnv, Reply
    from frostgym.evaluate.replay import regrade_card, replay_card
    from frostgym.evaluate.run_to_card import card_config, run_to_card
    from frostgym.run.runner import RunOptions, evaluate
    from frostgym.train.vector import make_vector_env

register_envs()

_EXPORTS = {
    "FrozenEnv": "frostgym.core.env",
    "Reply": "frostgym.core.env",
    "RunOptions": "frostgym.run.runner",
    "evaluate": "frostgym.run.runner",
    "card_config": "frostgym.evaluate.run_to_card",
    "run_to_card": "frostgym.evaluate.run_to_card",
    "replay_card": "frostgym.evaluate.replay",
    "regrade_card": "frostgym.evaluate.replay",
    "load_card": "frostgym.cards.card",
    "compare_cards": "frostgym.compare.compare",
    "make_agent": "frostgym.agents.spec",
    "make_vector_env": "frostgym.train.vector",
}
__getattr__, _dir = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted({*__all__, *_dir()})


__all__ = [
    "ENTRIES",
    "FrostgymError",
    "FrozenEnv",
    "Grade",
    "Reply",
    "RunOptions",
    "__version__",
    "card_config",
    "compare_cards",
    "evaluate",
    "load_card",
    "make_agent",
    "make_vector_env",
    "register_envs",
    "regrade_card",
    "replay_card",
    "run_to_card",
]
