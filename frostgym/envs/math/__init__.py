"""The math family: GSM-style word problems, arithmetic, fractions, linear equations."""

from frostgym.envs.math.env import SOURCES, MathEnv, math_source

__all__ = ["SOURCES", "MathEnv", "math_source"]
