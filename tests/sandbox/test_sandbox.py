"""The sandbox core, for real: a fork server in bubblewrap (and the fallbacks)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from frostgym.core.errors import SandboxUnavailableError, ServerLostError
from frostgym.sandbox.backends import resolve_backend
from frostgym.sandbox.client import CallError, Sandbox
from frostgym.sandbox.forkserver import FrameError, decode_value, encode_value
from frostgym.sandbox.jail import InsecureLauncher, SubprocessServer
from frostgym.sandbox.limits import SandboxLimits
from frostgym.sandbox.pool import thread_sandbox
from tests.code_helpers import FAST_LIMITS, open_sandbox


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(2**80),
        1.5,
        float("inf"),
        -0.0,
        "é\ud800",
        b"\x00\xff",
        1 + 2j,
        [1, (2, {3})],
        {"a": frozenset({1})},
    ],
)
def test_wire_values_round_trip_exactly(value: object) -> None:
    back = decode_value(encode_value(value))
    assert back == value and type(back) is type(value)
    assert repr(back) == repr(value)


def test_wire_refuses_behaviour_and_forgeries() -> None:
    class Sly(int):
        def __eq__(self, other: object) -> bool:
            return True

    for bad in (object(), [object()], {"k": lambda: 1}):
        with pytest.raises(FrameError):
            encode_value(bad)
    # A builtin subclass crosses as its plain base value: its behaviour stays behind.
    for sly, plain in ((Sly(1), 1), ([Sly(2)], [2])):
        arrived = decode_value(encode_value(sly))
        assert arrived == plain and arrived != [3] and arrived != 3
        assert type(arrived) is type(plain) and all(
            type(v) is int for v in (arrived if type(arrived) is list else [arrived])
        )
    for forged in ({"x": 1}, {"l": [1], "t": [2]}, {"f": "not-hex"}, [1, 2], 1.5):
        with pytest.raises(FrameError):
            decode_value(forged)


def test_insecure_backend_needs_explicit_consent() -> None:
    with pytest.raises(SandboxUnavailableError, match="allow_insecure"):
        resolve_backend("insecure")


def test_insecure_backend_removes_its_scratch_root() -> None:
    box = Sandbox(InsecureLauncher()).start()
    server = box._server
    assert isinstance(server, SubprocessServer) and server.scratch_root is not None
    with box.job("def f():\n    return 1\n", FAST_LIMITS) as job:
        assert job.call("f") == 1
    box.close()
    assert not os.path.exists(server.scratch_root)
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        resolve_backend("chroot")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jail", "unshare"])
def test_calls_limits_and_isolation(backend: str) -> None:
    box = open_sandbox(backend)  # type: ignore[arg-type]
    try:
        source = (
            "import os\ndef who():\n    return [os.getuid(), os.getpid(), os.getcwd()]\n"
            "def boom():\n    raise KeyError('x')\n"
        )
        with box.job(source, FAST_LIMITS) as job:
            uid, pid, cwd = job.call("who")
            with pytest.raises(CallError, match="KeyError"):
                job.call("boom")
        assert uid != 0 and pid == 1 and "scratch" in cwd
        result = job.finish()
        assert result.ok and result.backend == backend

        started = time.monotonic()
        looping = box.run_script("while True:\n    pass\n", FAST_LIMITS)
        assert looping.termination == "timeout" and time.monotonic() - started < 5
        assert box.run_script("x = bytearray(2**33)\n", FAST_LIMITS).termination == "memory_exceeded"
        printed = box.run_script("print('hello')\n", FAST_LIMITS)
        assert printed.output == "hello\n" and printed.ok
    finally:
        box.close()


def test_dead_server_is_respawned_and_the_task_raises_server_lost() -> None:
    box = open_sandbox("jail")
    try:
        job = box.job("import time\ndef wait():\n    time.sleep(30)\n", SandboxLimits(cpu_seconds=1, wall_seconds=20))
        server = box._server
        assert server is not None
        threading.Timer(0.3, lambda: os.killpg(server.process.pid, 9)).start()  # type: ignore[attr-defined]
        with pytest.raises(CallError):
            job.call("wait")
        with pytest.raises(ServerLostError, match="fork server lost") as lost:
            job.finish()
        assert lost.value.drop_class == "infra_error"  # the runner's drop, never a verdict
        with box.job("def f():\n    return 7\n", FAST_LIMITS) as again:
            assert again.call("f") == 7
        assert box.restarts == 1
    finally:
        box.close()


def test_each_thread_gets_its_own_warm_sandbox() -> None:
    open_sandbox("jail").close()  # skips with the reason where the jail cannot run
    seen: dict[str, int] = {}

    def work(name: str) -> None:
        box = thread_sandbox("jail")
        assert thread_sandbox("jail") is box
        with box.job("def f(x):\n    return x * 2\n", FAST_LIMITS) as job:
            seen[name] = job.call("f", 21)
        seen[name + "-id"] = id(box)

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["t0"] == seen["t1"] == 42 and seen["t0-id"] != seen["t1-id"]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def _is_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    return os.path.basename(argv[0]).startswith(b"python") and any(a.endswith(b"forkserver.py") for a in argv)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _spares(launcher_pid: int) -> list[int]:
    """Processes forked by a fork server: with no task running, only its spare."""
    found: list[int] = []
    stack = [launcher_pid]
    while stack:
        pid = stack.pop()
        for child in _children(pid):
            if _is_server(pid) and _is_server(child):
                found.append(child)
            else:
                stack.append(child)
    return found


@pytest.mark.parametrize("backend", ["jail", "unshare"])
def test_a_spare_that_dies_is_replaced_and_the_server_survives(backend: str) -> None:
    box = open_sandbox(backend)  # type: ignore[arg-type]
    try:
        for _ in range(3):
            with box.job("import os\ndef pid():\n    return os.getpid()\n", FAST_LIMITS) as job:
                assert job.call("pid") == 1  # every task is its own namespace's init
            assert job.finish().ok
            server = box._server
            assert server is not None
            deadline = time.monotonic() + 5
            spares = _spares(server.process.pid)  # type: ignore[attr-defined]
            while not spares and time.monotonic() < deadline:
                time.sleep(0.01)
                spares = _spares(server.process.pid)  # type: ignore[attr-defined]
            assert len(spares) == 1, spares
            os.kill(spares[0], 9)
            while _state(spares[0]) not in ("Z", "gone"):  # dead before the next task starts
                time.sleep(0.001)
        with box.job("def f():\n    return 7\n", FAST_LIMITS) as again:
            assert again.call("f") == 7
        assert again.finish().ok and box.restarts == 0
    finally:
        box.close()
