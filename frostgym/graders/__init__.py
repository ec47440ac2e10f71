"""Graders: pure, deterministic functions of (task data, model output) to a ``Grade``.

Graders import nothing from ``frostgym.envs``; envs call graders. Each grader module
declares itself once, as ``GRADER`` (a ``frostgym.core.grade.GraderSpec``: name, version,
labels, default weights and required components), and ships an adversarial suite in
``frostgym/fixtures/adversarial/`` (see ``adversarial.py``).
"""

from frostgym.graders.math_answer import GRADER as MATH_GRADER
from frostgym.graders.math_answer import MathGraderConfig, grade_math

__all__ = ["MATH_GRADER", "MathGraderConfig", "grade_math"]
