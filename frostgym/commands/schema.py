"""``frostgym schema``: the published JSON Schemas of a card's files."""

from __future__ import annotations

import json
from typing import Annotated

import typer


def schema_cmd(
    which: Annotated[str, typer.Argument(help="card | plan | episode | drop")] = "card",
) -> None:
    """Print the published JSON Schema of card.json, plan.json, an episodes.jsonl line or a drops.jsonl line."""
    from frostgym.cards.schema import SCHEMAS

    if which not in SCHEMAS:
        raise typer.BadParameter(f"expected one of {', '.join(SCHEMAS)}, got {which!r}")
    typer.echo(json.dumps(SCHEMAS[which], indent=1))
