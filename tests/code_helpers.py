"""Shared pieces for the coding tests: real sandboxes per backend, skipped with a reason
where a backend cannot run on this machine."""

from __future__ import annotations

import pytest

from frostgym.envs.code.env import problem_of
from frostgym.envs.code.tasks import humaneval_source
from frostgym.graders.code_tests import CodeProblem
from frostgym.sandbox.backends import BackendName, make_launcher, unavailable_reason
from frostgym.sandbox.client import Sandbox
from frostgym.sandbox.limits import SandboxLimits

FAST_LIMITS = SandboxLimits(cpu_seconds=1.0, wall_seconds=3.0, memory_bytes=256 * 1024 * 1024)


def problem(task_id: str) -> CodeProblem:
    return problem_of(humaneval_source().task_by_id(task_id))


def open_sandbox(backend: BackendName) -> Sandbox:
    reason = unavailable_reason(backend)
    if reason is not None:
        pytest.skip(f"sandbox backend {backend!r} cannot run here: {reason}")
    return Sandbox(make_launcher(backend)).start()
