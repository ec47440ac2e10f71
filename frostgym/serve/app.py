"""The ASGI app: OpenEnv's endpoints over frostgym's sessions.

Why FastAPI (with uvicorn) and not openenv-core's own server app: openenv-core 0.3.0's
``create_app`` imports fastmcp at import time (a plain ``pip install openenv-core`` pulls 47
packages, gradio among them), wants Pydantic action and observation classes, and its HTTP
``/reset`` and ``/step`` each make a fresh env and close it after the call, which cannot hold a
multi-turn episode; it has no body limit and no token. Its protocol is small, so this app speaks
it directly: OpenEnv's ``GenericEnvClient`` (async, and ``.sync()``) works against it unchanged.

Endpoints (request and answer shapes: ``frostgym.serve.wire``):

- ``POST /reset``: ``{"seed", "env_id", "env_kwargs", "task_id", "split", "options",
  "episode_id", "session_id"}``, all optional; ``POST /step``: ``{"action", "timeout_s",
  "request_id", "session_id"}``; both answer ``{"observation", "reward", "done"}``.
- ``GET /state?session_id=``, ``POST /close``, ``POST /make``, ``POST /oracle`` (403 without
  ``--allow-oracle``), ``GET /health``, ``GET /schema`` (actions, observations, state, reset
  fields, and per env its summary, its keyword arguments and the tools it offers), ``GET
  /metadata``.
- ``/ws``: one session per connection. Messages ``{"type": "reset", "data": {...}}``,
  ``{"type": "step", "data": ACTION}``, ``{"type": "state"}``, ``{"type": "close"}`` (OpenEnv's),
  and ``{"type": "make", "data": {...}}``, ``{"type": "oracle"}`` (frostgym's). Answers are
  ``{"type": "observation" | "state" | "env" | "oracle" | "error", "data": ...}``; an error keeps
  the session open, except a timeout (the session is closed, and so is the connection, code 4408).

Status codes: 400 not JSON; 401 no or wrong token; 403 oracle or gold without
``--allow-oracle``, or a server-only env argument; 404 unknown session, env id or task id; 408 a
call past its deadline; 409 a step with no episode running; 413 a body past ``max_body_bytes``
(a WebSocket message past it closes the connection, code 1009); 422 a field of the wrong type or
an action, argument or option the env refuses; 429 every session in use; 500 only for an env that
failed on a valid request (a grader bug), with its exception's class and drop class.

Security: a token, when set, must come with every request and handshake as
``Authorization: Bearer TOKEN``, or as HTTP basic auth with the token as password, which is
what a client that cannot set headers sends for a URL ``http://frostgym:TOKEN@HOST:PORT``
(OpenEnv's client connects with the ``websockets`` library, which does so).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import inspect
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import Response
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from frostgym.core.errors import WireError
from frostgym.serve import wire
from frostgym.serve.config import SERVER_ONLY_KWARGS, ServeConfig
from frostgym.serve.sessions import Session, SessionTable
from frostgym.version import __version__

LOG = logging.getLogger("uvicorn.error")  # the server's own log, where uvicorn writes its lines
#: WebSocket close code after a timeout (a step past its deadline, or a session idle too long).
CLOSE_TIMEOUT = 4408
#: Most bytes of an over-long body read (and dropped) before the 413 is sent, so a client that
#: writes its whole body before reading (most do) sees the 413 instead of a broken pipe.
DRAIN_LIMIT = 256 * 1024 * 1024


def create_app(config: ServeConfig) -> ASGIApp:
    """The server's ASGI app for ``config``; run it with uvicorn (``frostgym.serve.server``)."""
    table = SessionTable(config)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(table.expire_idle())
        try:
            yield
        finally:
            reaper.cancel()
            await table.shutdown()

    app = FastAPI(title="frostgym env server", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.sessions = table

    @app.exception_handler(WireError)
    async def wire_error(_: Request, error: Exception) -> Response:
        assert isinstance(error, WireError)
        return _json(wire.dumps(error.to_json()), error.status)

    @app.post("/reset")
    async def reset(request: Request) -> Response:
        body = await _body(request, config)
        parsed = wire.parse_reset(None if not body else wire.loads_request(body))
        return _json(await table.on_http_session(parsed.session_id, lambda session: table.reset(session, parsed)))

    @app.post("/step")
    async def step(request: Request) -> Response:
        parsed = wire.parse_step(wire.loads_request(await _body(request, config)))
        return _json(await table.step(table.get(parsed.session_id), parsed.action, parsed.timeout_s))

    @app.post("/make")
    async def make(request: Request) -> Response:
        body = await _body(request, config)
        data = None if not body else wire.loads_request(body)
        env_id, env_kwargs = wire.parse_make(data)
        session_id = wire.session_id_of(data) if isinstance(data, dict) else None
        return _json(await table.on_http_session(session_id, lambda session: table.make(session, env_id, env_kwargs)))

    @app.post("/oracle")
    async def oracle(request: Request) -> Response:
        return _json(await table.oracle(table.get(await _session_field(request, config))))

    @app.post("/close")
    async def close(request: Request) -> Response:
        await table.close(table.get(await _session_field(request, config)))
        return _json(wire.dumps({"closed": True}))

    @app.get("/state")
    async def state(session_id: str | None = None) -> Response:
        return _json(wire.dumps(await table.state(table.get(session_id))))

    @app.get("/health")
    async def health() -> Response:
        return _json(
            wire.dumps(
                {
                    "status": "healthy",
                    "sessions": table.in_use,
                    "max_sessions": config.max_sessions,
                    "allow_oracle": config.allow_oracle,
                    "envs": list(config.served),
                    "version": __version__,
                }
            )
        )

    schema_text: list[str] = []

    @app.get("/schema")
    async def schema() -> Response:
        if not schema_text:  # made once, off the event loop: it makes one env of every id
            schema_text.append(await asyncio.to_thread(_schema, config))
        return _json(schema_text[0])

    @app.get("/metadata")
    async def metadata() -> Response:
        return _json(
            wire.dumps(
                {
                    "name": "frostgym",
                    "description": "Frozen, seeded Gymnasium environments for LLM agents",
                    "version": __version__,
                    "envs": list(config.served),
                }
            )
        )

    @app.websocket("/ws")
    async def websocket(socket: WebSocket) -> None:
        try:
            session = table.open("ws")
        except WireError as error:
            await _deny(socket, error)
            return
        await socket.accept()
        try:
            await _serve_socket(socket, session, table)
        except WebSocketDisconnect:
            pass  # the client left while its call ran: the answer has no one to go to
        finally:
            await table.close(session)
            with contextlib.suppress(Exception):  # already closed by either side
                await socket.close()

    return Guard(app, config)


async def _serve_socket(socket: WebSocket, session: Session, table: SessionTable) -> None:
    """Answer ``socket``'s messages until it closes, sends ``close``, times out or sits idle."""
    idle = table.config.idle_timeout_s
    while True:
        try:
            message = await asyncio.wait_for(socket.receive(), idle)
        except TimeoutError:
            error = WireError(408, wire.SESSION_ERROR, f"the session sat idle for {idle:g} s and was closed")
            await socket.send_text(_ws_error(error))
            await socket.close(CLOSE_TIMEOUT)
            return
        if message["type"] == "websocket.disconnect":
            return
        raw: str | bytes = message.get("text") or message.get("bytes") or b""
        try:
            reply = await _answer(wire.loads_request(raw), session, table)
        except WireError as error:
            await socket.send_text(_ws_error(error))
            if error.code == wire.STEP_TIMEOUT:
                await socket.close(CLOSE_TIMEOUT)
                return
            continue
        if reply is None:  # the client said close
            return
        await socket.send_text(reply)


async def _answer(message: Any, session: Session, table: SessionTable) -> str | None:
    """The answer to one WebSocket message (None: close the session)."""
    if not isinstance(message, dict):
        raise WireError(422, wire.VALIDATION_ERROR, 'a message is a JSON object {"type": ..., "data": ...}')
    kind, data = message.get("type"), message.get("data")
    if kind == "reset":
        parsed = wire.parse_reset(data)
        if parsed.session_id is not None:
            raise WireError(422, wire.VALIDATION_ERROR, "session_id is for HTTP: a WebSocket is its own session")
        return _envelope("observation", await table.reset(session, parsed))
    if kind == "step":
        if "data" not in message:
            raise WireError(422, wire.VALIDATION_ERROR, 'a step message needs "data": the action')
        return _envelope("observation", await table.step(session, data))
    if kind == "state":
        return _envelope("state", wire.dumps(await table.state(session)))
    if kind == "make":
        env_id, env_kwargs = wire.parse_make(data)
        return _envelope("env", await table.make(session, env_id, env_kwargs))
    if kind == "oracle":
        return _envelope("oracle", await table.oracle(session))
    if kind == "close":
        return None
    raise WireError(
        422, wire.UNKNOWN_TYPE, f"unknown message type {kind!r:.50}; known: reset, step, state, close, make, oracle"
    )


def _envelope(kind: str, data_text: str) -> str:
    return f'{{"type":"{kind}","data":{data_text}}}'


def _ws_error(error: WireError) -> str:
    return _envelope("error", wire.dumps(error.to_json()))


def _json(text: str, status: int = 200) -> Response:
    return Response(text.encode("utf-8"), status, media_type="application/json")


async def _body(request: Request, config: ServeConfig) -> bytes:
    """The request body; ``WireError`` 413 as soon as it grows past ``max_body_bytes`` (a body
    that declares its length is refused before this, by ``Guard``)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > config.max_body_bytes:
                raise WireError(
                    413, wire.TOO_LARGE, f"the body is over the server's limit of {config.max_body_bytes} bytes"
                )
            chunks.append(chunk)
    except ClientDisconnect:  # ordinary client behaviour: one line in the log, no traceback
        client = f"{request.client.host}:{request.client.port}" if request.client else "a client"
        LOG.info("%s left before its body of %s %s was read", client, request.method, request.url.path)
        raise WireError(400, wire.CLIENT_GONE, "the client left before its body was read") from None
    return b"".join(chunks)


async def _session_field(request: Request, config: ServeConfig) -> str | None:
    body = await _body(request, config)
    data = None if not body else wire.loads_request(body)
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) - {"session_id"}:
        raise WireError(422, wire.VALIDATION_ERROR, 'the body is empty or {"session_id": "..."}')
    return wire.session_id_of(data)


async def _deny(socket: WebSocket, error: WireError) -> None:
    """Refuse a WebSocket handshake with ``error``'s status and JSON body where the server can
    send one, else close it (code 1008)."""
    if "websocket.http.response" in socket.scope.get("extensions", {}):
        await socket.send_denial_response(_json(wire.dumps(error.to_json()), error.status))
    else:
        await socket.close(1008, error.message[:120])


def _schema(config: ServeConfig) -> str:
    """``GET /schema``'s answer: OpenEnv's ``action``/``observation``/``state`` schemas, the
    reset fields, and per served env its family, summary, keyword arguments (with defaults) and
    the tools it offers before any episode (an episode's own come with every observation)."""
    from frostgym.envs.registry import ENTRIES, make_env

    summaries = {e.id: e.summary for e in ENTRIES}

    envs: dict[str, Any] = {}
    for env_id in config.served:
        env = make_env(env_id, None, {})
        try:
            parameters = inspect.signature(type(env).__init__).parameters
            kwargs = {
                name: _default(p.default)
                for name, p in parameters.items()
                if name not in SERVER_ONLY_KWARGS and p.kind == p.KEYWORD_ONLY
            }
            envs[env_id] = {
                "family": env.family,
                "summary": summaries.get(env_id, ""),
                "env_version": env.env_version,
                "env_kwargs": kwargs,
                "tools": getattr(env, "tools", None),
            }
        finally:
            env.close()
    return wire.dumps({**wire.SCHEMAS, "envs": envs})


def _default(value: Any) -> Any:
    """A keyword argument's default as JSON: itself when it is a JSON scalar, else its repr."""
    if value is inspect.Parameter.empty:
        return None
    return value if value is None or isinstance(value, str | int | float | bool) else repr(value)


class Guard:
    """ASGI middleware in front of the app: the token on every request and handshake (401),
    and a declared body length past the limit (413, after reading and dropping up to
    ``DRAIN_LIMIT`` bytes of it)."""

    def __init__(self, app: ASGIApp, config: ServeConfig) -> None:
        self.app = app
        self.config = config
        self.expected = None if config.token is None else config.token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.expected is not None and not self._authorized(headers.get(b"authorization", b"")):
            error = WireError(401, wire.UNAUTHORIZED, "this server needs its token: send 'Authorization: Bearer TOKEN'")
            if scope["type"] == "http":
                await _respond(send, error, [(b"www-authenticate", b'Bearer realm="frostgym"')])
            elif "websocket.http.response" in scope.get("extensions", {}):
                await _respond(send, error, [], prefix="websocket.")
            else:
                await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
            return
        if scope["type"] == "http":
            try:
                length = int(headers.get(b"content-length", b"0"))
            except ValueError:
                length = 0
            if length > self.config.max_body_bytes:
                await _drain(receive, min(length, DRAIN_LIMIT))
                limit = self.config.max_body_bytes
                error = WireError(
                    413, wire.TOO_LARGE, f"the body ({length} bytes) is over the server's limit of {limit}"
                )
                await _respond(send, error, [(b"connection", b"close")])
                return
        await self.app(scope, receive, send)

    def _authorized(self, header: bytes) -> bool:
        assert self.expected is not None
        scheme, _, value = header.partition(b" ")
        scheme = scheme.lower()
        if scheme == b"bearer":
            return hmac.compare_digest(value.strip(), self.expected)
        if scheme == b"basic":
            try:
                decoded = base64.b64decode(value.strip(), validate=True)
            except (binascii.Error, ValueError):
                return False
            return hmac.compare_digest(decoded.partition(b":")[2], self.expected)
        return False


async def _drain(receive: Receive, limit: int) -> None:
    read = 0
    while read < limit:
        message: Message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _respond(send: Send, error: WireError, headers: list[tuple[bytes, bytes]], prefix: str = "") -> None:
    body = wire.dumps(error.to_json()).encode("utf-8")
    await send(
        {
            "type": f"{prefix}http.response.start",
            "status": error.status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": f"{prefix}http.response.body", "body": body})
