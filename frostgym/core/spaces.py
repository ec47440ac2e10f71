"""Gymnasium spaces for chat observations and text actions.

Gymnasium's ``Text`` space limits characters to a fixed charset (alphanumerics by
default), which real model output never respects, so these spaces check structure
and length instead.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
from gymnasium import spaces

from frostgym.core.messages import ROLES, Message, Observation

T = TypeVar("T")
_SAMPLE_ALPHABET = np.array(list("abcdefghijklmnopqrstuvwxyz0123456789 <>/.,!?"))


def _sample_text(rng: np.random.Generator, max_chars: int) -> str:
    n = int(rng.integers(0, max_chars + 1))
    return "".join(rng.choice(_SAMPLE_ALPHABET, size=n).tolist())


class _FreeFormSpace(spaces.Space[T]):
    """Shared by spaces of text-like values: no shape, no dtype, no flattening, no masks."""

    def __init__(self, seed: int | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def _check_no_mask(self, mask: Any, probability: Any) -> None:
        if mask is not None or probability is not None:
            raise NotImplementedError(f"{type(self).__name__}.sample takes no mask or probability")


class ChatObservationSpace(_FreeFormSpace[Observation]):
    """A conversation: a list of ``{"role", "content"}`` messages (OpenAI chat format)."""

    def __init__(self, max_messages: int = 256, max_chars: int = 2_000_000, seed: int | None = None):
        self.max_messages = max_messages
        self.max_chars = max_chars
        super().__init__(seed=seed)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list) or len(x) > self.max_messages:
            return False
        return all(self._is_message(m) for m in x)

    def _is_message(self, m: Any) -> bool:
        return (
            isinstance(m, dict)
            and m.get("role") in ROLES
            and isinstance(m.get("content"), str)
            and len(m["content"]) <= self.max_chars
        )

    def sample(self, mask: Any = None, probability: Any = None) -> Observation:
        self._check_no_mask(mask, probability)
        rng = self.np_random
        messages: Observation = [{"role": "user", "content": _sample_text(rng, 64)}]
        for _ in range(int(rng.integers(0, 3))):
            role = "assistant" if messages[-1]["role"] == "user" else "user"
            messages.append(Message(role=role, content=_sample_text(rng, 64)))  # type: ignore[typeddict-item]
        return messages

    def __repr__(self) -> str:
        return f"ChatObservationSpace(max_messages={self.max_messages}, max_chars={self.max_chars})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ChatObservationSpace)
            and other.max_messages == self.max_messages
            and other.max_chars == self.max_chars
        )


class TextActionSpace(_FreeFormSpace[str]):
    """The assistant's reply as a string of at most ``max_chars`` characters.

    Longer strings are still accepted by ``step`` (and graded as ``too_long``); the
    bound here documents what a well-behaved policy emits.
    """

    def __init__(self, max_chars: int = 1_000_000, seed: int | None = None):
        self.max_chars = max_chars
        super().__init__(seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_chars

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        self._check_no_mask(mask, probability)
        return _sample_text(self.np_random, 128)

    def __repr__(self) -> str:
        return f"TextActionSpace(max_chars={self.max_chars})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextActionSpace) and other.max_chars == self.max_chars
