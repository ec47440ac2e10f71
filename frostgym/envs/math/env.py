"""``MathEnv``: single-turn math problems, optionally with retry turns after feedback."""

from __future__ import annotations

from frostgym.core.env import FrozenEnv, Reply
from frostgym.core.grade import call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.envs.math.tasks import math_source
from frostgym.graders.math_answer import DEFAULT_CONFIG, MathGraderConfig, grade_math

SYSTEM_PROMPT = (
    "Solve the problem. Reason step by step inside <think></think>, then give only the "
    "final answer inside <answer></answer>, for example: <think>...</think><answer>42</answer>"
)
RETRY_PROMPT = "Your answer was not accepted ({label}). Try again, ending with <answer>...</answer>."


class MathEnv(FrozenEnv):
    """A math problem per episode, answered inside ``<answer></answer>``. With
    ``max_turns > 1`` a wrong answer gets feedback (the failure label, never the gold) and
    another try; the episode's reward is the grade of its final attempt.

    Arguments:
        source: the generator (``frostgym.envs.math.tasks.SOURCES``); each id fixes one.
        level: one of the generator's levels (1 = easiest; ``frostgym list --levels`` or
            ``frostgym.envs.levels.env_levels`` lists them), or None for the default config,
            itself a level (``default_level``). Another level gives other tasks, under ids
            that name it (``arithmetic~L1/dev/4``), each level locked on its own.
            ``ValueError`` lists the levels for one that is not.
        task_config: that generator's config (``ArithmeticConfig``, ``FractionConfig``,
            ``LinearConfig``, ``GSMConfig``), as the dataclass or a JSON mapping of some of
            its fields; None is the default. With ``level``, a mapping whose fields are set
            on the level's config. ``ValueError`` names the accepted keys for an
            unknown one. A config that is no level gives other tasks, under tagged ids
            (``arithmetic~3f9a2c1b/dev/4``); unless a lock holds it, its content hash is
            computed once per process (``frostgym.core.fixture_lock``).
        split: the split ``reset`` draws from. ``train`` is unbounded; dev (200), test and
            private (500 each; fewer at a level with fewer distinct tasks) are fixed, and a
            task belongs to the split its prompt hashes into, at every level, so no two
            splits share a question. Each eval task has a twin, its id plus ``~twin``
            (``arithmetic~L1/test/5~twin``: the same template or expression with new
            values, ``TaskSource.twin``), which ``reset(options={"task_id": ...})`` serves.
        max_turns: attempts per episode (>= 1).
        grader_config, system_prompt: how answers are graded and what the agent is told.

    ``reset`` raises ``ValueError`` for an unknown option or split, ``UnknownTaskError``
    for a task id this source (with this config) does not have, and
    ``FixtureMismatchError`` when the generated data does not match its lock (another
    reasoning-gym, say). ``step`` raises ``EpisodeNotActiveError`` outside an episode and
    ``InvalidActionError`` for an action that is not text; a wrong or unreadable answer
    is a graded failure, never an exception.
    """

    family = "math"
    env_version = "1.0.0"
    grader_distributions = ("math-verify", "sympy")

    def __init__(
        self,
        source: str = "gsm_symbolic",
        *,
        level: int | None = None,
        task_config: object = None,
        split: Split = "dev",
        max_turns: int = 1,
        render_mode: str | None = None,
        grader_config: MathGraderConfig = DEFAULT_CONFIG,
        system_prompt: str = SYSTEM_PROMPT,
    ) -> None:
        super().__init__(
            math_source(source, task_config, level), split=split, max_turns=max_turns, render_mode=render_mode
        )
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
