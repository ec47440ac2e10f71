"""The runner's remote backend: envs live on a ``frostgym serve`` server, the agent stays here.

Why: as with Ray (``frostgym.run.ray_backend``), only where the envs live changes.
The runner still batches agent calls across episodes and decides retries, drops and the order
outcomes are written in, so a card played through ``frostgym eval --backend remote`` equals the
local one except its timings and hosts. Every env the runner asks for is one ``RemoteEnv`` (one
WebSocket session); a batch's steps go out on ``threads`` threads at once.

A server that dies is not a property of the episodes: when a call to it fails for want of a
connection, the backend asks the server's ``/health`` (twice, a second apart); when that fails
too, it raises ``BackendLostError``, so the runner stops, the card is closed as
``interrupted``, and ``--resume`` against the restarted server plays what is left. A lost
connection to a server that still answers is that episode's ``infra_error``, as before.

The server must trust this client with gold (``frostgym serve --allow-oracle``): the oracle
agent reads oracle actions, and a card records every grade's ``details``, which such a server
sends only then. ``RemoteEnvs.connect`` checks that, and that the plan's env ids are served,
before anything runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, SupportsFloat, TypeVar

import httpx

from frostgym.core.errors import BackendLostError, RemoteConnectionError
from frostgym.core.messages import Action, Observation
from frostgym.core.splits import Split
from frostgym.serve.remote import RemoteEnv

T = TypeVar("T")
#: How a lost connection is told from a lost server: this many ``/health`` probes, this far apart.
HEALTH_PROBES = 2
PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 5.0


class RemoteEnvs:
    """An ``EnvBackend`` (``frostgym.run.runner``) on the server at ``address``. Use ``connect``."""

    def __init__(self, address: str, health: Mapping[str, Any], *, token: str | None = None, threads: int = 16) -> None:
        if threads < 1:
            raise ValueError(f"need at least one thread, got {threads}")
        self.address = address
        self.health = dict(health)
        self.token = token
        self.threads = threads
        self._lost: str | None = None  # why the server is known to be gone
        self._probing = threading.Lock()

    @classmethod
    def connect(
        cls, address: str, env_ids: Sequence[str], *, token: str | None = None, threads: int = 16
    ) -> RemoteEnvs:
        """The backend for the server at ``address``, after checking it: ``RemoteConnectionError``
        when it cannot be reached or refuses the token; ``ValueError`` when it does not serve one
        of ``env_ids`` or was started without ``--allow-oracle``."""
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        url = address if "://" in address else f"http://{address}"
        try:
            response = httpx.get(f"{url.rstrip('/')}/health", headers=headers, timeout=30.0)
        except httpx.HTTPError as error:
            raise RemoteConnectionError(f"cannot reach the env server at {address}: {error}") from error
        if response.status_code != 200:
            raise RemoteConnectionError(f"the env server at {address} answered {response.status_code}: {response.text}")
        health = response.json()
        missing = [env_id for env_id in env_ids if env_id not in health.get("envs", [])]
        if missing:
            raise ValueError(f"the env server at {address} does not serve {', '.join(missing)}")
        if not health.get("allow_oracle"):
            raise ValueError(
                f"the env server at {address} was started without --allow-oracle: it withholds oracle actions and "
                "grade details (they quote gold answers), which a card records; restart it with --allow-oracle"
            )
        return cls(url, health, token=token, threads=threads)

    # -- EnvBackend --------------------------------------------------------------------------
    def make_env(self, env_id: str, split: Split | str, env_kwargs: Mapping[str, Any]) -> ServedEnv:
        remote = self.guarded(lambda: RemoteEnv(self.address, env_id, token=self.token, split=split, **env_kwargs))
        return ServedEnv(remote, self)

    def step_threads(self, workers: int) -> int:
        return max(workers, self.threads)

    # -- a lost server ----------------------------------------------------------------------
    def guarded(self, call: Callable[[], T]) -> T:
        """``call()``; a ``RemoteConnectionError`` it raises becomes ``BackendLostError`` when
        the server no longer answers ``/health`` (and every later call fails fast)."""
        if self._lost is not None:
            raise BackendLostError(self._lost)
        try:
            return call()
        except RemoteConnectionError as error:
            if self.reachable():
                raise
            raise BackendLostError(self._lost or str(error)) from error

    def reachable(self) -> bool:
        """Whether the server answers ``/health`` within ``HEALTH_PROBES`` tries; once it did
        not, it is lost for this run (one thread probes; the others wait for its verdict)."""
        with self._probing:
            if self._lost is not None:
                return False
            headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
            last = ""
            for attempt in range(HEALTH_PROBES):
                if attempt:
                    time.sleep(PROBE_INTERVAL_S)
                try:
                    if httpx.get(
                        f"{self.address.rstrip('/')}/health", headers=headers, timeout=PROBE_TIMEOUT_S
                    ).is_success:
                        return True
                    last = "its /health did not answer 200"
                except httpx.HTTPError as error:
                    last = f"{type(error).__name__}: {error}"
            self._lost = (
                f"the env server at {self.address} (--backend remote) is unreachable ({last}); the run stopped "
                "and its card is interrupted: restart the server, then run the same command with --resume"
            )
            return False

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Nothing to release: the runner closes every env (and so its session) it made."""

    def __enter__(self) -> RemoteEnvs:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class ServedEnv:
    """A ``RemoteEnv`` as the runner plays it through ``RemoteEnvs``: the same calls, with a
    lost server raised as ``BackendLostError`` (``RemoteEnvs.guarded``)."""

    def __init__(self, remote: RemoteEnv, backend: RemoteEnvs) -> None:
        self.remote = remote
        self.backend = backend

    @property
    def turn(self) -> int:
        return self.remote.turn

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return self.remote.tools

    @property
    def max_turns(self) -> int:
        return self.remote.max_turns

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        return self.backend.guarded(lambda: self.remote.reset(seed=seed, options=options))

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        return self.backend.guarded(lambda: self.remote.step(action))

    def oracle_action(self) -> Action:
        return self.backend.guarded(self.remote.oracle_action)

    def close(self) -> None:
        self.remote.close()
