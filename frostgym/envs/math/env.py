"""``MathEnv``: single-turn math problems, optionally with retry turns after feedback."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from frostgym.core.env import FrozenEnv, Reply
from frostgym.core.grade import call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import ProceduralSource, Task
from frostgym.envs.math.arithmetic import ArithmeticSource
from frostgym.envs.math.fraction_arithmetic import FractionArithmeticSource
from frostgym.envs.math.gsm import GSMSymbolicSource
from frostgym.envs.math.linear_equations import LinearEquationSource
from frostgym.graders.math_answer import DEFAULT_CONFIG, MathGraderConfig, grade_math

SYSTEM_PROMPT = (
    "Solve the problem. Reason step by step inside <think></think>, then give only the "
    "final answer inside <answer></answer>, for example: <think>...</think><answer>42</answer>"
)
RETRY_PROMPT = "Your answer was not accepted ({label}). Try again, ending with <answer>...</answer>."

SOURCES: dict[str, Callable[[], ProceduralSource]] = {
    "gsm_symbolic": GSMSymbolicSource,
    "arithmetic": ArithmeticSource,
    "fraction_arithmetic": FractionArithmeticSource,
    "linear_equations": LinearEquationSource,
}


@cache
def math_source(name: str) -> ProceduralSource:
    """One shared instance per process, so materialised splits are built once."""
    if name not in SOURCES:
        raise ValueError(f"unknown math source {name!r}; expected one of {sorted(SOURCES)}")
    return SOURCES[name]()


class MathEnv(FrozenEnv):
    """A math problem per episode. With ``max_turns > 1`` a wrong answer gets feedback
    (the failure label, never the gold) and another try; the episode's reward is the
    grade of its final attempt."""

    family = "math"
    env_version = "1.0.0"
    grader_distributions = ("math-verify", "sympy")

    def __init__(
        self,
        source: str = "gsm_symbolic",
        *,
        split: Split = "dev",
        max_turns: int = 1,
        render_mode: str | None = None,
        grader_config: MathGraderConfig = DEFAULT_CONFIG,
        system_prompt: str = SYSTEM_PROMPT,
    ) -> None:
        super().__init__(math_source(source), split=split, max_turns=max_turns, render_mode=render_mode)
        self.grader_config = grader_config
        self.system_prompt = system_prompt

    def first_messages(self, task: Task) -> list[Message]:
        return [message("system", self.system_prompt), message("user", task.prompt)]

    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        grade = call_grader(grade_math, text, task.answer, self.grader_config)
        correct = grade.components["correctness"] >= 1.0
        feedback = None if correct else message("user", RETRY_PROMPT.format(label=grade.label))
        return Reply(grade=grade, done=correct or last_turn, feedback=feedback)

    def oracle_action(self) -> str:
        task = self.task
        return f"<think>\n{task.solution}\n</think>\n<answer>{task.answer}</answer>"
