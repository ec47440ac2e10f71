"""Command modules of the ``frostgym`` CLI, one per command family; ``frostgym.cli`` registers them."""
