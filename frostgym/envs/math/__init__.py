"""The math family: GSM-style word problems, arithmetic, fractions, linear equations."""

from frostgym.envs.math.env import MathEnv
from frostgym.envs.math.tasks import SOURCES, math_source

__all__ = ["SOURCES", "MathEnv", "math_source"]
