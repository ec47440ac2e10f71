"""The coding grader's adversarial suite, run for real in every backend this machine has.

Every known-bad reply must score 0 with its pinned status, finish within its limits
(never hang the grader), and leave the fork server alive for the next task.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from frostgym.code.extraction import assemble_program, extract_code
from frostgym.code.harness import compile_hidden_tests, run_tests
from frostgym.core.grade import Grade
from frostgym.graders.adversarial import AdversarialCase, run_suite
from frostgym.graders.code_tests import GRADER, CodeGraderConfig, grade_code
from frostgym.sandbox.backends import BackendName
from frostgym.sandbox.client import Sandbox
from tests.code_helpers import FAST_LIMITS, open_sandbox, problem

pytestmark = pytest.mark.slow

CASE_BUDGET_S = 12.0


class Listener:
    """A real loopback TCP listener on the host that counts connections."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        self.server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


@pytest.fixture(params=["jail", "unshare", "docker"])
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    backend: BackendName = request.param
    box = open_sandbox(backend)
    try:
        yield box
    finally:
        box.close()


def test_adversarial_suite_is_contained(sandbox: Sandbox, tmp_path: Path) -> None:
    listener = Listener()
    canary = Path("/tmp") / f"frostgym-canary-{uuid.uuid4().hex}"
    config = CodeGraderConfig(limits=FAST_LIMITS)
    slow: list[str] = []

    def grade(case: AdversarialCase) -> Grade:
        reply = case.reply.replace("{PORT}", str(listener.port)).replace("{CANARY}", str(canary))
        started = time.monotonic()
        result = grade_code(reply, problem(case.gold), sandbox, config)
        if time.monotonic() - started > CASE_BUDGET_S:
            slow.append(case.id)
        return result

    try:
        report = run_suite("code", grade, GRADER)
    finally:
        listener.close()
    assert report.passed, report.render()
    assert not slow, f"cases over {CASE_BUDGET_S} s: {slow}"
    assert listener.accepted == 0, "a sandboxed task reached a host loopback listener"
    assert not canary.exists(), "a sandboxed task wrote to the host's /tmp"
    assert sandbox.restarts == 0, "the fork server died during the suite"
    # The server is still warm and correct after everything above.
    after = grade_code("    return x + y\n", problem("humaneval/test/53"), sandbox, config)
    assert after.score == 1.0, after.details


def test_a_task_at_its_memory_limit_is_not_called_again(sandbox: Sandbox) -> None:
    """Each call that grows to the limit again costs CPU time; six of them under CI load
    crossed the CPU limit and relabelled ``memory-growth`` a timeout. The first one decides."""
    gold = problem("humaneval/test/53")
    grower = "def add(x, y):\n    blocks = []\n    while True:\n        blocks.append(bytearray(10**7))\n"
    tests = compile_hidden_tests(gold.prompt, gold.test, gold.key)
    with sandbox.job(assemble_program(gold.prompt, extract_code(grower, gold.entry_point)), FAST_LIMITS) as job:
        outcome = run_tests(tests, job, gold.entry_point)
        assert job.calls == 1 and job.limit_reached
    assert outcome.passed == 0 and outcome.failures == outcome.total > 1
    assert job.finish().termination == "memory_exceeded"
