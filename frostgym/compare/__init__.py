"""Deciding between checkpoints: paired comparison of two rollout cards, release gates, diagnostics.

``compare_cards`` pairs two cards' episodes by plan identity and reports every view with a
paired bootstrap interval (clustered by task) and McNemar's test; ``read_gates`` reads a TOML
release rule and ``judge`` judges it; ``trend`` follows a series of checkpoints. The command
line is ``frostgym compare`` and ``frostgym trend`` (``frostgym.commands.compare``). The public
API is the names below (imported on first use)."""

from typing import TYPE_CHECKING

from frostgym.core.lazy import lazy_exports

if TYPE_CHECKING:
    from frostgym.compare.compare import Comparison, compare_cards
    from frostgym.compare.gates import Gate, GateResult, judge, parse_gates, read_gates
    from frostgym.compare.trend import trend

__all__ = ["Comparison", "Gate", "GateResult", "compare_cards", "judge", "parse_gates", "read_gates", "trend"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Comparison": "frostgym.compare.compare",
        "Gate": "frostgym.compare.gates",
        "GateResult": "frostgym.compare.gates",
        "compare_cards": "frostgym.compare.compare",
        "judge": "frostgym.compare.gates",
        "parse_gates": "frostgym.compare.gates",
        "read_gates": "frostgym.compare.gates",
        "trend": "frostgym.compare.trend",
    },
)
