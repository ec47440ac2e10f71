"""One warm sandbox per (thread, backend), shared by every env on that thread.

A fork server is cheap to keep and slow to start; envs come and go per episode. A
sandbox is single-threaded, so each worker thread gets its own. All are closed at exit.
"""

from __future__ import annotations

import atexit
import threading
import weakref

from frostgym.sandbox.backends import make_launcher, resolve_backend
from frostgym.sandbox.client import Sandbox
from frostgym.sandbox.limits import SandboxLimits

_local = threading.local()
_all: weakref.WeakSet[Sandbox] = weakref.WeakSet()
_all_lock = threading.Lock()


def thread_sandbox(backend: str = "auto", *, allow_insecure: bool = False) -> Sandbox:
    """This thread's sandbox for ``backend`` (resolved once per thread), started lazily."""
    cache: dict[tuple[str, bool], Sandbox] | None = getattr(_local, "sandboxes", None)
    if cache is None:
        cache = _local.sandboxes = {}
    key = (backend, allow_insecure)
    sandbox = cache.get(key)
    if sandbox is None:
        resolved = resolve_backend(backend, allow_insecure=allow_insecure)
        sandbox = Sandbox(make_launcher(resolved), SandboxLimits())
        cache[key] = sandbox
        with _all_lock:
            _all.add(sandbox)
    return sandbox


def close_thread_sandboxes() -> None:
    """Close the calling thread's sandboxes: for a worker thread that is about to end (its
    thread-local sandboxes would otherwise run on until ``close_all`` at exit)."""
    cache: dict[tuple[str, bool], Sandbox] | None = getattr(_local, "sandboxes", None)
    while cache:
        _, sandbox = cache.popitem()
        sandbox.close()


def close_all() -> None:
    with _all_lock:
        sandboxes = list(_all)
    for sandbox in sandboxes:
        sandbox.close()


atexit.register(close_all)
