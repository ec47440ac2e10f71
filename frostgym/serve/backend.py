"""The runner's remote backend: envs live on a ``frostgym serve`` server, the agent stays here.

Why: as with Ray (``frostgym.integrations.ray_backend``), only where the envs live changes.
The runner still batches agent calls across episodes and decides retries, drops and the order
outcomes are written in, so a card played through ``frostgym eval --backend remote`` equals the
local one except its timings and hosts. Every env the runner asks for is one ``RemoteEnv`` (one
WebSocket session); a batch's steps go out on ``threads`` threads at once.

The server must trust this client with gold (``frostgym serve --allow-oracle``): the oracle
agent reads oracle actions, and a card records every grade's ``details``, which such a server
sends only then. ``RemoteEnvs.connect`` checks that, and that the plan's env ids are served,
before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from frostgym.core.splits import Split
from frostgym.serve.client import RemoteConnectionError, RemoteEnv


class RemoteEnvs:
    """An ``EnvBackend`` (``frostgym.runner``) on the server at ``address``. Use ``connect``."""

    def __init__(self, address: str, health: Mapping[str, Any], *, token: str | None = None, threads: int = 16) -> None:
        if threads < 1:
            raise ValueError(f"need at least one thread, got {threads}")
        self.address = address
        self.health = dict(health)
        self.token = token
        self.threads = threads

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
    def make_env(self, env_id: str, split: Split | str, env_kwargs: Mapping[str, Any]) -> RemoteEnv:
        return RemoteEnv(self.address, env_id, token=self.token, split=split, **env_kwargs)

    def step_threads(self, workers: int) -> int:
        return max(workers, self.threads)

    # -- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        """Nothing to release: the runner closes every env (and so its session) it made."""

    def __enter__(self) -> RemoteEnvs:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
