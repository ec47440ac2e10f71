"""The ``docker`` backend: the fork server runs as PID 1 of a locked-down container.

Where bubblewrap is missing or not allowed, a Docker engine often is. One warm container
serves many tasks, exactly like the jail's fork server: the container costs a few hundred
milliseconds to start, a task costs a fork. The container has no network, a read-only
root, a small ``/tmp``, memory/pids/CPU limits for everything in it, and only the
capabilities the server needs to set up a task and drop it to an unprivileged uid.

How the host talks to it: the host listens on a Unix socket in a private directory that
is bind-mounted into the container, and the server connects back (``config["connect"]``).
Task sockets then cross the container boundary as ``SCM_RIGHTS`` file descriptors, so the
protocol and the client are the same as every other backend's.

No PID namespace per task (that needs ``CAP_SYS_ADMIN``, which the container does not
get): the container's own PID namespace bounds what a task can see and signal, and the
server's uid-wide ``SIGKILL`` sweep ends whatever a task left behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frostgym.core.errors import SandboxUnavailableError
from frostgym.sandbox.client import server_argv
from frostgym.sandbox.docker_image import SANDBOX_LABEL, cannot_build_reason, ensure_image
from frostgym.sandbox.jail import JAIL_SCRATCH, JAIL_SCRIPT, SERVER_SCRIPT, task_uid

# The ``docker`` package is optional: without it this backend is merely unavailable, and
# choosing a backend (which asks every one) must not fail on the import.
try:
    import docker  # type: ignore[import-untyped]
    import docker.errors  # type: ignore[import-untyped]
    import requests.exceptions
except ImportError as exc:
    DOCKER_IMPORT_ERROR: str | None = f"the docker Python package is not installed ({exc})"
else:
    DOCKER_IMPORT_ERROR = None

log = logging.getLogger(__name__)
GiB = 1024 * 1024 * 1024
SOCKET_DIR = "/run/frostgym"
SOCKET_NAME = "control.sock"
CONTAINER_PYTHON = "/usr/bin/python3"
# The container's own memory cgroup as it sees it (v1, v2): the server reads OOM kills
# there, so a task the container's OOM killer ends is classified ``memory_exceeded``.
CONTAINER_MEMORY_GROUPS = ("/sys/fs/cgroup/memory", "/sys/fs/cgroup")
ENGINE_TIMEOUT_S = 30
PING_TIMEOUT_S = 5
# Everything else is dropped. SETUID/SETGID: drop each task to its uid (and the sweep to
# it); CHOWN: hand the task its scratch dir; KILL: kill tasks of another uid;
# DAC_OVERRIDE/FOWNER: clean up scratch dirs the task owns.
SERVER_CAPABILITIES = ("SETUID", "SETGID", "CHOWN", "KILL", "DAC_OVERRIDE", "FOWNER")


def _engine_error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"no Docker engine: {text[:300]}"


def connect_engine(timeout: int = ENGINE_TIMEOUT_S) -> docker.DockerClient:
    """A client for the engine ``DOCKER_HOST`` names, checked with a ping.

    ``docker.from_env`` fails fast on a missing socket, a refused connection shows up on
    the first request; both become ``SandboxUnavailableError`` with the reason.
    """
    if DOCKER_IMPORT_ERROR is not None:
        raise SandboxUnavailableError(DOCKER_IMPORT_ERROR)
    try:
        client = docker.from_env(timeout=timeout)
    except docker.errors.DockerException as exc:
        raise SandboxUnavailableError(_engine_error(exc)) from None
    try:
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as exc:
        client.close()
        raise SandboxUnavailableError(_engine_error(exc)) from None
    return client


@dataclass
class DockerServer:
    """A fork server in a running container, connected back over a Unix socket."""

    control: socket.socket
    container: Any  # docker.models.containers.Container (the package has no type hints)
    socket_dir: Path
    container_name: str
    _dead: bool = field(default=False, repr=False)
    _terminated: bool = field(default=False, repr=False)

    def alive(self) -> bool:
        """Cheap: the server is the container's PID 1, so its socket reads EOF exactly when
        the container is gone (killed, OOM, removed). No engine round trip per task."""
        if self._dead:
            return False
        try:
            readable, _, _ = select.select([self.control], [], [], 0)
            if readable and not self.control.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                self._dead = True
        except (OSError, ValueError):
            self._dead = True
        return not self._dead

    def terminate(self) -> None:
        """Close the channel, remove the container, delete the socket directory. Idempotent."""
        if self._terminated:
            return
        self._dead = self._terminated = True
        with contextlib.suppress(OSError):
            self.control.close()
        _remove_container(self.container)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def _remove_container(container: Any) -> None:
    """Force-remove, never raise: this runs in cleanup paths (``terminate``, a failed
    start, ``close``) that must go on. If the engine refuses, the server still reads EOF on
    its closed socket and exits, and ``auto_remove`` takes the container away."""
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass  # auto_remove got there first
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        if getattr(exc, "status_code", None) != 409:  # 409: a removal already in progress
            log.warning("docker: cannot remove sandbox container %s: %s", getattr(container, "name", "?"), exc)


@dataclass
class DockerLauncher:
    """Starts fork servers in containers of the ``frostgym-sandbox`` image.

    The container limits bound the server and all its tasks together; the per-task limits
    (``SandboxLimits``: CPU seconds, address space, processes, file size) are rlimits set
    by the server, as in every backend. ``memory_bytes`` should exceed the per-task
    memory limit so a task's ``MemoryError`` comes before the container's OOM killer.
    """

    name: str = "docker"
    memory_bytes: int = 1 * GiB
    pids_limit: int = 256
    cpus: float = 1.0
    tmp_size: str = "256m"
    shm_size: str = "64m"
    image: str | None = None  # None: the recipe's image, built here if missing
    build_image: bool = True
    start_timeout: float = 20.0
    extra_config: dict[str, Any] = field(default_factory=dict)
    _client: Any = field(default=None, init=False, repr=False)
    _servers: list[DockerServer] = field(default_factory=list, init=False, repr=False)

    @staticmethod
    def available() -> str | None:
        """None when usable, else a one-line reason (no engine, no image and no way to build one)."""
        try:
            client = connect_engine(timeout=PING_TIMEOUT_S)
        except SandboxUnavailableError as exc:
            return str(exc)
        try:
            try:
                ensure_image(client, build=False)
            except SandboxUnavailableError:
                why = cannot_build_reason()
                if why is not None:
                    return f"the docker sandbox image is not built and cannot be built here: {why}"
        finally:
            client.close()
        return None

    def _engine(self) -> Any:
        if self._client is None:
            self._client = connect_engine()
        return self._client

    def container_kwargs(self, image: str, socket_dir: Path, name: str) -> dict[str, Any]:
        """The ``containers.run`` arguments: every restriction of the container in one place."""
        config = {
            "connect": f"{SOCKET_DIR}/{SOCKET_NAME}",
            "uid": task_uid(),
            "pid_namespace": False,
            "scratch_root": JAIL_SCRATCH,
            "cgroup_slots": [],  # the container's cgroups are read-only inside it
            "oom_groups": list(CONTAINER_MEMORY_GROUPS),
            **self.extra_config,
        }
        return {
            "image": image,
            "command": server_argv(CONTAINER_PYTHON, JAIL_SCRIPT, config),
            "name": name,
            "detach": True,
            # If the host dies, the server reads EOF and exits, and the engine removes the
            # container. FROSTGYM_SANDBOX_DEBUG keeps it for its log when it fails to start.
            "auto_remove": not os.environ.get("FROSTGYM_SANDBOX_DEBUG"),
            "labels": {SANDBOX_LABEL: "1", "frostgym.host_pid": str(os.getpid())},
            "user": "0:0",
            "hostname": "sandbox",
            "network_mode": "none",
            "read_only": True,
            # Root's, like the other backends' /tmp and /dev/shm: a task writes only to its own
            # scratch dir below /tmp (made and removed by the server), never to a place the
            # next task could read. Docker's tmpfs defaults add noexec,nosuid,nodev.
            "tmpfs": {
                "/tmp": f"size={self.tmp_size},mode=0755",
                "/dev/shm": f"size={self.shm_size},mode=0755",
            },
            "mem_limit": self.memory_bytes,
            "memswap_limit": self.memory_bytes,
            "pids_limit": self.pids_limit,
            "nano_cpus": int(self.cpus * 1e9),
            "cap_drop": ["ALL"],
            "cap_add": list(SERVER_CAPABILITIES),
            "security_opt": ["no-new-privileges"],
            "ipc_mode": "private",
            "volumes": {
                str(socket_dir): {"bind": SOCKET_DIR, "mode": "rw"},
                str(SERVER_SCRIPT): {"bind": JAIL_SCRIPT, "mode": "ro"},
            },
            "stdin_open": False,
            "tty": False,
        }

    def launch(self) -> DockerServer:
        client = self._engine()
        if self.image is None:
            self.image = ensure_image(client, build=self.build_image)
        socket_dir = Path(tempfile.mkdtemp(prefix="frostgym-docker-"))  # 0700: only root reaches the socket
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        name = f"frostgym-sandbox-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        container: Any = None
        try:
            listener.bind(str(socket_dir / SOCKET_NAME))
            listener.listen(1)
            try:
                container = client.containers.run(**self.container_kwargs(self.image, socket_dir, name))
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                raise SandboxUnavailableError(f"docker: cannot start the sandbox container: {exc}") from None
            control = self._accept(listener, container)
        except BaseException:
            listener.close()
            if container is not None:
                _remove_container(container)
            shutil.rmtree(socket_dir, ignore_errors=True)
            raise
        listener.close()
        # Connected: the path is no longer needed, and removing it now means a host process
        # killed without cleanup leaves nothing behind (its container goes on EOF).
        shutil.rmtree(socket_dir, ignore_errors=True)
        server = DockerServer(control, container, socket_dir, name)
        self._servers = [s for s in self._servers if not s._terminated] + [server]
        return server

    def _accept(self, listener: socket.socket, container: Any) -> socket.socket:
        """Wait for the server to connect, watching the container so a crash at start is
        reported at once (with its log) instead of after the whole timeout."""
        deadline = time.monotonic() + self.start_timeout
        next_check = time.monotonic() + 1.0
        listener.settimeout(0.1)
        while True:
            try:
                control, _ = listener.accept()
            except TimeoutError:
                pass
            else:
                control.settimeout(None)
                return control
            now = time.monotonic()
            if now >= deadline:
                raise SandboxUnavailableError(
                    f"docker: the fork server did not connect within {self.start_timeout:g} s{_log_tail(container)}"
                )
            if now >= next_check:
                next_check = now + 1.0
                try:
                    container.reload()
                    status = container.status
                except docker.errors.NotFound:
                    status = "removed"
                except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                    raise SandboxUnavailableError(f"docker: lost the engine while starting: {exc}") from None
                if status not in ("created", "running"):
                    raise SandboxUnavailableError(
                        f"docker: the sandbox container is {status} before connecting{_log_tail(container)}"
                    )

    def close(self) -> None:
        """Remove every container this launcher started that is still around."""
        for server in self._servers:
            if server._terminated:
                continue
            server.terminate()
        self._servers = []
        if self._client is not None:
            self._client.close()
            self._client = None


def _log_tail(container: Any) -> str:
    try:
        logs = container.logs(stdout=True, stderr=True, tail=20)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return ""
    text = logs.decode("utf-8", "replace").strip() if isinstance(logs, bytes) else str(logs).strip()
    return f"; container log: {text[-1000:]}" if text else ""


def sandbox_container_names(client: Any) -> list[str]:
    """Names of every container (running or not) labelled as a frostgym sandbox, for leak
    checks. One list call, no per-container inspect: others may vanish meanwhile."""
    listed = client.api.containers(all=True, filters={"label": f"{SANDBOX_LABEL}=1"})
    return [str(name).lstrip("/") for entry in listed for name in entry.get("Names") or []]
