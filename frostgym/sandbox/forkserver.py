"""The warm fork server that runs inside a jail (bubblewrap, unshare or a container).

This file is executed as a script by an interpreter that may not be the host's (a
container's ``python3``), so it imports only the standard library and must not import
frostgym. The host imports it too, for the wire format: one definition of the framing
and of the value encoding on both sides.

Why a fork server: forking a warm interpreter costs a small fraction of starting one. Why
the untrusted code never sees the tests: a solution that shares a process with its
checker can patch ``assert``, builtins or ``__eq__``, exit early with status 0, or forge
a result file. Here the untrusted process only *evaluates calls* it is sent and returns
plain data (exact builtin types, nothing else); the host rebuilds the values and runs
the checks itself. What the child may claim is "this call returned this plain value".

Per task the server forks one task process, alone in a fresh PID namespace where it
can. It sets up its own session, output and scratch dir, joins its cgroups, and waits
as the *spare* for its request; with the request come its limits and its unprivileged
uid, and then the code runs. The next task's spare is forked while the current task
runs, so no fork is on a task's clock. The task process is its namespace's init: its
death tears down everything it started; without namespaces a uid-wide SIGKILL sweep
does.
"""

from __future__ import annotations

import array
import base64
import contextlib
import ctypes
import errno
import functools
import gc
import json
import math
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROTOCOL_VERSION = 1
HEADER = struct.Struct(">I")
MAX_CONTROL_MESSAGE = 64 * 1024 * 1024
CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 1000
DRAIN_SECONDS = 5.0
MAX_DEPTH = 64

# Modules children are likely to import; imported once here so a fork inherits them.
# Fork time grows with the server's resident size, so only modules that many tasks import,
# and that are slow to import cold, are preloaded.
PRELOAD = ("collections", "functools", "hashlib", "heapq", "itertools", "math", "re", "string", "typing")


class FrameError(Exception):
    """A message or value that does not follow the wire format."""


# -- framing ---------------------------------------------------------------------------


def send_message(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    data = HEADER.pack(len(body)) + body
    if fds:
        sock.sendmsg([data[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data = data[1:]
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int, fds: list[int] | None) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        if fds is not None and got == 0:
            data, ancdata, _flags, _addr = sock.recvmsg(n, socket.CMSG_LEN(4 * 4))
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds.extend(array.array("i", payload[:usable]))
        else:
            data = sock.recv(min(n - got, 1 << 20))
        if not data:
            raise EOFError("connection closed")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def recv_message(sock: socket.socket, limit: int = MAX_CONTROL_MESSAGE, fds: list[int] | None = None) -> dict[str, Any]:
    """One framed JSON object. ``FrameError`` for an oversized or malformed one."""
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size, fds))
    if size > limit:
        raise FrameError(f"message of {size} bytes is over the {limit}-byte limit")
    body = _recv_exact(sock, size, None)
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"malformed message: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError("a message must be a JSON object")
    return message


# -- values ----------------------------------------------------------------------------
# Exact builtin types only (``type(v) is int``, never a subclass), so no value can carry
# behaviour across; containers are tagged so tuple/list/set survive the trip. A value of a
# subclass (``Counter``, ``OrderedDict``, a namedtuple, an ``IntEnum``, a ``str``
# subclass) is encoded as its builtin base, read through the base type's own methods,
# never the subclass's: what arrives is the plain value, and its ``__eq__`` stays behind.


class ValueTooLarge(FrameError):
    """A value whose encoding would pass the size limit (checked while encoding, so a
    huge value is never serialized in full)."""


def encode_value(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    if depth > MAX_DEPTH:
        raise FrameError("value nested too deeply")
    kind = type(value)
    if kind not in _PLAIN and value is not None:
        value = _as_base(value)
        kind = type(value)
    if budget is not None:
        budget[0] -= len(value) * 2 + 8 if kind in (str, bytes) else 8
        if budget[0] < 0:
            raise ValueTooLarge("the value is over the size limit")
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return {"i": str(value)} if abs(value) >= 1 << 53 else value
    if kind is float:
        return {"f": value.hex()}
    if kind is list:
        return {"l": [encode_value(v, depth + 1, budget) for v in value]}
    if kind is tuple:
        return {"t": [encode_value(v, depth + 1, budget) for v in value]}
    if kind is set or kind is frozenset:
        tag = "s" if kind is set else "fs"
        return {tag: [encode_value(v, depth + 1, budget) for v in value]}
    if kind is dict:
        return {
            "d": [[encode_value(k, depth + 1, budget), encode_value(v, depth + 1, budget)] for k, v in value.items()]
        }
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"c": [value.real.hex(), value.imag.hex()]}
    raise FrameError(f"values of type {kind.__name__} cannot be returned (plain builtin types only)")


_PLAIN = frozenset({bool, str, int, float, list, tuple, set, frozenset, dict, bytes, complex})


def _as_base(value: Any) -> Any:
    """A subclass instance as a fresh value of its builtin base (else unchanged, and the
    encoder refuses it). Only the base type's slots are read, so an overriding
    ``__iter__``, ``items`` or ``__str__`` is never called, and the type is the real one
    (``type``, not ``isinstance``, which a faked ``__class__`` can answer)."""
    kind = type(value)
    if issubclass(kind, dict):
        return dict(dict.items(value))
    if issubclass(kind, list):
        return list(list.__iter__(value))
    if issubclass(kind, tuple):  # a namedtuple too
        return tuple(tuple.__iter__(value))
    if issubclass(kind, set):
        return set(set.__iter__(value))
    if issubclass(kind, frozenset):
        return frozenset(frozenset.__iter__(value))
    if issubclass(kind, str):
        return str.__str__(value)
    if issubclass(kind, bytes):
        return bytes(memoryview(value))
    if issubclass(kind, int):  # bool cannot be subclassed; an IntEnum member is an int
        return int.__index__(value)
    if issubclass(kind, float):
        return float.__float__(value)
    if issubclass(kind, complex):
        return complex(float.__float__(complex.real.__get__(value)), float.__float__(complex.imag.__get__(value)))
    return value


def decode_value(data: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise FrameError("value nested too deeply")
    if data is None or type(data) in (bool, str, int):
        return data
    if type(data) is not dict or len(data) != 1:
        raise FrameError("malformed value")
    ((tag, payload),) = data.items()
    try:
        if tag == "i":
            return int(payload)
        if tag == "f":
            return float.fromhex(payload)
        if tag == "c":
            return complex(float.fromhex(payload[0]), float.fromhex(payload[1]))
        if tag == "b":
            return base64.b64decode(payload, validate=True)
        items = [decode_value(v, depth + 1) for v in payload] if tag != "d" else None
        if tag == "l":
            return items
        if tag == "t":
            return tuple(items or ())
        if tag == "s":
            return set(items or ())
        if tag == "fs":
            return frozenset(items or ())
        if tag == "d":
            return {decode_value(k, depth + 1): decode_value(v, depth + 1) for k, v in payload}
    except FrameError:
        raise
    except Exception as exc:  # a forged payload of the wrong shape
        raise FrameError(f"malformed {tag!r} value: {type(exc).__name__}") from None
    raise FrameError(f"unknown value tag {tag!r}")


# -- the task process (B) ----------------------------------------------------------------


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _apply_limits(limits: dict[str, Any], uid: int | None) -> None:
    cpu = max(1, math.ceil(float(limits["cpu_seconds"])))
    memory = int(limits["memory_bytes"])
    settings = [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),  # PID 1 of a namespace ignores SIGXCPU: hard = soft + 1
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_NOFILE, (int(limits["open_files"]),) * 2),
        (resource.RLIMIT_FSIZE, (int(limits["file_bytes"]),) * 2),
    ]
    if memory > 0:
        settings.append((resource.RLIMIT_AS, (memory, memory)))
    if uid is not None and uid != 0:
        settings.append((resource.RLIMIT_NPROC, (int(limits["processes"]),) * 2))
    for which, value in settings:
        resource.setrlimit(which, value)


def _prefer_as_oom_victim() -> None:
    """Where several tasks' worth of memory shares one limit (a container), the kernel's
    OOM killer should take the task, never the server. Best effort."""
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass


def _drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _exit(code: int) -> None:
    """Leave without running untrusted finalizers, but keep what the code printed."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)


def _report(sock: socket.socket, message: dict[str, Any]) -> None:
    try:
        send_message(sock, message)
    except OSError:
        _exit(0)


def _error_message(exc: BaseException) -> dict[str, Any]:
    """The exception as text. Limit breaches get fixed names the host classifies by:
    a PID 1 ignores SIGXFSZ, so a write past the file-size limit surfaces as EFBIG."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    name = type(exc).__name__
    if isinstance(exc, ValueTooLarge) or (isinstance(exc, OSError) and exc.errno == errno.EFBIG):
        name = "OutputLimit"
    return {"type": name, "message": text[-2000:]}


def _serve_calls(sock: socket.socket, namespace: dict[str, Any], max_value_bytes: int) -> None:
    while True:
        try:
            request = recv_message(sock, limit=max_value_bytes)
        except (EOFError, OSError, FrameError):
            _exit(0)
        if request.get("op") != "call":
            _exit(0)
        try:
            function = namespace[request["function"]]
            args = [decode_value(a) for a in request.get("args", [])]
            result = function(*args)
            encoded = encode_value(result, budget=[max_value_bytes])
            body = json.dumps({"ok": encoded}, separators=(",", ":"))
            if len(body) > max_value_bytes:
                raise ValueTooLarge(f"return value over {max_value_bytes} bytes")
            sock.sendall(HEADER.pack(len(body)) + body.encode("utf-8"))
        except BaseException as exc:
            try:
                _report(sock, {"error": _error_message(exc)})
            except BaseException:
                _exit(3)


def _run_task(sock: socket.socket, request: dict[str, Any]) -> None:
    source = request["source"]
    namespace: dict[str, Any] = {"__name__": request.get("module_name", "__main__"), "__builtins__": __builtins__}
    try:
        code = compile(source, "solution.py", "exec")
    except BaseException as exc:
        _report(sock, {"event": "load_error", "stage": "compile", "error": _error_message(exc)})
        _exit(0)
    try:
        exec(code, namespace)
    except BaseException as exc:
        _report(sock, {"event": "load_error", "stage": "exec", "error": _error_message(exc)})
        _exit(0)
    sys.stdout.flush()
    if request.get("mode") == "script":
        _report(sock, {"event": "done"})
        _exit(0)
    _report(sock, {"event": "loaded"})
    _serve_calls(sock, namespace, int(request["limits"]["value_bytes"]))


def _task_process(channel_fd: int, output_fd: int, scratch: str, groups: list[str], config: dict[str, Any]) -> None:
    """The task process: set up as far as it can before its task exists, wait for it,
    run it. Never returns.

    Everything that does not depend on the request (session, output, scratch dir,
    environment, cgroups) is done while this process waits as the spare, off the task's
    clock; what does (limits, the task socket) follows the request, and the uid drop
    comes last, before any untrusted code runs.
    """
    uid = config.get("uid")
    try:
        libc = _libc()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.closerange(3, channel_fd)  # what the server held when it forked this spare
        os.closerange(channel_fd + 1, 1 << 16)
        os.chdir(scratch)
        os.environ.clear()
        os.environ.update({"HOME": scratch, "TMPDIR": scratch, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGXCPU, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        _prefer_as_oom_victim()
        for group in groups:  # "0": the writer itself, in any PID namespace
            with open(os.path.join(group, "cgroup.procs"), "w") as handle:
                handle.write("0")
        channel = socket.socket(fileno=channel_fd)
        fds: list[int] = []
        try:
            request = recv_message(channel, fds=fds)
        except (EOFError, OSError):
            os._exit(0)  # a spare the server no longer needs
        channel.close()
        if len(fds) != 1:
            raise FrameError("a task needs exactly one task socket")
        os.dup2(fds[0], 3)
        os.closerange(4, 1 << 16)
        _apply_limits(request["limits"], uid)
        if uid is not None:
            _drop_privileges(uid)
        # After the uid change: changing credentials clears the parent-death signal.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        sock = socket.socket(fileno=3)
    except BaseException:
        traceback.print_exc()
        os._exit(70)
    try:
        _run_task(sock, request)
    except BaseException:
        os._exit(71)
    os._exit(0)


@dataclass
class _Spare:
    """A task process forked ahead of its task, waiting on ``channel``.

    Forking this server, and the copy-on-write faults that follow, take time; made while
    the task before runs (or the host grades it), none of it is on a task's clock.
    """

    pid: int
    pidfd: int  # signals through it can never reach a recycled pid
    channel: socket.socket
    scratch: str
    output_path: str
    groups: list[str]  # its slot's cgroups, which no other task uses meanwhile

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def discard(self) -> None:
        """Drop a spare that will never run; the server's stray reaping collects it."""
        self.channel.close()
        self.kill()
        os.close(self.pidfd)
        shutil.rmtree(self.scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(self.output_path)


# -- the server ------------------------------------------------------------------------


class ForkServer:
    def __init__(self, control: socket.socket, config: dict[str, Any]) -> None:
        self.control = control
        self.config = config
        self.scratch_root = config.get("scratch_root", "/tmp/frostgym-scratch")
        self.uid: int | None = config.get("uid")
        self.count = 0
        self.spare: _Spare | None = None
        self._own_pid_ns: int | None = None  # an fd of it, where tasks get namespaces of their own
        self.cgroup_slots: list[list[str]] = config.get("cgroup_slots", [])
        self._cgroup_limits: dict[tuple[str, ...], tuple[int, int]] = {}

    def serve(self) -> None:
        # Orphans of tasks (strays without a PID
        # namespace) come to this server, not to an init it cannot wait for, so it can
        # reap them before the next task; in a container the server is PID 1 anyway.
        _libc().prctl(PR_SET_CHILD_SUBREAPER, 1)
        for path in self.config.get("private_mounts", []):
            _mount_private_tmpfs(path)
        os.makedirs(self.scratch_root, mode=0o711, exist_ok=True)
        if self.config.get("pid_namespace"):
            self._own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
        send_message(
            self.control, {"event": "ready", "protocol": PROTOCOL_VERSION, "pid": os.getpid(), **self._probe()}
        )
        try:
            self._serve_requests()
        finally:
            if self.spare is not None:
                self.spare.discard()

    def _serve_requests(self) -> None:
        while True:
            self._ensure_spare()
            fds: list[int] = []
            try:
                request = recv_message(self.control, fds=fds)
            except EOFError:
                return
            op = request.get("op")
            if op == "run":
                if len(fds) != 1:
                    error = {"type": "ProtocolError", "message": "run needs exactly one task socket"}
                    send_message(self.control, {"event": "exit", "setup_error": error, "output": ""})
                    for fd in fds:
                        os.close(fd)
                    continue
                self._run(request, fds[0])
            elif op == "ping":
                send_message(self.control, {"event": "pong"})
            elif op == "shutdown":
                return
            elif op == "kill":  # a kill that crossed the task's own end: nothing left to kill
                pass
            else:
                send_message(self.control, {"event": "error", "message": f"unknown op {op!r}"})
            self._reap_strays()

    def _probe(self) -> dict[str, Any]:
        return {"python": sys.version.split()[0], "uid": os.getuid(), "cgroups": bool(self.cgroup_slots)}

    def _set_cgroup_limits(self, groups: list[str], limits: dict[str, Any]) -> None:
        wanted = (int(limits["processes"]), int(limits["memory_bytes"]))
        if self._cgroup_limits.get(tuple(groups)) == wanted:
            return
        self._cgroup_limits.pop(tuple(groups), None)
        for group in groups:
            if os.path.exists(os.path.join(group, "pids.max")):
                _write(os.path.join(group, "pids.max"), str(int(limits["processes"]) + 1))
            if os.path.exists(os.path.join(group, "memory.limit_in_bytes")):  # cgroup v1
                _write(os.path.join(group, "memory.limit_in_bytes"), str(int(limits["memory_bytes"])))
            elif os.path.exists(os.path.join(group, "memory.max")):  # cgroup v2
                _write(os.path.join(group, "memory.max"), str(int(limits["memory_bytes"])))
                _write(os.path.join(group, "memory.swap.max"), "0", missing_ok=True)
        self._cgroup_limits[tuple(groups)] = wanted

    def _oom_kills(self, groups: list[str]) -> int:
        """OOM kills so far in the task groups and in ``oom_groups``: groups only watched,
        never written (a container's own, read-only memory cgroup)."""
        total = 0
        for group in [*groups, *self.config.get("oom_groups", [])]:
            for name in ("memory.oom_control", "memory.events"):
                path = os.path.join(group, name)
                if os.path.exists(path):
                    with open(path) as handle:
                        for line in handle:
                            key, _, value = line.partition(" ")
                            if key == "oom_kill":
                                total += int(value)
        return total

    def _kill_group_members(self, groups: list[str]) -> None:
        for group in groups:
            try:
                with open(os.path.join(group, "cgroup.procs")) as handle:
                    pids = [int(line) for line in handle if line.strip()]
            except OSError:
                continue
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    @property
    def _sweeps(self) -> bool:
        """Whether tasks end with a uid sweep, which must run with no spare alive."""
        return self._own_pid_ns is None and self.uid is not None and self.uid != 0

    def _sweep_uid(self) -> None:
        """Kill every process of the task uid: ``kill(-1)`` as that uid reaches no one else.

        Rounds repeat until ``kill(-1)`` finds no one, so a process forked while a signal
        was being delivered is caught by the next round (a fixed few rounds let fork-bomb
        children through into the next task, holding its RLIMIT_NPROC). Zombies answer
        ``kill`` too, so meanwhile this server reaps: it is the subreaper of everything
        its tasks leave (``serve``), so every killed stray is its child, and "none left" is
        reached within milliseconds. ``SWEEP_ROUNDS`` only caps a pathological case.

        ``kill(-1)`` fails with ESRCH only when no process but init and the caller exists
        at all (one it may not signal still counts), so the sweep runs with no spare
        alive: without a PID namespace the spare is forked after it.
        """
        uid = self.uid
        if not self._sweeps or uid is None:
            return
        pid = os.fork()
        if pid == 0:
            try:
                _drop_privileges(uid)
                for _ in range(SWEEP_ROUNDS):
                    try:
                        os.kill(-1, signal.SIGKILL)
                    except ProcessLookupError:
                        break
                    time.sleep(0.0005)
            finally:
                os._exit(0)
        while True:  # reap the killed strays along with the sweeper, see above
            try:
                reaped, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            if reaped == pid:
                return

    def _drain_groups(self, groups: list[str], deadline: float) -> None:
        """Wait until the task's cgroups hold no process, zombies included, so the next
        task starts with its whole pids budget (a killed namespace takes a moment to die)."""
        counters = [os.path.join(g, "pids.current") for g in groups]
        counters = [c for c in counters if os.path.exists(c)]
        while counters:
            self._reap_strays()
            busy = False
            for counter in counters:
                with open(counter) as handle:
                    busy = busy or int(handle.read().strip() or 0) > 0
            if not busy or time.monotonic() > deadline:
                return
            self._kill_group_members(groups)
            time.sleep(0.001)

    def _reap_strays(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def _ensure_spare(self) -> None:
        """Fork the next task's process now, if none is waiting already. A failure here
        is left for ``_hand_over`` to report with the task that needs it."""
        if self.spare is None:
            with contextlib.suppress(OSError):
                self.spare = self._prefork()

    def _prefork(self) -> _Spare:
        """Fork a spare task process: into a new PID namespace where configured (it is the
        namespace's init, so its death ends everything it started), as this server's
        own child (so the server reads its exit status and resource use directly)."""
        self.count += 1
        scratch = os.path.join(self.scratch_root, f"task-{self.count}")
        output_path = os.path.join(self.scratch_root, f"output-{self.count}")
        shutil.rmtree(scratch, ignore_errors=True)
        os.mkdir(scratch, 0o700)
        if self.uid is not None:
            os.chown(scratch, self.uid, self.uid)
        output_fd = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        groups = self.cgroup_slots[self.count % len(self.cgroup_slots)] if self.cgroup_slots else []
        server_end, spare_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = self._fork_task_process()
        except OSError:
            os.close(output_fd)
            server_end.close()
            spare_end.close()
            shutil.rmtree(scratch, ignore_errors=True)
            os.unlink(output_path)
            raise
        if pid == 0:
            _task_process(spare_end.detach(), output_fd, scratch, groups, self.config)
        os.close(output_fd)
        spare_end.close()
        return _Spare(pid, os.pidfd_open(pid), server_end, scratch, output_path, groups)

    def _fork_task_process(self) -> int:
        """``os.fork``, with the child alone in a new PID namespace where configured.

        ``unshare(CLONE_NEWPID)`` only places the caller's *next* children, and only once
        (a second call fails); ``setns`` back to the server's own namespace re-arms it,
        so the server forks every task itself, with no intermediate process.
        """
        if self._own_pid_ns is None:
            return os.fork()
        libc = _libc()
        if libc.unshare(CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID) failed")
        try:
            pid = os.fork()
        except OSError:
            self._restore_pid_ns()
            raise
        if pid != 0:
            self._restore_pid_ns()
        return pid

    def _restore_pid_ns(self) -> None:
        if self._own_pid_ns is not None and _libc().setns(self._own_pid_ns, CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "setns back to the server's PID namespace failed")

    def _hand_over(self, request: dict[str, Any], task_fd: int) -> tuple[_Spare, int, float]:
        """Give the task to the waiting spare, under its slot's limits; one that died
        meanwhile is replaced once. Returns the spare, its groups' OOM kills so far and
        the task's start time."""
        for attempt in range(2):
            spare, self.spare = self.spare or self._prefork(), None
            try:
                if select.select([spare.pidfd], [], [], 0)[0]:  # it died waiting (say, OOM)
                    raise OSError(errno.ESRCH, "the spare task process died")
                self._set_cgroup_limits(spare.groups, request["limits"])
                oom_before = self._oom_kills(spare.groups)
                started = time.monotonic()
                send_message(spare.channel, request, fds=[task_fd])
                spare.channel.close()
                return spare, oom_before, started
            except OSError:
                spare.discard()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _run(self, request: dict[str, Any], task_fd: int) -> None:
        limits = request["limits"]
        try:
            spare, oom_before, started = self._hand_over(request, task_fd)
        except OSError as exc:
            error = {"type": "SetupError", "message": f"task setup failed: {exc}"}
            send_message(self.control, {"event": "exit", "setup_error": error, "output": ""})
            return
        finally:
            os.close(task_fd)
        isolated = self._own_pid_ns is not None
        if isolated or not self._sweeps:  # the next task's process forks while this one runs
            self._ensure_spare()
        killed_by, report = self._wait(spare, started + float(limits["wall_seconds"]))
        os.close(spare.pidfd)
        if killed_by is not None or not isolated:
            # A reaped namespace init has had its whole namespace reaped first; anything
            # else may still be running or dying.
            self._kill_group_members(spare.groups)
            if not isolated:
                self._sweep_uid()
            self._drain_groups(spare.groups, time.monotonic() + DRAIN_SECONDS)
        output, truncated = _read_capped(spare.output_path, int(limits["output_bytes"]))
        shutil.rmtree(spare.scratch, ignore_errors=True)
        os.unlink(spare.output_path)
        report.update(
            event="exit",
            killed_by=killed_by,
            oom_kills=self._oom_kills(spare.groups) - oom_before,
            output=output,
            output_truncated=truncated,
            elapsed_seconds=time.monotonic() - started,
        )
        send_message(self.control, report)

    def _wait(self, spare: _Spare, deadline: float) -> tuple[str | None, dict[str, Any]]:
        """Until the task process ends, the host asks for a kill, or the wall deadline
        passes. Returns who killed it, if anyone, and how it ended."""
        killed_by: str | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                killed_by = "wall_timeout"
                break
            ready, _, _ = select.select([spare.pidfd, self.control.fileno()], [], [], remaining)
            if spare.pidfd in ready:
                break
            if self.control.fileno() in ready:
                try:
                    message = recv_message(self.control)
                except EOFError:
                    spare.kill()
                    raise
                if message.get("op") == "kill":
                    killed_by = str(message.get("reason", "host"))
                    break
        if killed_by is not None:
            spare.kill()
        _, status, usage = os.wait4(spare.pid, 0)
        report = {"wait_status": status, "cpu_seconds": usage.ru_utime + usage.ru_stime, "max_rss_kb": usage.ru_maxrss}
        return killed_by, report


def _mount_private_tmpfs(path: str) -> None:
    """An empty root-owned tmpfs over ``path`` in this server's own mount namespace, so
    tasks can neither write to nor read from the host's directory there."""
    ms_nosuid, ms_nodev = 2, 4
    if _libc().mount(b"tmpfs", path.encode(), b"tmpfs", ms_nosuid | ms_nodev, b"mode=0755,size=268435456") != 0:
        raise OSError(ctypes.get_errno(), f"mount tmpfs on {path} failed")


def _write(path: str, value: str, missing_ok: bool = False) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(value)
    except OSError as exc:
        if not (missing_ok and exc.errno in (errno.ENOENT, errno.EINVAL, errno.EACCES)):
            raise


def _read_capped(path: str, cap: int) -> tuple[str, bool]:
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    return data[:cap].decode("utf-8", "replace"), len(data) > cap


def _preload(names: tuple[str, ...], importer: Callable[[str], Any] = __import__) -> None:
    for name in names:
        with contextlib.suppress(ImportError):
            importer(name)


def main(argv: list[str]) -> int:
    """``forkserver.py CONFIG_JSON``; the control socket is fd 3 or ``config['connect']``."""
    config = json.loads(argv[1])
    if "connect" in config:
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.connect(config["connect"])
    else:
        control = socket.socket(fileno=int(config.get("control_fd", 3)))
    _preload(PRELOAD)
    gc.freeze()  # tasks' collections never scan (and so never copy) what the server holds
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    ForkServer(control, config).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
