"""Exports of a rollout card to other tools' formats, one module per format.

Why its own package: the card is frostgym's evidence and stays its own format; an export
is a read-only translation of a card for a tool that has a viewer or pipeline of its own
(``inspect_log``: inspect_ai's eval log, for ``inspect view``). Each export's library is
an optional extra, imported only when that export runs.
"""
