"""A math env whose episodes fail for real, by task: the test bed for drops.

Tasks are sorted into kinds by their index. ``sandbox_timeout`` tasks run a child
process that sleeps past its time limit, ``sandbox_oom`` tasks one that allocates past
its address-space limit, and ``grader_error`` tasks grade with a grader that raises.
Everything else grades normally. Registered as ``frostgym-test/Faulty-v0``.
"""

from __future__ import annotations

import resource
import subprocess
import sys

import gymnasium

from frostgym.core.env import Reply
from frostgym.core.errors import SandboxMemoryError, SandboxTimeoutError
from frostgym.core.grade import Grade, GraderSpec, call_grader
from frostgym.core.tasks import Task
from frostgym.envs.math.env import MathEnv

FAULTY_ID = "frostgym-test/Faulty-v0"
KINDS = ("sandbox_timeout", "grader_error", "sandbox_oom", "ok", "ok", "ok", "ok")


def kind_of(task_id: str) -> str:
    return KINDS[int(task_id.rsplit("/", 1)[1]) % len(KINDS)]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (256 * 2**20, 256 * 2**20))


def _run_untrusted(code: str, timeout: float) -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code],
            capture_output=True,
            timeout=timeout,
            preexec_fn=_limit_memory,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise SandboxTimeoutError(f"untrusted code ran past {timeout} s") from error
    if b"MemoryError" in done.stderr:
        raise SandboxMemoryError("untrusted code ran past 256 MiB")


_BROKEN = GraderSpec(name="broken", version="0", labels=(), weights={"correctness": 1.0}, required=("correctness",))


def _broken_grader(reply: str, gold: str) -> Grade:
    return Grade.weighted(
        _BROKEN,
        components={"correctness": float(reply == gold) / 0},  # a grader bug
        label=None,
        details={},
    )


class FaultyEnv(MathEnv):
    def __init__(self, **kwargs: object) -> None:
        super().__init__("arithmetic", **kwargs)  # type: ignore[arg-type]

    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        kind = kind_of(task.task_id)
        if kind == "sandbox_timeout":
            _run_untrusted("import time; time.sleep(30)", 0.5)
        elif kind == "sandbox_oom":  # fails at once; the long limit keeps a slow start on a loaded box from timing out
            _run_untrusted("x = bytearray(1024 * 2**20)", 30.0)
        elif kind == "grader_error":
            call_grader(_broken_grader, text, task.answer)
        return super().respond(task, text, turn, last_turn)


if FAULTY_ID not in gymnasium.registry:
    gymnasium.register(FAULTY_ID, entry_point=FaultyEnv, disable_env_checker=True)
