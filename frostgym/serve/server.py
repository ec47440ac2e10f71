"""Running the app: in the foreground (``frostgym serve``) or on a thread (tests, benchmarks).

Why its own module: both ways build the same uvicorn configuration (the WebSocket message limit
is the body limit, the graceful-shutdown window covers the longest call), and the thread form
binds its socket before it starts, so a caller can ask for port 0 and learn the port it got.

Shutdown (Ctrl-C or SIGTERM in the foreground, ``stop`` on a thread) is uvicorn's graceful one:
it stops accepting connections, lets in-flight HTTP requests finish and answer, closes WebSocket
sessions (code 1012; a step already running finishes in its env first), then the app closes
every session's env and sandbox (``SessionTable.shutdown``).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from types import TracebackType

import uvicorn

from frostgym.serve.app import create_app
from frostgym.serve.config import ServeConfig


class _DenialNoise(logging.Filter):
    """Drops uvicorn's "returned without completing handshake" error, which its sans-io
    WebSocket protocol (uvicorn 0.54) logs after every handshake the app refuses with a status
    (401, 429): that path never marks the handshake done. The app accepts or refuses every one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "without completing handshake" not in record.getMessage()


_FILTER = _DenialNoise()


def uvicorn_config(config: ServeConfig, *, log_level: str = "info") -> uvicorn.Config:
    """uvicorn's settings for ``config``."""
    logging.getLogger("uvicorn.error").addFilter(_FILTER)  # once: a filter is added at most once
    return uvicorn.Config(
        create_app(config),
        host=config.host,
        port=config.port,
        ws="websockets-sansio",
        ws_max_size=config.max_body_bytes,
        ws_ping_interval=None,  # sessions end by idle timeout, not by a missed ping during a long step
        lifespan="on",
        log_level=log_level,
        timeout_graceful_shutdown=int(config.step_timeout_s) + 5,
        server_header=False,
    )


def serve(config: ServeConfig, *, log_level: str = "info") -> None:
    """Serve ``config`` in the foreground until Ctrl-C or SIGTERM; ``OSError`` when it cannot
    start (the address is taken: uvicorn's log line above says why)."""
    server = uvicorn.Server(uvicorn_config(config, log_level=log_level))
    try:
        server.run()
    except SystemExit as error:  # uvicorn exits when it cannot bind
        if server.started:
            raise
        raise OSError(f"the server did not start (uvicorn exit code {error.code})") from None


class ServerThread:
    """A server on a background thread of this process, listening on ``config.host`` at
    ``config.port`` (0: a free port, read back from ``url``). Use as a context manager, or
    ``start`` and ``stop``."""

    def __init__(self, config: ServeConfig, *, log_level: str = "warning") -> None:
        self.config = config
        self.server = uvicorn.Server(uvicorn_config(config, log_level=log_level))
        self._socket = socket.create_server((config.host, config.port))
        self.port: int = self._socket.getsockname()[1]
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._socket]}, name="frostgym-serve", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> ServerThread:
        """Start serving; ``RuntimeError`` when the server is not up within ``timeout_s``."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the env server did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Shut down gracefully (see the module docstring) and wait for the thread."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._socket.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
