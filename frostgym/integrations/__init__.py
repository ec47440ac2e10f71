"""What a trainer reads from frostgym: the token-level trajectories of a run, typed.

Why a package of its own: a trainer needs what the model actually saw and produced, as
token ids, with the loss mask and the reward beside them. Rebuilding that from a card's text
(re-applying the chat template, re-tokenising each completion) is the classic silent bug of
multi-turn RL: a template that strips ``<think>`` from earlier turns, or a completion that
re-tokenises differently, trains the policy on sequences it never produced. The agents
record the ids as they are (``frostgym.core.episode.TokenTrace`` on each step); this is the
one reader that hands them to a trainer, so every trainer adapter reads them the same way
and none re-tokenises. It sits above the card (it reads card directories) and beside
``frostgym.train``; the public API is the names below (imported on first use).
"""

from typing import TYPE_CHECKING

from frostgym.core.lazy import lazy_exports

if TYPE_CHECKING:
    from frostgym.integrations.tokens import TokenTurn, card_token_turns, token_turns

__all__ = ["TokenTurn", "card_token_turns", "token_turns"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "TokenTurn": "frostgym.integrations.tokens",
        "card_token_turns": "frostgym.integrations.tokens",
        "token_turns": "frostgym.integrations.tokens",
    },
)
