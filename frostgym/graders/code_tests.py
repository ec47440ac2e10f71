"""Grade a coding reply by running the problem's hidden tests against it in a sandbox.

The status is one of a closed set, decided in this order: every test passed
(``passed``: a limit reached after the last test does not matter); the process ran out
of time, memory or output; the code did not compile (``syntax_error``) or raised while
loading (``runtime_error``); or the first failing test failed because the candidate
raised or died (``runtime_error``) or returned a wrong value (``failed``). A sandbox that
fails on its own gives no status: ``SandboxCrashError`` is raised (an ``infra_error``
drop), never a 0 charged to the code.

The score is ``correctness`` (all hidden tests pass), the published HumanEval
criterion. ``tests_passed`` (the fraction) and ``format`` are reported beside it; with
``partial_credit=True`` the score is the fraction instead, a denser training reward.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from frostgym.code.extraction import ExtractedCode, assemble_program, extract_code
from frostgym.code.harness import TestOutcome, TestProgram, compile_examples, compile_hidden_tests, run_tests
from frostgym.core.grade import Grade, GraderSpec
from frostgym.sandbox.client import Sandbox
from frostgym.sandbox.limits import SandboxLimits
from frostgym.sandbox.result import JobResult

CodeStatus = Literal[
    "passed",
    "failed",
    "syntax_error",
    "runtime_error",
    "timeout",
    "memory_exceeded",
    "output_exceeded",
]
STATUSES: tuple[CodeStatus, ...] = get_args(CodeStatus)
GRADER = GraderSpec(
    name="code_tests",
    version="1.2.0",  # what each version changed: CHANGELOG.md
    labels=STATUSES[1:],  # every status but ``passed``
    weights={"correctness": 1.0},
    required=("correctness",),
)
#: The weights with ``partial_credit`` (nothing required): the score is the fraction of tests passed.
PARTIAL_CREDIT_WEIGHTS: Mapping[str, float] = MappingProxyType({"tests_passed": 1.0})
_FORMAT = {"fenced": 1.0, "raw": 0.5, "empty": 0.0}
OUTPUT_CHARS = 2_000


@dataclass(frozen=True)
class CodeGraderConfig:
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    partial_credit: bool = False


DEFAULT_CONFIG = CodeGraderConfig()


@dataclass(frozen=True)
class CodeProblem:
    """What the grader needs of a task (plain data, so graders never import envs)."""

    key: str
    prompt: str
    entry_point: str
    test: str
    examples: Sequence[Sequence[str]] = ()


@dataclass(frozen=True)
class Execution:
    status: CodeStatus
    outcome: TestOutcome | None
    result: JobResult


def status_of(result: JobResult, outcome: TestOutcome | None) -> CodeStatus:
    if outcome is not None and outcome.all_passed:
        return "passed"
    if result.termination in ("timeout", "memory_exceeded", "output_exceeded"):
        return result.termination
    if result.load_error is not None:
        return "syntax_error" if result.load_stage == "compile" else "runtime_error"
    if outcome is None:
        return "runtime_error"  # the process ended before its code finished loading
    if outcome.failure is not None and outcome.failure.kind == "candidate_error":
        return "runtime_error"
    return "failed"


def execute(
    program_source: str, tests: TestProgram, entry_point: str, sandbox: Sandbox, limits: SandboxLimits
) -> Execution:
    """Run ``tests`` against ``program_source``; never raises for anything the code does.

    A sandbox that fails on its own (server lost, job not set up, backend unavailable)
    raises ``SandboxCrashError``: the run has no verdict, and a runner drops the episode
    as ``infra_error`` rather than charge it to the code."""
    job = sandbox.job(program_source, limits)
    with job:
        outcome = run_tests(tests, job, entry_point) if job.loaded else None
    result = job.finish()
    return Execution(status_of(result, outcome), outcome, result)


def answer_key(code: str) -> str:
    """Same program, same key (comments and layout aside): what maj@k votes on."""
    try:
        text = ast.dump(ast.parse(code))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        text = code.strip()
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def grade_code(reply: str, problem: CodeProblem, sandbox: Sandbox, config: CodeGraderConfig = DEFAULT_CONFIG) -> Grade:
    extracted = extract_code(reply, problem.entry_point)
    program = assemble_program(problem.prompt, extracted)
    tests = compile_hidden_tests(problem.prompt, problem.test, problem.key)
    run = execute(program, tests, problem.entry_point, sandbox, config.limits)
    return _grade(run, extracted, config)


def run_visible_examples(code_reply: str, problem: CodeProblem, sandbox: Sandbox, limits: SandboxLimits) -> Execution:
    """The ``run_tests`` tool: the docstring examples only."""
    extracted = extract_code(code_reply, problem.entry_point)
    program = assemble_program(problem.prompt, extracted)
    tests = compile_examples(problem.prompt, problem.examples, problem.entry_point, problem.key)
    return execute(program, tests, problem.entry_point, sandbox, limits)


def _grade(run: Execution, extracted: ExtractedCode, config: CodeGraderConfig) -> Grade:
    outcome = run.outcome
    passed = outcome.passed if outcome else 0
    total = outcome.total if outcome else 0
    fraction = passed / total if total else 0.0
    correct = 1.0 if run.status == "passed" else 0.0
    components = {"correctness": correct, "tests_passed": fraction, "format": _FORMAT[extracted.where]}
    partial = config.partial_credit
    return Grade.weighted(
        GRADER,
        components=components,
        label=None if run.status == "passed" else run.status,
        details=execution_details(run, extracted),
        weights=PARTIAL_CREDIT_WEIGHTS if partial else None,
        required=() if partial else None,
    )


def execution_details(run: Execution, extracted: ExtractedCode | None = None) -> dict[str, Any]:
    result, outcome = run.result, run.outcome
    details: dict[str, Any] = {
        "status": run.status,
        "tests_passed": outcome.passed if outcome else 0,
        "tests_total": outcome.total if outcome else 0,
        "termination": result.termination,
    }  # no timings or backend: a grade is a pure function of the reply (replay compares it)
    if result.detail:
        details["limit"] = result.detail
    if result.exit_code not in (None, 0):
        details["exit_code"] = result.exit_code
    if result.signal is not None:
        details["signal"] = result.signal
    if result.load_error is not None:
        details["load_error"] = {
            "stage": result.load_stage,
            "type": result.load_error.type,
            "message": result.load_error.message,
        }
    if outcome is not None and outcome.failure is not None:
        failure = outcome.failure
        details["first_failure"] = {
            "test": failure.test,
            "source": failure.source[:500],
            "kind": failure.kind,
            "type": failure.error.type,
            "message": failure.error.message[:500],
        }
    if result.output:
        details["output"] = result.output[:OUTPUT_CHARS]
    if extracted is not None:
        details["code_from"] = extracted.where
        details["answer_key"] = answer_key(extracted.code)
        if extracted.truncated:
            details["code_truncated"] = True
    return details
