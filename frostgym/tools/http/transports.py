"""The two ways a tool request can leave a client: nowhere, or to the loopback server.

Both are ``httpx.HTTPTransport`` subclasses that keep its ``handle_request``, the
method vcrpy patches, and swap only the connection pool underneath it. So vcrpy sees
(and records or matches) the request exactly as the client built it, with its
canonical ``https://api.<name>.frostgym.test`` URL, while:

- ``OfflineTransport``'s pool refuses every connection: in replay, a request vcrpy
  does not answer can never reach a network, whatever vcrpy does;
- ``LoopbackTransport``'s pool sends the request to ``http://127.0.0.1:<port>``
  instead, keeping the ``Host`` header, so the port never reaches a cassette.
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx

from frostgym.core.errors import FrostgymError


class NetworkBlockedError(FrostgymError, httpx.TransportError):
    """A tool request got past replay: the frozen world never opens a connection. Raised
    out of an ``offline_client`` request (``frostgym.tools.http.replay.run_call`` turns it
    into a ``network_blocked`` result); still an ``httpx.TransportError`` for httpx callers."""


class _RefusingPool:
    def handle_request(self, request: httpcore.Request) -> httpcore.Response:
        raise NetworkBlockedError(f"network disabled: no connection to {request.url.host.decode('ascii', 'replace')}")

    def close(self) -> None:
        pass

    def __enter__(self) -> _RefusingPool:
        return self

    def __exit__(self, *args: Any) -> None:
        pass


class _LoopbackPool:
    def __init__(self, inner: httpcore.ConnectionPool, port: int) -> None:
        self.inner = inner
        self.port = port

    def handle_request(self, request: httpcore.Request) -> httpcore.Response:
        url = httpcore.URL(scheme=b"http", host=b"127.0.0.1", port=self.port, target=request.url.target)
        rerouted = httpcore.Request(
            request.method, url, headers=request.headers, content=request.stream, extensions=request.extensions
        )
        return self.inner.handle_request(rerouted)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> _LoopbackPool:
        self.inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self.inner.__exit__(*args)


class OfflineTransport(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__(verify=False)  # never connects, so no certificates to load (loading them is slow)
        self._pool.close()
        self._pool = _RefusingPool()  # type: ignore[assignment]


class LoopbackTransport(httpx.HTTPTransport):
    def __init__(self, port: int) -> None:
        super().__init__(verify=False)  # plain HTTP to 127.0.0.1: nothing to verify
        self._pool = _LoopbackPool(self._pool, port)  # type: ignore[assignment]


def offline_client() -> httpx.Client:
    return httpx.Client(transport=OfflineTransport(), trust_env=False)


def loopback_client(port: int) -> httpx.Client:
    return httpx.Client(transport=LoopbackTransport(port), trust_env=False)
