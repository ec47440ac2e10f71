"""Launchers that start the fork server as a local process: bubblewrap, unshare, or bare.

The server is root inside its jail only so it can fork each task into a new PID
namespace, move it into its cgroups and drop it to an unprivileged uid; the task itself
never holds root or any capability.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frostgym.core.errors import SandboxUnavailableError
from frostgym.sandbox import forkserver
from frostgym.sandbox.cgroups import TaskGroups, create_task_groups
from frostgym.sandbox.client import server_argv

SERVER_SCRIPT = Path(forkserver.__file__).resolve()
JAIL_SCRIPT = "/opt/frostgym/forkserver.py"
JAIL_SCRATCH = "/tmp/frostgym-scratch"
CONTROL_FD = 3
_uid_counter = itertools.count()


def task_uid() -> int:
    """A uid of its own for each server, so per-uid limits and sweeps never cross servers."""
    return 200_000 + (os.getpid() * 64 + next(_uid_counter)) % 1_000_000


def sandbox_python() -> Path:
    """The base interpreter (not a venv shim: a shim adds to every start and needs the venv)."""
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    return base if base.exists() else Path(sys.executable).resolve()


def _others_can_read(path: Path) -> bool:
    """Whether an unprivileged uid can reach ``path`` (o+x on every ancestor)."""
    return all(p.stat().st_mode & 0o001 for p in [*_ancestors(path), path] if p.is_dir())


def shared_python() -> Path:
    """An interpreter an unprivileged task can read its standard library from, for
    backends that show tasks the host's own filesystem (``unshare``): the base
    interpreter when its prefix is world-readable, else the system one of the same
    version (a pyenv under ``/root`` is not)."""
    python = sandbox_python()
    if _others_can_read(python.parent.parent):
        return python
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    return system if system.exists() else python


@dataclass
class SubprocessServer:
    """A fork server running as a child process of the host, talking over a socketpair."""

    process: subprocess.Popen[bytes]
    control: socket.socket
    groups: TaskGroups | None = None
    scratch_root: str | None = None  # a host directory to remove with the server (insecure)
    #: The process that started the server. In a forked copy of it, ``poll`` cannot see the
    #: server (not its child) and would call it gone: that copy only closes its own end.
    owner: int = field(default_factory=os.getpid)

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        self.control.close()
        if os.getpid() != self.owner:
            return
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        if self.groups is not None:
            self.groups.remove()
        if self.scratch_root is not None:
            shutil.rmtree(self.scratch_root, ignore_errors=True)


def _ancestors(path: Path) -> list[Path]:
    return [p for p in reversed(path.parents) if str(p) != "/"]


@dataclass
class BubblewrapLauncher:
    """The default jail: new IPC/PID/net/UTS namespaces, a tmpfs root, ``/usr`` and the
    interpreter read-only, nothing of the host's home, ``/etc`` or network."""

    name: str = "jail"
    use_cgroups: bool = True
    extra_config: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def available() -> str | None:
        """None when usable, else why not."""
        if shutil.which("bwrap") is None:
            return "bubblewrap (bwrap) is not installed"
        if os.geteuid() != 0:
            return "the jail drops tasks to another uid, which needs root"
        return None

    def argv(self, control_fd: int, groups: TaskGroups | None) -> list[str]:
        python = sandbox_python()
        prefix = python.parent.parent
        args = [
            "bwrap",
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for top in ("/bin", "/lib", "/lib64", "/sbin", "/lib32"):
            p = Path(top)
            if p.is_symlink():
                args += ["--symlink", os.readlink(p), top]
            elif p.is_dir():
                args += ["--ro-bind", top, top]
        if not str(prefix).startswith("/usr/"):
            for parent in _ancestors(prefix):
                args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", str(prefix), str(prefix)]
        args += ["--perms", "0755", "--dir", "/opt/frostgym", "--ro-bind", str(SERVER_SCRIPT), JAIL_SCRIPT]
        # /tmp is root's: a task writes only to its own scratch dir, removed after it.
        args += ["--proc", "/proc", "--dev", "/dev", "--perms", "0755", "--tmpfs", "/tmp"]
        cgroup_slots: list[list[str]] = []
        for slot, paths in enumerate(groups.slots if groups else ()):
            cgroup_slots.append([])
            for i, path in enumerate(paths):
                inside = f"/run/cgroup/{slot}-{i}"
                args += ["--bind", str(path), inside]
                cgroup_slots[-1].append(inside)
        args += ["--cap-add", "CAP_SETUID,CAP_SETGID,CAP_SYS_ADMIN,CAP_KILL,CAP_CHOWN,CAP_DAC_OVERRIDE,CAP_FOWNER"]
        config = {
            "control_fd": control_fd,
            "uid": task_uid(),
            "pid_namespace": True,
            "scratch_root": JAIL_SCRATCH,
            "cgroup_slots": cgroup_slots,
            **self.extra_config,
        }
        return [*args, "--", *server_argv(str(python), JAIL_SCRIPT, config)]

    def launch(self) -> SubprocessServer:
        why = self.available()
        if why is not None:
            raise SandboxUnavailableError(f"jail: {why}")
        groups = create_task_groups() if self.use_cgroups else None
        return _launch_with_fd(lambda fd: self.argv(fd, groups), groups)

    def close(self) -> None:
        pass


@dataclass
class UnshareLauncher:
    """Fallback without bubblewrap: util-linux ``unshare`` for IPC/PID/net/UTS/mount
    namespaces. The filesystem is the host's (read as an unprivileged uid), so this is
    weaker than ``jail`` on reads; writes, network, processes and memory are bounded alike."""

    name: str = "unshare"
    use_cgroups: bool = True

    @staticmethod
    def available() -> str | None:
        if shutil.which("unshare") is None:
            return "util-linux unshare is not installed"
        if os.geteuid() != 0:
            return "unshare namespaces and uid switching need root"
        return None

    def argv(self, control_fd: int, groups: TaskGroups | None) -> list[str]:
        config = {
            "control_fd": control_fd,
            "uid": task_uid(),
            "pid_namespace": True,
            "scratch_root": "/tmp/frostgym-scratch",
            "cgroup_slots": [[str(p) for p in slot] for slot in groups.slots] if groups else [],
            "private_mounts": ["/tmp", "/dev/shm"],
        }
        unshare = ["unshare", "--ipc", "--pid", "--net", "--uts", "--mount", "--fork", "--kill-child"]
        return unshare + server_argv(str(shared_python()), str(SERVER_SCRIPT), config)

    def launch(self) -> SubprocessServer:
        why = self.available()
        if why is not None:
            raise SandboxUnavailableError(f"unshare: {why}")
        groups = create_task_groups() if self.use_cgroups else None
        return _launch_with_fd(lambda fd: self.argv(fd, groups), groups)

    def close(self) -> None:
        pass


@dataclass
class InsecureLauncher:
    """A plain fork server with rlimits only: no namespaces, no uid change, the host's
    network and files. Only for machines where nothing else runs, and only on request."""

    name: str = "insecure"

    def argv(self, control_fd: int, scratch_root: str) -> list[str]:
        config = {"control_fd": control_fd, "uid": None, "pid_namespace": False, "scratch_root": scratch_root}
        return server_argv(str(sandbox_python()), str(SERVER_SCRIPT), config)

    def launch(self) -> SubprocessServer:
        scratch_root = tempfile.mkdtemp(prefix="frostgym-scratch-")
        try:
            server = _launch_with_fd(lambda fd: self.argv(fd, scratch_root), None)
        except BaseException:
            shutil.rmtree(scratch_root, ignore_errors=True)
            raise
        server.scratch_root = scratch_root
        return server

    def close(self) -> None:
        pass


def _launch_with_fd(make_argv: Callable[[int], list[str]], groups: TaskGroups | None) -> SubprocessServer:
    host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = server_end.fileno()
    try:
        process = subprocess.Popen(
            make_argv(fd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if os.environ.get("FROSTGYM_SANDBOX_DEBUG") else subprocess.DEVNULL,
            pass_fds=(fd,),
            start_new_session=True,
        )
    except OSError as exc:
        host_end.close()
        if groups is not None:
            groups.remove()
        raise SandboxUnavailableError(f"cannot start the fork server: {exc}") from None
    finally:
        server_end.close()
    return SubprocessServer(process, host_end, groups)
