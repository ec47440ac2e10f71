"""The math family's task sources, by name.

Every source here is a ``ProceduralSource`` with a config (``ArithmeticConfig``,
``FractionConfig``, ``LinearConfig``, ``GSMConfig``), settable through
``gym.make(id, task_config={...})``, and with levels (``gym.make(id, level=1)``), each a
named config.
"""

from __future__ import annotations

from frostgym.core.tasks import ProceduralSource, shared_source
from frostgym.envs.levels import level_config
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


def math_source(name: str, config: object = None, level: int | None = None) -> ProceduralSource:
    """The shared source ``name`` with ``config`` (its config dataclass, a mapping of its
    fields, or None for the default) at ``level`` (None: the config alone; else that
    level's config with ``config``'s fields on top, ``frostgym.envs.levels.level_config``):
    one instance per process and config, so materialised splits are built once.
    ``ValueError`` for an unknown name, level or a bad config."""
    if name not in SOURCES:
        raise ValueError(f"unknown math source {name!r}; expected one of {sorted(SOURCES)}")
    return shared_source(SOURCES[name], level_config(SOURCES[name], level, config))
