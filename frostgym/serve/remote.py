"""A remote env: a gymnasium env whose reset and step run on a ``frostgym serve`` server.

Why a WebSocket session and not stateless HTTP: each ``RemoteEnv`` is one connection and so
one session with its own env on the server, so any number of them coexist (a vector env, the
runner's batch) and a session ends when its connection does, never left behind by a client
that died. Everything an in-process env returns comes back as it was (``frostgym.serve.wire``):
the same observation, reward, flags and info, grade included, for the same seed and actions;
an exception the env raised is raised here as the same class with the same message.

Usage::

    from frostgym.serve.remote import make

    env = make("http://127.0.0.1:8000", "frostgym/Arithmetic-v0", level=1)
    observation, info = env.reset(seed=42)
    observation, reward, terminated, truncated, info = env.step("<answer>7</answer>")
    env.close()

The server's token goes in ``token=`` (sent as ``Authorization: Bearer``) or in the URL
(``http://frostgym:TOKEN@HOST:PORT``, sent as basic auth). ``oracle_action`` needs a server
started with ``--allow-oracle`` (else ``ServedEnvError``, status 403), and so do the grade
``details`` in ``info``: without it they are withheld.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from typing import Any, SupportsFloat

import gymnasium
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from frostgym.core.errors import RemoteConnectionError, ServedEnvError, WireError
from frostgym.core.messages import Action, Observation
from frostgym.core.spaces import ChatObservationSpace, TextActionSpace
from frostgym.serve import wire

__all__ = ["RemoteConnectionError", "RemoteEnv", "ServedEnvError", "make", "websocket_url"]


def websocket_url(url: str) -> str:
    """The ``/ws`` endpoint of a server at ``url`` (``http://``, ``https://``, ``ws://`` or
    ``wss://``; a bare ``HOST:PORT`` is ``http``). ``ValueError`` for another scheme."""
    if "://" not in url:
        url = f"http://{url}"
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ValueError(f"not an env server URL: {url!r} (expected http://HOST:PORT)")
    return urllib.parse.urlunsplit((scheme, parts.netloc, f"{parts.path}/ws", "", ""))


class RemoteEnv(gymnasium.Env[Observation, Action]):
    """``env_id`` made with ``env_kwargs`` on the server at ``url``, stepped over one WebSocket
    session. It keeps ``FrozenEnv``'s contract (its docstring), and also has ``turn``,
    ``tools``, ``max_turns`` and ``oracle_action`` as a ``FrozenEnv`` does, so the runner can
    play it (``frostgym.run.remote_backend``).

    ``token``: the server's shared token; ``connect_timeout_s``: the longest wait to connect;
    ``timeout_s``: the longest wait for one answer (None: as long as the server's own deadline
    lets a call run). Raises ``RemoteConnectionError`` when the server cannot be reached, and
    what the server refuses as the env would: ``ValueError`` for an argument the env does not
    take, ``ServedEnvError`` (status 404) for an id it does not serve, 429 when it is full.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's API)

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        token: str | None = None,
        connect_timeout_s: float = 30.0,
        timeout_s: float | None = None,
        **env_kwargs: Any,
    ) -> None:
        self.url = url
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.timeout_s = timeout_s
        self.observation_space = ChatObservationSpace()
        self.action_space = TextActionSpace()
        self.tools: list[dict[str, Any]] | None = None
        self._turn = 0
        self._socket: ClientConnection | None = None
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        try:
            opening = connect(
                websocket_url(url),
                additional_headers=headers,
                open_timeout=connect_timeout_s,
                max_size=None,  # the server bounds what it sends: whole conversations can be long
                compression=None,
            )
            self._socket = opening.__enter__()  # websockets 17 wants its context; close() exits it
        except InvalidStatus as error:
            raise _refusal(error) from None
        except (OSError, TimeoutError, InvalidHandshake) as error:
            raise RemoteConnectionError(f"cannot reach the env server at {url}: {error}") from error
        try:
            made = self._ask("make", {"env_id": env_id, "env_kwargs": self.env_kwargs}, "env")
        except BaseException:
            self.close()
            raise
        self.tools = made["tools"]
        self.max_turns: int = made["max_turns"]

    @property
    def turn(self) -> int:
        """Replies made in the current episode (``info["turn"]`` of the last answer)."""
        return self._turn

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        result = wire.read_result(self._ask("reset", {"seed": seed, "options": options}, "observation"))
        self.tools, self._turn = result.tools, result.info.get("turn", 0)
        return result.messages, result.info

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        result = wire.read_result(self._ask("step", action, "observation"))
        self.tools, self._turn = result.tools, result.info.get("turn", self._turn)
        return result.messages, result.reward, result.terminated, result.truncated, result.info

    def oracle_action(self) -> Action:
        """The gold action of the current step (a server started with ``--allow-oracle`` only)."""
        return self._ask("oracle", None, "oracle")["action"]  # type: ignore[no-any-return]

    def state(self) -> dict[str, Any]:
        """The server's view of this session: env, episode id, turn, whether it is over."""
        return self._ask("state", None, "state")  # type: ignore[no-any-return]

    def close(self) -> None:
        """End the session (its env is closed on the server); safe to call twice."""
        socket, self._socket = self._socket, None
        if socket is not None:
            with contextlib.suppress(ConnectionClosed, OSError):  # the server may have closed it already
                socket.send(wire.dumps({"type": "close"}))
            socket.close()
        super().close()

    def _ask(self, kind: str, data: Any, expected: str) -> Any:
        """Send one message and wait for its answer's ``data``; raise what an error answer says."""
        if self._socket is None:
            raise RemoteConnectionError(f"this remote {self.env_id} is closed")
        message = {"type": kind} if data is None and kind != "step" else {"type": kind, "data": data}
        try:
            self._socket.send(wire.dumps(message))
            raw = self._socket.recv(timeout=self.timeout_s)
        except ConnectionClosed as error:
            raise RemoteConnectionError(f"the env server at {self.url} closed the session: {error}") from error
        except (OSError, TimeoutError) as error:
            raise RemoteConnectionError(f"no answer from the env server at {self.url}: {error}") from error
        answer = wire.loads(raw)
        if not isinstance(answer, dict):
            raise RemoteConnectionError(f"not an env server's answer: {str(answer)[:200]}")
        if answer.get("type") == "error":
            raise wire.exception_from(answer.get("data"))
        if answer.get("type") != expected:
            raise RemoteConnectionError(f"expected a {expected!r} answer, got {str(answer)[:200]}")
        return answer.get("data")


def _refusal(error: InvalidStatus) -> BaseException:
    """The exception for a handshake the server refused with a status (401, 429)."""
    response = error.response
    try:
        body = wire.loads(bytes(response.body or b""))
    except WireError:
        body = {"status": response.status_code, "code": "", "message": response.reason_phrase}
    return wire.exception_from(body)


def make(url: str, env_id: str, *, token: str | None = None, **env_kwargs: Any) -> RemoteEnv:
    """``env_id`` made with ``env_kwargs`` (``split``, ``level``, ``max_turns``, ...) on the
    ``frostgym serve`` server at ``url``, as a gymnasium env (``RemoteEnv``). Raises what
    ``RemoteEnv`` raises."""
    return RemoteEnv(url, env_id, token=token, **env_kwargs)
