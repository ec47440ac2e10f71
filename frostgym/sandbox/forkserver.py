"""The warm fork server that runs inside a jail (bubblewrap, unshare or a container).

This file is executed as a script by an interpreter that may not be the host's (a
container's ``python3``), so it imports only the standard library and must not import
frostgym. The host imports it too, for the wire format: one definition of the framing
and of the value encoding on both sides.

Why a fork server: starting an interpreter costs ~36 ms, forking a warm one ~1 ms. Why
the untrusted code never sees the tests: a solution that shares a process with its
checker can patch ``assert``, builtins or ``__eq__``, exit early with status 0, or forge
a result file. Here the untrusted process only *evaluates calls* it is sent and returns
plain data (exact builtin types, nothing else); the host rebuilds the values and runs
the checks itself. What the child may claim is "this call returned this plain value".

Per task the server forks a keeper process (A), which may enter a fresh PID namespace
and forks the task process (B). B sets up its own session, limits, scratch dir and
unprivileged uid, then runs the code. Killing A kills B (parent-death signal), and B's
death tears down its whole namespace; without namespaces a uid-wide SIGKILL sweep does.
"""

from __future__ import annotations

import array
import base64
import contextlib
import ctypes
import errno
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
# Fork time grows with the server's resident size (~0.07 ms per MB here), so only modules
# that many tasks import, and that are slow to import cold, are preloaded.
PRELOAD = ("collections", "functools", "hashlib", "heapq", "itertools", "math", "re", "string", "typing")


class WireError(Exception):
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
    """One framed JSON object. ``WireError`` for an oversized or malformed one."""
    (size,) = HEADER.unpack(_recv_exact(sock, HEADER.size, fds))
    if size > limit:
        raise WireError(f"message of {size} bytes is over the {limit}-byte limit")
    body = _recv_exact(sock, size, None)
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"malformed message: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message


# -- values ----------------------------------------------------------------------------
# Exact builtin types only (``type(v) is int``, never a subclass), so no value can carry
# behaviour across; containers are tagged so tuple/list/set survive the trip.


class ValueTooLarge(WireError):
    """A value whose encoding would pass the size limit (checked while encoding, so a
    huge value is never serialized in full)."""


def encode_value(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if budget is not None:
        budget[0] -= len(value) * 2 + 8 if type(value) in (str, bytes) else 8
        if budget[0] < 0:
            raise ValueTooLarge("the value is over the size limit")
    kind = type(value)
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
    raise WireError(f"values of type {kind.__name__} cannot be returned (plain builtin types only)")


def decode_value(data: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if data is None or type(data) in (bool, str, int):
        return data
    if type(data) is not dict or len(data) != 1:
        raise WireError("malformed value")
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
    except WireError:
        raise
    except Exception as exc:  # a forged payload of the wrong shape
        raise WireError(f"malformed {tag!r} value: {type(exc).__name__}") from None
    raise WireError(f"unknown value tag {tag!r}")


# -- the task process (B) ----------------------------------------------------------------


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
    OOM killer should take the task, never the server or a keeper. Best effort."""
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
        except (EOFError, OSError, WireError):
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


def _task_process(request: dict[str, Any], task_fd: int, output_fd: int, scratch: str, uid: int | None) -> None:
    """B: never returns."""
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.dup2(task_fd, 3)
        os.closerange(4, 1 << 16)
        os.chdir(scratch)
        for name in list(os.environ):
            del os.environ[name]
        os.environ.update({"HOME": scratch, "TMPDIR": scratch, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGXCPU, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        _prefer_as_oom_victim()
        _apply_limits(request["limits"], uid)
        if uid is not None:
            _drop_privileges(uid)
        # After the uid change: changing credentials clears the parent-death signal.
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        sock = socket.socket(fileno=3)
    except BaseException:
        traceback.print_exc()
        os._exit(70)
    try:
        _run_task(sock, request)
    except BaseException:
        os._exit(71)
    os._exit(0)


def _keeper_process(
    request: dict[str, Any], task_fd: int, output_fd: int, status_fd: int, scratch: str, config: dict[str, Any]
) -> None:
    """A: joins the task cgroups, optionally a new PID namespace, forks B, reports B's end."""
    code = 0
    try:
        for group in config.get("cgroups", []):
            with open(os.path.join(group, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
        if config.get("pid_namespace") and _libc().unshare(CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID) failed")
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(status_fd)
            _task_process(request, task_fd, output_fd, scratch, config.get("uid"))
        os.close(task_fd)
        os.close(output_fd)
        _, status, usage = os.wait4(pid, 0)
        report = {
            "wait_status": status,
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "max_rss_kb": usage.ru_maxrss,
            "wall_seconds": time.monotonic() - started,
        }
        os.write(status_fd, json.dumps(report).encode())
    except BaseException as exc:
        os.write(status_fd, json.dumps({"keeper_error": _error_message(exc)}).encode())
        code = 1
    os._exit(code)


# -- the server ------------------------------------------------------------------------


class ForkServer:
    def __init__(self, control: socket.socket, config: dict[str, Any]) -> None:
        self.control = control
        self.config = config
        self.scratch_root = config.get("scratch_root", "/tmp/frostgym-scratch")
        self.uid: int | None = config.get("uid")
        self.count = 0
        self._cgroup_limits: tuple[int, int] | None = None

    def serve(self) -> None:
        # Orphans of tasks (a task process whose keeper was killed, strays without a PID
        # namespace) come to this server, not to an init it cannot wait for, so it can
        # reap them before the next task; in a container the server is PID 1 anyway.
        _libc().prctl(PR_SET_CHILD_SUBREAPER, 1)
        for path in self.config.get("private_mounts", []):
            _mount_private_tmpfs(path)
        os.makedirs(self.scratch_root, mode=0o711, exist_ok=True)
        send_message(
            self.control, {"event": "ready", "protocol": PROTOCOL_VERSION, "pid": os.getpid(), **self._probe()}
        )
        while True:
            fds: list[int] = []
            try:
                request = recv_message(self.control, fds=fds)
            except EOFError:
                return
            op = request.get("op")
            if op == "run":
                if len(fds) != 1:
                    error = {"type": "ProtocolError", "message": "run needs exactly one task socket"}
                    send_message(self.control, {"event": "exit", "keeper_error": error, "output": ""})
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
        return {"python": sys.version.split()[0], "uid": os.getuid(), "cgroups": bool(self.config.get("cgroups"))}

    def _set_cgroup_limits(self, limits: dict[str, Any]) -> None:
        wanted = (int(limits["processes"]), int(limits["memory_bytes"]))
        if wanted == self._cgroup_limits:
            return
        self._cgroup_limits = None
        for group in self.config.get("cgroups", []):
            if os.path.exists(os.path.join(group, "pids.max")):
                _write(os.path.join(group, "pids.max"), str(int(limits["processes"]) + 1))
            if os.path.exists(os.path.join(group, "memory.limit_in_bytes")):  # cgroup v1
                _write(os.path.join(group, "memory.limit_in_bytes"), str(int(limits["memory_bytes"])))
            elif os.path.exists(os.path.join(group, "memory.max")):  # cgroup v2
                _write(os.path.join(group, "memory.max"), str(int(limits["memory_bytes"])))
                _write(os.path.join(group, "memory.swap.max"), "0", missing_ok=True)
        self._cgroup_limits = wanted

    def _oom_kills(self) -> int:
        """OOM kills so far in the task groups and in ``oom_groups``: groups only watched,
        never written (a container's own, read-only memory cgroup)."""
        total = 0
        for group in [*self.config.get("cgroups", []), *self.config.get("oom_groups", [])]:
            for name in ("memory.oom_control", "memory.events"):
                path = os.path.join(group, name)
                if os.path.exists(path):
                    with open(path) as handle:
                        for line in handle:
                            key, _, value = line.partition(" ")
                            if key == "oom_kill":
                                total += int(value)
        return total

    def _kill_group_members(self) -> None:
        for group in self.config.get("cgroups", []):
            try:
                with open(os.path.join(group, "cgroup.procs")) as handle:
                    pids = [int(line) for line in handle if line.strip()]
            except OSError:
                continue
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _sweep_uid(self) -> None:
        """Kill every process of the task uid: ``kill(-1)`` as that uid reaches no one else.

        Rounds repeat until ``kill(-1)`` finds no one, so a process forked while a signal
        was being delivered is caught by the next round (a fixed few rounds let fork-bomb
        children through into the next task, holding its RLIMIT_NPROC). Zombies answer
        ``kill`` too, so meanwhile this server reaps: it is the subreaper of everything
        its tasks leave (``serve``), so every killed stray is its child, and "none left" is
        reached within milliseconds. ``SWEEP_ROUNDS`` only caps a pathological case.
        """
        if self.uid is None or self.uid == 0:
            return
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(self.uid)
                os.setuid(self.uid)
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

    def _drain_groups(self, deadline: float) -> None:
        """Wait until the task's cgroups hold no process, zombies included, so the next
        task starts with its whole pids budget (a killed namespace takes a moment to die)."""
        counters = [os.path.join(g, "pids.current") for g in self.config.get("cgroups", [])]
        counters = [c for c in counters if os.path.exists(c)]
        while counters:
            self._reap_strays()
            busy = False
            for counter in counters:
                with open(counter) as handle:
                    busy = busy or int(handle.read().strip() or 0) > 0
            if not busy or time.monotonic() > deadline:
                return
            self._kill_group_members()
            time.sleep(0.001)

    def _reap_strays(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def _run(self, request: dict[str, Any], task_fd: int) -> None:
        self.count += 1
        limits = request["limits"]
        scratch = os.path.join(self.scratch_root, f"task-{self.count}")
        shutil.rmtree(scratch, ignore_errors=True)
        os.mkdir(scratch, 0o700)
        if self.uid is not None:
            os.chown(scratch, self.uid, self.uid)
        output_path = os.path.join(self.scratch_root, f"output-{self.count}")
        output_fd = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        status_r, status_w = os.pipe()
        oom_before = self._oom_kills()
        try:
            self._set_cgroup_limits(limits)
        except OSError as exc:
            error = {"type": "CgroupError", "message": f"cgroup setup failed: {exc}"}
            send_message(self.control, {"event": "exit", "keeper_error": error, "output": ""})
            for fd in (task_fd, output_fd, status_r, status_w):
                os.close(fd)
            shutil.rmtree(scratch, ignore_errors=True)
            os.unlink(output_path)
            return
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            self.control.close()
            os.close(status_r)
            _keeper_process(request, task_fd, output_fd, status_w, scratch, self.config)
        os.close(task_fd)
        os.close(output_fd)
        os.close(status_w)
        killed_by = self._wait(pid, started + float(limits["wall_seconds"]))
        isolated = bool(self.config.get("pid_namespace"))
        if killed_by is not None or not isolated:
            self._kill_group_members()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        report = _read_all(status_r)
        os.close(status_r)
        if not isolated:  # a PID namespace dies with its first process; without one, sweep
            self._sweep_uid()
        self._drain_groups(time.monotonic() + DRAIN_SECONDS)
        output, truncated = _read_capped(output_path, int(limits["output_bytes"]))
        shutil.rmtree(scratch, ignore_errors=True)
        os.unlink(output_path)
        try:
            status = json.loads(report) if report else {"keeper_error": {"type": "NoReport", "message": "keeper died"}}
        except ValueError:
            status = {"keeper_error": {"type": "BadReport", "message": report[:200].decode("latin-1")}}
        status.update(
            event="exit",
            killed_by=killed_by,
            oom_kills=self._oom_kills() - oom_before,
            output=output,
            output_truncated=truncated,
            elapsed_seconds=time.monotonic() - started,
        )
        send_message(self.control, status)

    def _wait(self, pid: int, deadline: float) -> str | None:
        """Until the keeper exits, the host asks for a kill, or the wall deadline passes."""
        pidfd = os.pidfd_open(pid)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    os.kill(pid, signal.SIGKILL)
                    return "wall_timeout"
                ready, _, _ = select.select([pidfd, self.control.fileno()], [], [], remaining)
                if pidfd in ready:
                    return None
                if self.control.fileno() in ready:
                    try:
                        message = recv_message(self.control)
                    except EOFError:
                        os.kill(pid, signal.SIGKILL)
                        raise
                    if message.get("op") == "kill":
                        os.kill(pid, signal.SIGKILL)
                        return str(message.get("reason", "host"))
        finally:
            os.close(pidfd)


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


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        data = os.read(fd, 65536)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


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
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    ForkServer(control, config).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
