"""``frostgym summary``: a card's accounting, drops and headline views, also of a card still being written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frostgym.commands.common import console


def summary_cmd(card_dir: Annotated[Path, typer.Argument(help="A card directory.")]) -> None:
    """Print a card's accounting, drops and headline views."""
    from frostgym.cards.card import load_card, summarize_card
    from frostgym.cards.summary import print_summary

    card, _, drops = load_card(card_dir)
    if "accounting" not in card:  # never closed: its run is going on, or was killed
        card = {**card, **summarize_card(card_dir, card, "running", torn="ignore")}
        console.print(
            f"[yellow]{card_dir} is still running, or its run was killed: figures from the files as they are now; "
            "finish it with the same eval command plus --resume[/yellow]"
        )
    print_summary(console, card, drops)
