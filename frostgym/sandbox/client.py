"""The host side of a fork server: start jobs, call their functions, classify how they end.

Backends differ only in how the server process is launched (``Launcher``); everything a
job can do to the host goes through the one protocol in ``forkserver``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol

from frostgym.core.errors import FrostgymError, SandboxUnavailableError, ServerLostError
from frostgym.sandbox import forkserver
from frostgym.sandbox.forkserver import FrameError, decode_value, encode_value, recv_message, send_message
from frostgym.sandbox.limits import SandboxLimits
from frostgym.sandbox.result import ErrorInfo, JobResult, Termination

START_TIMEOUT_S = 30.0
EXIT_SETUP_FAILED = 70  # the fork server's task setup failed before any untrusted code ran
EXIT_RUNTIME_BROKEN = 71  # untrusted code broke the task process's protocol loop
CONTROL_MARGIN_S = 5.0


class CallError(FrostgymError):
    """The untrusted function raised, returned something unencodable, or its process ended
    (``ended``); ``info`` says what, as the sandbox saw it. The code's doing, not the
    sandbox's: a sandbox that fails on its own raises ``ServerLostError`` instead."""

    def __init__(self, info: ErrorInfo, ended: bool = False) -> None:
        super().__init__(f"{info.type}: {info.message}")
        self.info = info
        self.ended = ended


class LaunchedServer(Protocol):
    """A running fork server as a launcher hands it over."""

    control: socket.socket

    def alive(self) -> bool: ...

    def terminate(self) -> None: ...


class Launcher(Protocol):
    name: str

    def launch(self) -> LaunchedServer: ...

    def close(self) -> None: ...


@dataclass
class ServerInfo:
    pid: int
    python: str
    uid: int
    cgroups: bool


class SandboxJob:
    """One execution of untrusted source in the sandbox, in a process of its own (the fork
    server's *task process*). Made by ``Sandbox.job``.

    Use as a context manager; ``call`` evaluates a function the source defined and
    returns a fresh plain value (``CallError`` when it cannot); ``finish`` ends the
    process and classifies the end (``ServerLostError`` when the server was lost).
    """

    def __init__(self, sandbox: Sandbox, source: str, limits: SandboxLimits, mode: Literal["functions", "script"]):
        self.sandbox = sandbox
        self.limits = limits
        self.deadline = time.monotonic() + limits.wall_budget
        self._host_reason: str | None = None
        self._ended = False
        self._result: JobResult | None = None
        self._lost: ServerLostError | None = None
        self._first_message: str | None = None  # set once the task process spoke: its setup was done
        self.calls = 0
        self.load_error: ErrorInfo | None = None
        self.load_stage: str | None = None
        self._memory_error = False
        self._value_overflow = False
        host_end, task_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = host_end
        sandbox._job = self  # from here on ``Sandbox.interrupt`` reaches it, its load included
        try:
            sandbox._send_run({"op": "run", "mode": mode, "source": source, "limits": limits.wire()}, task_end.fileno())
        finally:
            task_end.close()
        # From the hand-over on: (re)starting a server on first use is not the job's time.
        self.deadline = time.monotonic() + limits.wall_budget
        self._await_load()

    def interrupt(self) -> None:
        """From any thread: end the job now, as a ``timeout``. The waiting call sees its
        channel closed, and ``finish`` has the fork server kill the task process."""
        self._host_reason = "timeout"
        self.deadline = time.monotonic()
        with contextlib.suppress(OSError):  # already closed: the job is over
            self._sock.shutdown(socket.SHUT_RDWR)

    # -- the conversation with the task process --------------------------------------------

    def _recv(self) -> dict[str, Any] | None:
        """The job's next message, or None when it ended or ran out of time."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            self._host_reason = "timeout"
            return None
        self._sock.settimeout(remaining)
        try:
            return recv_message(self._sock, limit=self.limits.value_bytes + 1024)
        except TimeoutError:
            self._host_reason = "timeout"
        except (EOFError, OSError):
            pass
        except FrameError:
            self._value_overflow = True
            self._host_reason = "protocol"
        self._ended = True
        return None

    def _await_load(self) -> None:
        message = self._recv()
        if message is None:
            self._ended = True
            return
        event = message.get("event")
        self._first_message = str(event)
        if event == "load_error":
            self.load_error = ErrorInfo.from_wire(message.get("error"))
            self.load_stage = str(message.get("stage", "exec"))
            self._memory_error = self.load_error.type == "MemoryError"
            self._value_overflow = self.load_error.type == "OutputLimit"
            self._ended = True
        elif event not in ("loaded", "done"):
            self.load_error = ErrorInfo("ProtocolError", f"unexpected first message {event!r}")
            self.load_stage = "exec"
            self._ended = True

    @property
    def loaded(self) -> bool:
        return not self._ended and self.load_error is None

    @property
    def limit_reached(self) -> bool:
        """The job hit its memory or output limit, so its label is already decided.

        Callers stop calling it: each further call that grows to the limit again spends
        CPU time, and enough of them under load turn ``memory_exceeded`` into ``timeout``.
        """
        return self._memory_error or self._value_overflow

    def call(self, function: str, *args: Any) -> Any:
        """``function(*args)`` in the task process; raises ``CallError`` on any failure."""
        if self._ended:
            raise CallError(ErrorInfo("ProcessEnded", "the task process is no longer running"), ended=True)
        self.calls += 1
        try:
            request = {"op": "call", "function": function, "args": [encode_value(a) for a in args]}
        except FrameError as exc:
            raise CallError(ErrorInfo("ArgumentError", str(exc))) from None
        try:
            self._sock.settimeout(max(self.deadline - time.monotonic(), 0.001))
            send_message(self._sock, request)
        except (OSError, TimeoutError):
            self._ended = True
            raise CallError(ErrorInfo("ProcessEnded", "the task process closed its channel"), ended=True) from None
        reply = self._recv()
        if reply is None:
            what = "ran out of time" if self._host_reason == "timeout" else "ended during the call"
            raise CallError(ErrorInfo("ProcessEnded", f"the task process {what}"), ended=True)
        if "ok" in reply:
            try:
                return decode_value(reply["ok"])
            except (FrameError, RecursionError) as exc:
                raise CallError(ErrorInfo("ProtocolError", f"malformed return value: {exc}")) from None
        info = ErrorInfo.from_wire(reply.get("error"))
        if info.type == "MemoryError":
            self._memory_error = True
        if info.type == "OutputLimit":
            self._value_overflow = True
        raise CallError(info)

    def finish(self) -> JobResult:
        """How the job ended; ``ServerLostError`` when the server was lost meanwhile."""
        if self._result is None and self._lost is None:
            try:
                self._result = self.sandbox._finish(self)
            except ServerLostError as exc:
                self._lost = exc
            finally:
                self._sock.close()
        if self._lost is not None:
            raise ServerLostError(str(self._lost))
        assert self._result is not None
        return self._result

    def __enter__(self) -> SandboxJob:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.finish()

    # -- classification -----------------------------------------------------------------

    def classify(self, report: dict[str, Any]) -> JobResult:
        status = report.get("wait_status")
        exit_code = os.waitstatus_to_exitcode(status) if isinstance(status, int) else None
        sig = -exit_code if exit_code is not None and exit_code < 0 else None
        cpu = float(report.get("cpu_seconds", 0.0))
        termination: Termination = "exited"
        detail = ""
        cpu_limit = max(1, int(-(-self.limits.cpu_seconds // 1)))
        if report.get("killed_by") == "wall_timeout" or self._host_reason == "timeout":
            termination, detail = "timeout", f"wall-clock limit of {self.limits.wall_budget:g} s"
        elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= cpu_limit - 0.05):
            # Only the CPU limit sends SIGXCPU; the kernel's CPU clock is coarser than the
            # reported CPU time, so under load it fires while that reads below the limit.
            termination, detail = "timeout", f"CPU limit of {cpu_limit} s"
        elif int(report.get("oom_kills", 0)) > 0 or self._memory_error:
            termination, detail = "memory_exceeded", f"memory limit of {self.limits.memory_bytes // (1 << 20)} MiB"
        elif sig == signal.SIGXFSZ or self._value_overflow:
            termination, detail = "output_exceeded", "file, output or return-value size limit"
        elif "setup_error" in report or (exit_code == EXIT_SETUP_FAILED and self._first_message is None):
            why = str(report.get("setup_error") or report.get("output", ""))[:500]
            raise ServerLostError(f"{self.sandbox.name}: the task could not be set up: {why}")
        elif exit_code == EXIT_RUNTIME_BROKEN:
            termination, detail = "crashed", "the code broke the task process's own runtime"
        elif sig is not None:
            termination, detail = "crashed", f"killed by signal {signal.Signals(sig).name}"
        return JobResult(
            termination=termination,
            backend=self.sandbox.name,
            exit_code=exit_code if sig is None else None,
            signal=sig,
            load_error=self.load_error,
            load_stage=self.load_stage,
            cpu_seconds=cpu,
            wall_seconds=float(report.get("elapsed_seconds", 0.0)),
            max_rss_kb=int(report.get("max_rss_kb", 0)),
            output=str(report.get("output", "")),
            output_truncated=bool(report.get("output_truncated", False)),
            detail=detail,
        )


class Sandbox:
    """A fork server for one worker thread, relaunched whenever it is lost.

    Not shared between threads: give each worker its own (``pool.thread_sandbox``).
    """

    def __init__(self, launcher: Launcher, limits: SandboxLimits | None = None) -> None:
        self.launcher = launcher
        self.name = launcher.name
        self.limits = limits or SandboxLimits()
        self._server: LaunchedServer | None = None
        self.info: ServerInfo | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self._job: SandboxJob | None = None  # the job under way, for ``interrupt``

    # -- lifecycle --------------------------------------------------------------------

    def _ensure_server(self) -> LaunchedServer:
        if self._server is not None and self._server.alive():
            return self._server
        if self._server is not None:
            self.restarts += 1
            self._server.terminate()
        server = self.launcher.launch()
        server.control.settimeout(START_TIMEOUT_S)
        try:
            hello = recv_message(server.control)
        except (EOFError, OSError, FrameError) as exc:
            server.terminate()
            raise SandboxUnavailableError(f"{self.name}: the fork server did not start ({exc})") from None
        if hello.get("event") != "ready" or hello.get("protocol") != forkserver.PROTOCOL_VERSION:
            server.terminate()
            raise SandboxUnavailableError(f"{self.name}: unexpected greeting {hello!r}")
        self.info = ServerInfo(int(hello["pid"]), str(hello["python"]), int(hello["uid"]), bool(hello["cgroups"]))
        self._server = server
        return server

    def start(self) -> Sandbox:
        with self._lock:
            self._ensure_server()
        return self

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                with contextlib.suppress(OSError):
                    send_message(self._server.control, {"op": "shutdown"})
                self._server.terminate()
                self._server = None
            self.launcher.close()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _lose_server(self) -> None:
        if self._server is not None:
            self._server.terminate()
            self._server = None
            self.restarts += 1

    # -- jobs ---------------------------------------------------------------------------

    def job(
        self, source: str, limits: SandboxLimits | None = None, mode: Literal["functions", "script"] = "functions"
    ) -> SandboxJob:
        """Start ``source`` in a fresh jailed process; the caller must ``finish`` the job
        (leaving its ``with`` block does). ``mode="script"`` runs it as a program.
        Raises ``SandboxUnavailableError`` when no fork server can start here, and
        ``ServerLostError`` when the server is lost while the job starts."""
        self._lock.acquire()
        try:
            return SandboxJob(self, source, limits or self.limits, mode)
        except BaseException:
            self._job = None
            self._lock.release()
            raise

    def interrupt(self) -> None:
        """From any thread: end the job under way now, as a ``timeout`` (see
        ``SandboxJob.interrupt``); nothing when none is."""
        job = self._job
        if job is not None:
            job.interrupt()

    def run_script(self, source: str, limits: SandboxLimits | None = None) -> JobResult:
        """Run ``source`` as a program to its end."""
        with self.job(source, limits, mode="script") as job:
            pass
        return job.finish()

    def _send_run(self, request: dict[str, Any], task_fd: int) -> None:
        try:
            server = self._ensure_server()
            server.control.settimeout(START_TIMEOUT_S)
            send_message(server.control, request, fds=[task_fd])
        except (EOFError, OSError, FrameError) as exc:
            self._lose_server()
            raise ServerLostError(f"fork server lost while starting a task: {exc}") from None

    def _finish(self, job: SandboxJob) -> JobResult:
        try:
            return self._finish_locked(job)
        finally:
            self._job = None
            self._lock.release()

    def _finish_locked(self, job: SandboxJob) -> JobResult:
        server = self._server
        if server is None:
            raise ServerLostError(f"{self.name}: fork server lost")
        try:
            if job._host_reason == "timeout":
                send_message(server.control, {"op": "kill", "reason": "timeout"})
            else:
                try:
                    job._sock.settimeout(1.0)
                    send_message(job._sock, {"op": "exit"})
                except OSError:
                    pass
            server.control.settimeout(max(job.deadline - time.monotonic(), 0) + CONTROL_MARGIN_S)
            report = recv_message(server.control)
        except (EOFError, OSError, FrameError) as exc:
            self._lose_server()
            raise ServerLostError(f"{self.name}: fork server lost during the task: {exc}") from None
        if report.get("event") != "exit":
            self._lose_server()
            raise ServerLostError(f"{self.name}: fork server sent {report.get('event')!r} instead of an exit report")
        return job.classify(report)


def server_argv(python: str, script: str, config: dict[str, Any]) -> list[str]:
    """``python -I -S forkserver.py CONFIG``: isolated mode, no site-packages."""
    return [python, "-I", "-S", script, json.dumps(config, separators=(",", ":"))]
