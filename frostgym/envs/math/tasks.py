"""The math family's task sources, by name.

Every source here is a ``ProceduralSource`` with a config (``ArithmeticConfig``,
``FractionConfig``, ``LinearConfig``, ``GSMConfig``), settable through
``gym.make(id, task_config={...})``.
"""

from __future__ import annotations

from frostgym.core.tasks import ProceduralSource, shared_source
from frostgym.envs.math.arithmetic import ArithmeticSource
from frostgym.envs.math.fraction_arithmetic import FractionArithmeticSource
from frostgym.envs.math.gsm import GSMSymbolicSource
from frostgym.envs.math.linear_equations import LinearEquationSource

SOURCES: dict[str, type[ProceduralSource]] = {
    "gsm_symbolic": GSMSymbolicSource,
    "arithmetic": ArithmeticSource,
    "fraction_arithmetic": FractionArithmeticSource,
    "linear_equations": LinearEquationSource,
}


def math_source(name: str, config: object = None) -> ProceduralSource:
    """The shared source ``name`` with ``config`` (its config dataclass, a mapping of its
    fields, or None for the default): one instance per process and config, so
    materialised splits are built once. ``ValueError`` for an unknown name or a bad config."""
    if name not in SOURCES:
        raise ValueError(f"unknown math source {name!r}; expected one of {sorted(SOURCES)}")
    return shared_source(SOURCES[name], config)
