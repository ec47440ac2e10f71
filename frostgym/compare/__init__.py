"""Deciding between checkpoints: paired comparison of two rollout cards, release gates, diagnostics.

``compare.compare_cards`` pairs two cards' episodes by plan identity and reports every view
with a paired bootstrap interval (clustered by task) and McNemar's test; ``gates`` reads a
TOML release rule and judges it; ``trend`` follows a series of checkpoints. The command
line is ``frostgym compare`` and ``frostgym trend`` (``frostgym.commands.compare``).
"""
