"""``DigitsEnv``: one question, one reply (reasoning in ``<think>``, the number in
``<answer>``), graded by the math grader."""

from __future__ import annotations

from pathlib import Path

from frostgym.core.env import FrozenEnv, Reply
from frostgym.core.grade import call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.graders.math_answer import grade_math
from tests.family_example.tasks import digits_source

#: Where this family's lock lives: beside its code, as for any family kept outside
#: frostgym (the test points it at a temporary folder).
LOCK_FILE = Path(__file__).with_name("lock.json")


class DigitsEnv(FrozenEnv):
    """A digits question per episode.

    Arguments: ``source`` (``digit_sum`` or ``roman``), ``task_config`` (the source's
    config, if it has one), ``split``, ``render_mode``. ``reset`` and ``step`` raise what
    ``FrozenEnv``'s do.
    """

    family = "digits"
    env_version = "1.0.0"
    grader_distributions = ("math-verify", "sympy")

    def __init__(
        self,
        source: str = "digit_sum",
        *,
        task_config: object = None,
        split: Split = "dev",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(digits_source(source, task_config), split=split, max_turns=1, render_mode=render_mode)

    @property
    def lock_file(self) -> Path:
        return LOCK_FILE

    def first_messages(self, task: Task) -> list[Message]:
        return [message("user", task.prompt)]

    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        return Reply(grade=call_grader(grade_math, text, task.answer), done=True)

    def oracle_action(self) -> str:
        task = self.task
        return f"<think>{task.solution}</think><answer>{task.answer}</answer>"
