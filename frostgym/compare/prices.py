"""A declared price table (``frostgym compare --prices FILE``): what each model's tokens cost.

Why declared, not looked up: a release rule on money must be reviewable and reproducible,
so the prices are a file beside the gates, never a vendor's page read at compare time. The
file is TOML, one table per model id, each with two USD prices per million tokens::

    ["Qwen/Qwen2.5-7B-Instruct"]
    input_per_million = 0.30
    output_per_million = 1.20

A card's model id is its agent's ``model`` (what ``describe`` recorded: an OpenAI-compatible
server's model name, an HF model's path), else its agent ``spec`` (``oracle``, ``replay:...``).
A model the table does not price is an error naming it and the models it does price: a cost
of 0 for a model nobody priced would pass every money gate silently.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frostgym.core.errors import PriceFileError

__all__ = ["Price", "PriceFileError", "model_id", "parse_prices", "price_of", "read_prices"]

_KEYS = frozenset({"input_per_million", "output_per_million"})


@dataclass(frozen=True)
class Price:
    """One model's price: USD per million input (prompt) and output (completion) tokens."""

    input_per_million: float
    output_per_million: float

    def dollars(self, input_tokens: float, output_tokens: float) -> float:
        """What ``input_tokens`` and ``output_tokens`` cost, in USD."""
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1e6


def read_prices(path: Path) -> dict[str, Price]:
    """The price table of a TOML file (see the module docstring). Raises ``PriceFileError``
    naming the file and the model for anything it cannot read."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise PriceFileError(f"{path}: cannot read prices: {error}") from None
    return parse_prices(data, str(path))


def parse_prices(data: Mapping[str, Any], where: str = "prices") -> dict[str, Price]:
    """A price table from parsed TOML (``{model id: {input_per_million, output_per_million}}``)."""
    if not data:
        raise PriceFileError(f"{where}: no models; one table per model id: input_per_million, output_per_million")
    prices = {}
    for model, table in data.items():
        if not isinstance(table, dict):
            raise PriceFileError(f"{where}: {model!r} is not a table of input_per_million and output_per_million")
        if unknown := set(table) - _KEYS:
            raise PriceFileError(f"{where}: {model!r} has unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
        values = []
        for key in ("input_per_million", "output_per_million"):
            value = table.get(key)
            if value is None:
                raise PriceFileError(f"{where}: {model!r} has no {key}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise PriceFileError(f"{where}: {model!r} {key} must be a finite number >= 0, got {value!r}")
            values.append(float(value))
        prices[model] = Price(values[0], values[1])
    return prices


def model_id(card: Mapping[str, Any]) -> str:
    """The model id a card's episodes were played by: its agent's ``model``, else its spec."""
    agent = card.get("agent")
    agent = agent if isinstance(agent, Mapping) else {}
    model = agent.get("model")
    if isinstance(model, str) and model:
        return model
    spec = agent.get("spec")
    return spec if isinstance(spec, str) and spec else "agent"


def price_of(prices: Mapping[str, Price], card: Mapping[str, Any], side: str) -> Price:
    """The price of ``card``'s model (``side`` names the card in the error). Raises
    ``PriceFileError`` naming the model when the table does not price it."""
    model = model_id(card)
    price = prices.get(model)
    if price is None:
        known = ", ".join(repr(name) for name in sorted(prices)[:8])
        raise PriceFileError(f"the price table has no model {model!r} (the {side} card's model); it prices {known}")
    return price
