"""Graders: pure, deterministic functions of (task data, model output) to a ``Grade``.

Graders import nothing from ``frostgym.envs``; envs call graders. Each grader ships an
adversarial suite in ``frostgym/fixtures/adversarial/`` (see ``adversarial.py``).
"""

from frostgym.graders.math_answer import GRADER_VERSION as MATH_GRADER_VERSION
from frostgym.graders.math_answer import MathGraderConfig, grade_math

__all__ = ["MATH_GRADER_VERSION", "MathGraderConfig", "grade_math"]
