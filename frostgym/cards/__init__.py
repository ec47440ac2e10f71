"""Rollout cards, the on-disk format of a run: ``card`` (the writer and readers), ``store``
(files, checksums, atomic writes), ``readback`` and ``tally`` (checking a large card as it is
written), ``schema`` (its JSON Schemas), ``views`` (score views), ``summary``, ``provenance``
and ``twin_gap``. Playing a plan into a card, replaying and regrading one: ``frostgym.evaluate``.

The public API is the names below (imported on first use); the rest is the format's machinery."""

from typing import TYPE_CHECKING

from frostgym.core.lazy import lazy_exports

if TYPE_CHECKING:
    from frostgym.cards.card import CardWriter, load_card, read_card_json, summarize_card
    from frostgym.cards.schema import SCHEMAS

__all__ = ["SCHEMAS", "CardWriter", "load_card", "read_card_json", "summarize_card"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CardWriter": "frostgym.cards.card",
        "SCHEMAS": "frostgym.cards.schema",
        "load_card": "frostgym.cards.card",
        "read_card_json": "frostgym.cards.card",
        "summarize_card": "frostgym.cards.card",
    },
)
