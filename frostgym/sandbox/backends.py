"""Choosing a backend: ``jail`` where it can run, else ``unshare``, else ``docker``.

The plain-subprocess ``insecure`` backend is never chosen automatically: it needs an
explicit ``allow_insecure=True``. ``FROSTGYM_SANDBOX`` overrides the automatic choice.
"""

from __future__ import annotations

import logging
import os
from typing import Literal, cast

from frostgym.core.errors import SandboxUnavailableError
from frostgym.sandbox.client import Launcher
from frostgym.sandbox.jail import BubblewrapLauncher, InsecureLauncher, UnshareLauncher

BackendName = Literal["auto", "jail", "unshare", "docker", "insecure"]
BACKENDS: tuple[BackendName, ...] = ("jail", "unshare", "docker", "insecure")
ENV_VAR = "FROSTGYM_SANDBOX"
AUTO_ORDER: tuple[BackendName, ...] = ("jail", "unshare", "docker")
log = logging.getLogger(__name__)


def _docker_reason() -> str | None:
    from frostgym.sandbox.docker_backend import DockerLauncher

    return DockerLauncher.available()


def unavailable_reason(backend: BackendName) -> str | None:
    """None when ``backend`` can run here, else a one-line reason."""
    if backend == "jail":
        return BubblewrapLauncher.available()
    if backend == "unshare":
        return UnshareLauncher.available()
    if backend == "docker":
        return _docker_reason()
    if backend == "insecure":
        return None
    raise ValueError(f"unknown sandbox backend {backend!r}; expected one of auto, {', '.join(BACKENDS)}")


def check_backend_name(name: str) -> BackendName:
    if name != "auto" and name not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r}; expected one of auto, {', '.join(BACKENDS)}")
    return cast(BackendName, name)


def resolve_backend(name: str = "auto", *, allow_insecure: bool = False) -> BackendName:
    """The concrete backend ``name`` means on this machine, or ``SandboxUnavailableError``."""
    backend = check_backend_name(os.environ.get(ENV_VAR, name) if name == "auto" else name)
    if backend == "insecure":
        if not allow_insecure:
            raise SandboxUnavailableError(
                "the insecure backend runs untrusted code without namespaces: pass allow_insecure=True to use it"
            )
        return backend
    if backend != "auto":
        reason = unavailable_reason(backend)
        if reason is not None:
            raise SandboxUnavailableError(f"sandbox backend {backend!r} cannot run here: {reason}")
        return backend
    reasons: list[str] = []
    for candidate in AUTO_ORDER:
        reason = unavailable_reason(candidate)
        if reason is None:
            if reasons:
                log.warning("sandbox: using %r (%s)", candidate, "; ".join(reasons))
            return candidate
        reasons.append(f"{candidate}: {reason}")
    if allow_insecure:
        log.warning("sandbox: falling back to the insecure backend (%s)", "; ".join(reasons))
        return "insecure"
    raise SandboxUnavailableError("no sandbox backend can run here: " + "; ".join(reasons))


def make_launcher(backend: BackendName) -> Launcher:
    if backend == "jail":
        return BubblewrapLauncher()
    if backend == "unshare":
        return UnshareLauncher()
    if backend == "docker":
        from frostgym.sandbox.docker_backend import DockerLauncher

        return DockerLauncher()
    if backend == "insecure":
        return InsecureLauncher()
    raise ValueError(f"resolve {backend!r} first")
