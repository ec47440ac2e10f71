"""Sessions: who holds which env, and the limits on them.

Why its own module: the app (``frostgym.serve.app``) only parses requests and writes answers;
everything that touches an env happens here, under the rules every transport shares.

- **A session holds one env** (made with ``frostgym.envs.registry.make_env``), reused across
  resets like the runner's envs, and remade when a reset names another id or other keyword
  arguments. A WebSocket connection is one session; over HTTP a request names its session
  with ``session_id`` (any string the client picks), and one without it uses the server's
  ``default`` session, so ``curl`` can reset and step. OpenEnv's own server makes a fresh env
  for every HTTP request, which cannot hold a multi-turn episode; frostgym keeps it.
- **Limits.** At most ``max_sessions`` sessions at once (429 past that, never a 5xx); an HTTP
  session unused for ``idle_timeout_s`` is closed (a WebSocket one by its connection, see the
  app); one make, reset or step may run ``step_timeout_s`` (or the client's shorter
  ``timeout_s``): past it the answer is 408, the session is closed and its env is told to
  stop the call (``FrozenEnv.interrupt``: Code-v0 kills the sandboxed process; SQL-v0's
  queries stop at their own one-second deadline). A thread cannot be killed, so the env is
  closed when the call returns, and the call counts against ``max_sessions`` until then:
  stuck calls cannot pile up past the cap.
- **Resource limits are the server's.** A client's ``env_kwargs`` may not name a
  server-only argument (``sandbox``, ``allow_insecure``: 403) nor set an env's
  ``limit_kwargs`` above their defaults (403), unless the server was started with
  ``--allow-wider-limits``; every argument is checked against its declared type when the
  env is made (422, ``frostgym.core.arguments``).
- **One call per session at a time** (an ``asyncio.Lock``), on the session's own worker thread,
  so the event loop never waits on an env. Code-v0's sandboxes are per thread
  (``frostgym.sandbox.pool``), as in process, so a Code-v0 session keeps one warm sandbox for
  its life (a shared pool would hand its calls to threads without one, each starting another),
  and its thread closes it when the session ends.
- **Shutdown** waits for every running call (each bounded by its deadline), then closes every
  session's env and sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from frostgym.core.arguments import widened_limits
from frostgym.core.env import FrozenEnv
from frostgym.core.errors import WireError
from frostgym.envs.registry import env_class, make_env
from frostgym.sandbox.pool import close_thread_sandboxes
from frostgym.serve import wire
from frostgym.serve.config import SERVER_ONLY_KWARGS, ServeConfig

T = TypeVar("T")
Kind = Literal["http", "ws"]
DEFAULT_SESSION = "default"


@dataclass(eq=False)
class Session:
    """One client's env and the thread it runs on: ``key`` is ``http:<session_id>`` or ``ws:<uuid>``."""

    key: str
    kind: Kind
    worker: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="frostgym-session")
    )
    env: FrozenEnv | None = None
    env_id: str | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False
    #: The last answer's ``info["task_id"]`` and whether its episode is over (for ``state``).
    task_id: str | None = None
    done: bool = True
    #: Whether a call ever ran, and so the session's thread was started.
    used: bool = False

    @property
    def session_id(self) -> str:
        return self.key.partition(":")[2]


class SessionTable:
    """Every open session of one server, with its limits (see the module docstring). Methods
    that answer a client return the answer as JSON text and raise ``WireError`` for an error
    answer. Call them from the server's event loop."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.sessions: dict[str, Session] = {}
        self._stuck = 0  # envs whose call outlived its deadline and is still running
        self._stuck_lock = threading.Lock()
        # Each served env's module is imported here, at start: a client's first make or reset
        # must not pay an import against its step deadline (on a loaded machine, over 1 s).
        for env_id in config.served:
            env_class(env_id)

    # -- the table -------------------------------------------------------------------------
    @property
    def in_use(self) -> int:
        """Sessions open plus calls still running past their deadline: what counts against the cap."""
        with self._stuck_lock:
            return len(self.sessions) + self._stuck

    def open(self, kind: Kind, session_id: str | None = None) -> Session:
        """A new session (``session_id``: an HTTP one's name; a WebSocket one gets a fresh id).
        ``WireError`` 429 when ``max_sessions`` are in use."""
        if self.in_use >= self.config.max_sessions:
            raise WireError(
                429,
                wire.CAPACITY_REACHED,
                f"the server holds its maximum of {self.config.max_sessions} sessions: close one "
                "(or let it expire) and retry, or start the server with a larger --max-sessions",
            )
        key = f"{kind}:{session_id if session_id is not None else uuid.uuid4().hex}"
        session = self.sessions[key] = Session(key, kind)
        return session

    async def on_http_session(self, session_id: str | None, call: Callable[[Session], Awaitable[T]]) -> T:
        """``call`` on the HTTP session ``session_id`` (None: the default one), opened for it
        when none is: a session opened for a call that is refused is closed again, so a
        refused request holds no session. ``WireError`` as ``open`` and ``call`` raise it."""
        session = self.find(session_id)
        opened = session is None
        if session is None:
            session = self.open("http", DEFAULT_SESSION if session_id is None else session_id)
        try:
            return await call(session)
        except WireError:
            if opened:
                await self.close(session)
            raise

    def find(self, session_id: str | None) -> Session | None:
        """The HTTP session ``session_id`` (None: the default one), if open."""
        return self.sessions.get(f"http:{session_id if session_id is not None else DEFAULT_SESSION}")

    def get(self, session_id: str | None) -> Session:
        """The HTTP session ``session_id``; ``WireError`` 404 when it is not open."""
        session = self.find(session_id)
        if session is None:
            name = session_id if session_id is not None else DEFAULT_SESSION
            raise WireError(
                404,
                wire.SESSION_ERROR,
                f"no open session {name!r}: POST /reset opens one (sessions idle for "
                f"{self.config.idle_timeout_s:g} s are closed)",
            )
        return session

    async def close(self, session: Session) -> None:
        """Close ``session``, its env and its thread's sandboxes, after any call it is running."""
        async with session.lock:
            if session.closed:
                return
            session.closed = True
            self.sessions.pop(session.key, None)
            env, session.env = session.env, None
            if session.used:
                await asyncio.wrap_future(session.worker.submit(_release, env))
            session.worker.shutdown(wait=False)

    # -- what a client asks of its env ---------------------------------------------------------
    async def make(self, session: Session, env_id: str | None, env_kwargs: dict[str, Any] | None) -> str:
        """Make (or keep) the session's env; the answer names it and its tools."""

        def run() -> str:
            env = self._env_for(session, env_id, env_kwargs)
            return wire.dumps(
                {
                    "env_id": session.env_id,
                    "env_kwargs": session.env_kwargs,
                    "max_turns": env.max_turns,
                    "tools": getattr(env, "tools", None),
                }
            )

        return await self._call(session, run, "make")

    async def reset(self, session: Session, request: wire.ResetRequest) -> str:
        """Reset the session's env (made first if the request names another)."""

        def run() -> str:
            env = self._env_for(session, request.env_id, request.env_kwargs)
            messages, info = env.reset(seed=request.seed, options=request.options)
            session.task_id, session.done = info.get("task_id"), False
            return wire.dumps(
                wire.result_payload(
                    messages,
                    info,
                    reward=None,
                    terminated=False,
                    truncated=False,
                    tools=getattr(env, "tools", None),
                    reveal_gold=self.config.allow_oracle,
                )
            )

        return await self._call(session, run, "reset")

    async def step(self, session: Session, action: Any, timeout_s: float | None = None) -> str:
        """Step the session's env with ``action`` as sent."""

        def run() -> str:
            env = self._current(session)
            messages, reward, terminated, truncated, info = env.step(action)
            session.done = terminated or truncated
            return wire.dumps(
                wire.result_payload(
                    messages,
                    info,
                    reward=float(reward),
                    terminated=terminated,
                    truncated=truncated,
                    tools=getattr(env, "tools", None),
                    reveal_gold=self.config.allow_oracle,
                )
            )

        return await self._call(session, run, "step", timeout_s)

    async def oracle(self, session: Session) -> str:
        """The gold action of the session's current step; ``WireError`` 403 unless the server
        was started with ``--allow-oracle``."""
        if not self.config.allow_oracle:
            raise WireError(
                403,
                wire.FORBIDDEN,
                "this server does not reveal oracle actions or gold answers: start it with --allow-oracle "
                "(frostgym eval's oracle agent and full grade details need it)",
            )
        return await self._call(session, lambda: wire.dumps({"action": self._current(session).oracle_action()}), "step")

    async def state(self, session: Session) -> dict[str, Any]:
        """OpenEnv's state (``episode_id``, ``step_count``) and frostgym's: the env, its turn."""
        async with session.lock:
            env = session.env
            return {
                "session_id": session.session_id,
                "episode_id": (env.episode_id or None) if env is not None else None,
                "step_count": env.turn if env is not None else 0,
                "env_id": session.env_id,
                "env_kwargs": session.env_kwargs,
                "task_id": session.task_id,
                "max_turns": env.max_turns if env is not None else None,
                "done": session.done,
            }

    # -- how a call runs -------------------------------------------------------------------
    def _env_for(self, session: Session, env_id: str | None, env_kwargs: dict[str, Any] | None) -> FrozenEnv:
        """The env a make or reset addresses, made when the session has none like it. Runs in a
        worker thread. ``env_kwargs`` None means the session's own arguments for its env id."""
        served = self.config.served
        env_id = env_id or session.env_id or (served[0] if len(served) == 1 else None)
        if env_id is None:
            raise WireError(422, wire.VALIDATION_ERROR, f"env_id is required: this server serves {', '.join(served)}")
        if env_id not in served:
            raise WireError(404, wire.NOT_FOUND, f"{env_id!r} is not served here; served: {', '.join(served)}")
        if env_kwargs is None:
            env_kwargs = dict(session.env_kwargs) if env_id == session.env_id else {}
        refused = sorted(SERVER_ONLY_KWARGS & set(env_kwargs))
        if refused:
            raise WireError(403, wire.FORBIDDEN, f"env arguments {refused} are set by the server, not by clients")
        if not self.config.allow_wider_limits:
            widened = widened_limits(env_class(env_id), env_kwargs)
            if widened:
                raise WireError(
                    403,
                    wire.FORBIDDEN,
                    f"{env_id}: {', '.join(widened)} would widen a resource limit, which is the server's: a client "
                    "may only narrow it (the operator can allow wider ones with frostgym serve --allow-wider-limits)",
                )
        if session.env is not None and env_id == session.env_id and env_kwargs == session.env_kwargs:
            return session.env
        if session.env is not None:
            old, session.env = session.env, None
            session.task_id, session.done = None, True
            _close_quietly(old)
        kwargs = dict(env_kwargs)
        split = kwargs.pop("split", None)
        env = make_env(env_id, split, kwargs)  # what it raises, ``_call`` answers (``wire.error_from``)
        if not isinstance(env, FrozenEnv):
            _close_quietly(env)
            raise WireError(422, wire.VALIDATION_ERROR, f"{env_id} is not a frostgym env: it cannot be served")
        session.env = env
        session.env_id, session.env_kwargs = env_id, dict(env_kwargs)
        return session.env

    def _current(self, session: Session) -> FrozenEnv:
        if session.env is None:
            raise WireError(409, wire.EPISODE_NOT_ACTIVE, "this session has no env yet: reset it first")
        return session.env

    async def _call(
        self, session: Session, run: Callable[[], T], phase: wire.Phase, timeout_s: float | None = None
    ) -> T:
        """``run()`` in a worker thread under the session's lock and deadline; an exception it
        raises becomes its ``WireError`` (``wire.error_from``)."""
        deadline = self.config.step_timeout_s if timeout_s is None else min(timeout_s, self.config.step_timeout_s)
        async with session.lock:
            if session.closed:
                raise WireError(404, wire.SESSION_ERROR, "this session was closed")
            session.used = True
            future = session.worker.submit(run)
            answer = asyncio.wrap_future(future)
            try:
                return await asyncio.wait_for(asyncio.shield(answer), deadline)
            except TimeoutError:
                answer.add_done_callback(_discard)  # what it ends with has no one to go to
                self._abandon(session, future)
                raise WireError(
                    408,
                    wire.STEP_TIMEOUT,
                    f"the {phase} ran past its {deadline:g} s deadline; the session is closed "
                    "(its env closes when the call returns): open a new one",
                ) from None
            except WireError:
                raise
            except Exception as error:
                raise wire.error_from(error, phase) from error
            finally:
                session.last_used = time.monotonic()

    def _abandon(self, session: Session, future: Future[Any]) -> None:
        """Close ``session`` now, and its env and thread once ``future`` (its running call)
        returns: the release is queued behind it on the session's thread. The env is asked to
        stop that call (``FrozenEnv.interrupt``: its sandboxed process is killed), so the call
        returns, and the slot it holds is freed, at once rather than at its own limits."""
        session.closed = True
        self.sessions.pop(session.key, None)
        env, session.env = session.env, None
        if env is not None:
            with contextlib.suppress(Exception):  # the session ends either way
                env.interrupt()
        with self._stuck_lock:
            self._stuck += 1

        def release() -> None:
            _release(env)
            with self._stuck_lock:
                self._stuck -= 1

        session.worker.submit(release)
        session.worker.shutdown(wait=False)

    # -- background and shutdown -----------------------------------------------------------
    async def expire_idle(self) -> None:
        """Forever: close HTTP sessions unused for ``idle_timeout_s`` (not one running a call)."""
        timeout = self.config.idle_timeout_s
        while True:
            await asyncio.sleep(min(max(timeout / 4, 0.05), 5.0))
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if session.kind == "http" and not session.lock.locked() and now - session.last_used > timeout:
                    await self.close(session)

    async def shutdown(self) -> None:
        """Close every session (its env and sandbox) once its running call returned. A call
        past its deadline closes its own when it returns, or the process's exit does."""
        await asyncio.gather(*(self.close(s) for s in list(self.sessions.values())), return_exceptions=True)


def _discard(answer: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a call answered 408 already, so asyncio does not log it as
    "never retrieved": an error it ends with is the abandoned call's, not the server's."""
    if not answer.cancelled():
        answer.exception()


def _close_quietly(env: FrozenEnv) -> None:
    with contextlib.suppress(Exception):  # a session ends either way
        env.close()


def _release(env: FrozenEnv | None) -> None:
    """On a session's thread, as it ends: close its env and the thread's sandboxes."""
    if env is not None:
        _close_quietly(env)
    with contextlib.suppress(Exception):
        close_thread_sandboxes()
