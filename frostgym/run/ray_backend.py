"""A Ray backend for the runner: envs live in Ray actors, the agent stays in the driver.

The runner's logic does not change (``frostgym.run.runner``): it still batches agent calls
across episodes, decides retries, drops and the order outcomes are written in. Only the
envs move. ``RayEnvs`` is an ``EnvBackend``: every env the runner asks for is a
``RemoteEnv`` stand-in bound to one slot of one ``EnvWorker`` actor, which holds the real
``FrozenEnv`` warm (a Code-v0 env keeps its sandbox) and runs its ``reset``/``step``.

- Slot ``k`` (the k-th env the run creates) lives on actor ``k mod N``, and the runner
  hands envs to episodes in its own deterministic order, so the episode -> actor
  assignment is a function of the plan alone. An episode's content never depends on its
  actor anyway: envs are seeded per episode and are reset before every episode.
- A batch's steps go out concurrently (one thread per in-flight call, each waiting on
  its actor), so ``N`` actors step ``N`` envs at once, on as many nodes as the cluster has.
- Env exceptions are sent back as the exception object itself (with the remote traceback
  as a note), so drop classes and stages are exactly what the local runner records. A
  dead actor in a cluster that still answers surfaces as an ``infra_error`` (retried like
  any other); a lost cluster (its GCS unreachable, no node alive, every actor dead) raises
  ``BackendLostError``, so the run stops as ``interrupted`` instead of dropping the rest
  of the plan, and ``--resume`` against a cluster that is back plays what is left.
- ``oracle_action`` is computed with every reset and step when ``prefetch_oracle`` is
  set (the oracle agent then needs no extra round trip), else fetched on demand.
- Without an address, ``RayEnvs.start`` starts a ``LocalRay``: on 127.0.0.1 only, with a
  token of its own in a private temporary directory. Ray's plain ``ray.init()`` would
  listen on the machine's address and write ``~/.ray/auth_token``, which every later
  ``ray start`` on the machine picks up, so that it refuses drivers that were not given
  that token: one local run would break the user's next cluster. Joining a cluster checks
  first that it answers and accepts this driver's token, and says in one line which token
  was sent when it does not, instead of Ray's retries and its bare "Failed to connect".

Usage::

    with RayEnvs.start(address=None) as envs:
        run_to_card(out, agent, config, options, envs=envs)
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import pickle
import secrets
import shutil
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, SupportsFloat, TypeVar

import ray

from frostgym.core.env import FrozenEnv
from frostgym.core.errors import BackendLostError, BackendRefusedError, RemoteEnvError
from frostgym.core.messages import Action, Observation
from frostgym.core.splits import Split
from frostgym.envs.registry import make_env

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
WATCH_S = 5.0  # a call still running after this long makes its thread check the cluster
PROBES = 3  # a cluster is lost once this many checks in a row fail ...
PROBE_INTERVAL_S = 1.0  # ... this far apart
PROBE_TIMEOUT_S = 5.0  # the most one check (a TCP connect, a GCS query) may take
GCS_ANSWER_S = 15.0  # joining: the most a listening GCS may take to answer the first query
# Ray's token settings (https://docs.ray.io/en/latest/ray-security/token-auth.html): the mode,
# then the token from RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH names, else this file.
AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
DEFAULT_TOKEN_FILE = Path("~/.ray/auth_token")
# Ray's switch for one-machine clusters: with it at 0, Ray keeps "127.0.0.1" as this node's
# address (with it at 1, Ray's default on Linux, 127.0.0.1 means the machine's interface
# address) and every Ray process listens on loopback only.
ONE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@dataclass(frozen=True)
class EnvState:
    """What the runner reads off an env besides reset/step results, sent back with them."""

    turn: int
    tools: list[dict[str, Any]] | None
    oracle: Action | None = None
    oracle_error: BaseException | None = None
    prefetched: bool = False


def _portable(error: BaseException) -> BaseException:
    """``error`` itself if it pickles, else a ``RemoteEnvError`` carrying its classification;
    either way with the remote traceback as a note."""
    remote = "".join(traceback.format_exception(error)).strip()
    try:
        pickle.loads(pickle.dumps(error))
        portable = error
    except Exception:
        portable = RemoteEnvError(
            f"{type(error).__name__}: {error}", getattr(error, "drop_class", None), getattr(error, "stage", None)
        )
    portable.add_note(f"[frostgym ray env worker] remote traceback:\n{remote}")
    return portable


class EnvWorker:
    """A Ray actor holding warm envs by slot. Every method returns ``(value, error, state)``
    instead of raising, so env exceptions reach the driver unwrapped."""

    def __init__(self, prefetch_oracle: bool, imports: Sequence[str]) -> None:
        for module in imports:  # e.g. modules that register extra envs with gymnasium
            importlib.import_module(module)
        self.prefetch_oracle = prefetch_oracle
        self.envs: dict[int, FrozenEnv] = {}

    def _state(self, env: FrozenEnv, done: bool) -> EnvState:
        tools = getattr(env, "tools", None)
        if not self.prefetch_oracle or done:
            return EnvState(env.turn, tools)
        try:
            return EnvState(env.turn, tools, oracle=env.oracle_action(), prefetched=True)
        except Exception as error:
            return EnvState(env.turn, tools, oracle_error=_portable(error), prefetched=True)

    def make(self, slot: int, env_id: str, split: Split | str, env_kwargs: dict[str, Any]) -> BaseException | None:
        try:
            self.envs[slot] = make_env(env_id, split, env_kwargs)
        except Exception as error:
            return _portable(error)
        return None

    def reset(
        self, slot: int, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[tuple[Observation, dict[str, Any]] | None, BaseException | None, EnvState | None]:
        try:
            env = self.envs[slot]
            result = env.reset(seed=seed, options=options)
        except Exception as error:
            return None, _portable(error), None
        return result, None, self._state(env, False)

    def step(
        self, slot: int, action: Action
    ) -> tuple[
        tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]] | None, BaseException | None, EnvState | None
    ]:
        try:
            env = self.envs[slot]
            result = env.step(action)
        except Exception as error:
            return None, _portable(error), None
        return result, None, self._state(env, result[2] or result[3])

    def oracle(self, slot: int) -> tuple[Action | None, BaseException | None]:
        try:
            return self.envs[slot].oracle_action(), None
        except Exception as error:
            return None, _portable(error)

    def close(self, slot: int) -> None:
        env = self.envs.pop(slot, None)
        if env is not None:
            env.close()

    def close_all(self) -> int:
        for slot in list(self.envs):
            self.close(slot)
        return 0


class RemoteEnv:
    """The runner's handle on one env slot of one actor (``frostgym.run.runner.RunnerEnv``);
    its calls go through ``envs.get``, which tells a dead actor from a lost cluster."""

    def __init__(self, envs: RayEnvs, actor: Any, slot: int, state: EnvState | None = None) -> None:
        self.envs = envs
        self.actor = actor
        self.slot = slot
        self._state = state or EnvState(0, None)
        self.tools: list[dict[str, Any]] | None = None

    @property
    def turn(self) -> int:
        return self._state.turn

    def _update(self, state: EnvState | None) -> None:
        if state is not None:
            self._state = state
            self.tools = state.tools

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        result, error, state = self.envs.get(self.actor.reset.remote(self.slot, seed, options))
        if error is not None:
            raise error
        self._update(state)
        assert result is not None
        return result  # type: ignore[no-any-return]

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        result, error, state = self.envs.get(self.actor.step.remote(self.slot, action))
        if error is not None:
            raise error
        self._update(state)
        assert result is not None
        return result  # type: ignore[no-any-return]

    def oracle_action(self) -> Action:
        if self._state.prefetched:
            if self._state.oracle_error is not None:
                raise self._state.oracle_error
            assert self._state.oracle is not None
            return self._state.oracle
        action, error = self.envs.get(self.actor.oracle.remote(self.slot))
        if error is not None:
            raise error
        return action  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.envs.lost is not None:
            return  # nothing is left to close, and nothing to send it to
        with contextlib.suppress(Exception):  # a dead actor has nothing left to close
            self.actor.close.remote(self.slot)  # fire and forget: the slot's env is closed in the actor


def _within(call: Callable[[], T], seconds: float) -> T:
    """``call()``, or ``TimeoutError`` once it has taken ``seconds`` (it goes on in a daemon
    thread: a Ray query to a GCS that is gone can block far longer than a check may)."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:
            outcome.append((False, error))

    thread = threading.Thread(target=run, name="frostgym-ray-check", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise TimeoutError(f"no answer within {seconds:g} s")
    done, value = outcome[0]
    if not done:
        raise value
    return value  # type: ignore[no-any-return]


def _unreachable(address: str, timeout: float) -> str | None:
    """Why nothing accepts a TCP connection at ``address`` (``HOST:PORT``), or None if something does."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as error:
        return error.strerror or str(error) or type(error).__name__
    return None


def _raylet() -> Any:
    """Ray's compiled core, for its token settings and GCS client (its type stubs lack them)."""
    return importlib.import_module("ray._raylet")


def _reload_auth() -> None:
    """Make this process's Ray read its token settings from the environment again (they
    are cached in its C++ core). The config first: Ray's own tests note that a core-worker
    thread still draining may reload the token, and must not find token mode without it."""
    raylet = _raylet()
    raylet.Config.initialize("")
    raylet.AuthenticationTokenLoader.instance().reset_cache()


def token_source() -> str:
    """What this process's Ray sends a cluster as its token, said without the token itself:
    none (token mode off), or where it is read from, in Ray's order."""
    raylet = _raylet()
    default = DEFAULT_TOKEN_FILE.expanduser()
    if raylet.get_authentication_mode() != raylet.AuthenticationMode.TOKEN:
        mode = os.environ.get(AUTH_MODE)
        sent = f"this driver sent none ({AUTH_MODE} is {'unset' if mode is None else repr(mode)}, not 'token')"
        if default.exists():
            sent += f"; {default} exists: a `ray start` that finds it requires its token of every driver"
        return sent
    if os.environ.get(AUTH_TOKEN):
        return f"this driver sent the token in the environment variable {AUTH_TOKEN}"
    if os.environ.get(AUTH_TOKEN_PATH):
        return f"this driver sent the token in {os.environ[AUTH_TOKEN_PATH]} ({AUTH_TOKEN_PATH})"
    return f"this driver sent the token in {default} (Ray's default token file)"


def check_cluster(address: str) -> str | None:
    """Before ``ray.init(address)``: that the cluster there answers and accepts this driver's
    token, so that neither a wrong address nor a wrong token waits out Ray's retries (20
    tries of up to 40 s each for an address nobody answers at). Returns the GCS address
    Ray will join (None for ``ray://`` addresses, which go through Ray Client and are left
    to Ray). Raises ``ConnectionError`` when nothing answers there, ``BackendRefusedError``
    when the cluster refuses the token."""
    from ray._private import services

    if address.startswith("ray://"):
        return None
    if address == "auto":  # what ray.init does for "auto": a token on this machine turns token mode on
        from ray._private.authentication.authentication_token_setup import maybe_enable_token_auth_if_token_available

        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    gcs = services.canonicalize_bootstrap_address(address)  # RAY_ADDRESS, or the latest `ray start` for "auto"
    if gcs is None:
        return None
    reason = _unreachable(gcs, PROBE_TIMEOUT_S)
    if reason is not None:
        port = gcs.rpartition(":")[2]
        raise ConnectionError(
            f"no Ray cluster answers at {gcs} ({reason}): start one there (ray start --head --port {port}) "
            "or pass the address of a running one"
        )
    try:
        _within(lambda: _raylet().GcsClient(address=gcs), GCS_ANSWER_S)
    except ray.exceptions.AuthenticationError as error:
        raise BackendRefusedError(
            f"the Ray cluster at {gcs} refused this driver's token ({_first_line(error)}); {token_source()}: "
            f"set {AUTH_MODE}=token for the driver and give it the cluster's token in {AUTH_TOKEN}, in a file "
            f"named by {AUTH_TOKEN_PATH}, or in {DEFAULT_TOKEN_FILE} (Ray's token-authentication guide)"
        ) from None
    except TimeoutError:
        raise ConnectionError(
            f"something listens at {gcs} but does not answer as a Ray cluster's GCS within {GCS_ANSWER_S:g} s"
        ) from None
    except Exception:  # anything else: ray.init tries, and says what it finds
        pass
    return gcs


def _first_line(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error)
    return str(text).strip().splitlines()[0] if str(text).strip() else type(error).__name__


@contextlib.contextmanager
def _loopback_node() -> Iterator[None]:
    """While ``ray.init`` runs: Ray's one-machine switch (``ONE_MACHINE``) for this driver
    too, whose Ray read it at import (child processes read it from the environment)."""
    from ray._private import ray_constants

    was = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = was


class LocalRay:
    """A Ray that frostgym starts on this machine for itself (``--backend ray`` without
    ``--address``; the tests), with ``num_cpus`` CPUs and no dashboard. Every process of it
    listens on 127.0.0.1 only, and it uses token authentication with a token of its own, in
    a private temporary directory (``RAY_AUTH_TOKEN_PATH``): nothing is written to
    ``~/.ray``. While it runs, this process's environment holds its Ray settings (its Ray
    processes and their workers read them from there); ``stop`` shuts it down and puts
    the environment back as it was."""

    def __init__(self, num_cpus: int = 2, runtime_env: Mapping[str, Any] | None = None) -> None:
        self.num_cpus = num_cpus
        self.runtime_env = None if runtime_env is None else dict(runtime_env)
        self._saved: dict[str, str | None] | None = None
        self._dir: Path | None = None

    def start(self) -> LocalRay:
        """Start it; ``RuntimeError`` if Ray is already initialized in this process, or if
        the started Ray is not on loopback only (it is stopped first)."""
        if ray.is_initialized():
            raise RuntimeError("Ray is already initialized in this process: use it, or shut it down first")
        self._saved = {name: os.environ.get(name) for name in (AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH, ONE_MACHINE)}
        self._dir = Path(tempfile.mkdtemp(prefix="frostgym-ray-"))  # mode 0700
        token = self._dir / "auth_token"
        descriptor = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32))
        os.environ.pop(AUTH_TOKEN, None)  # it would win over the file
        os.environ.update({AUTH_MODE: "token", AUTH_TOKEN_PATH: str(token), ONE_MACHINE: "0"})
        try:
            _reload_auth()
            with _loopback_node():
                ray.init(
                    address="local",  # never RAY_ADDRESS's cluster: this one is frostgym's own
                    num_cpus=self.num_cpus,
                    include_dashboard=False,
                    log_to_driver=False,
                    runtime_env=self.runtime_env,
                    _node_ip_address=LOOPBACK,
                )
            hosts = {ray.get_runtime_context().gcs_address.rpartition(":")[0]}
            hosts |= {str(node["NodeManagerAddress"]) for node in ray.nodes()}  # type: ignore[no-untyped-call]
            if hosts != {LOOPBACK}:
                raise RuntimeError(
                    f"the local Ray did not stay on {LOOPBACK} (its addresses: {', '.join(sorted(hosts))}), "
                    "so it was stopped: this ray version keeps its processes on the network"
                )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Shut it down, restore the environment, remove the token; idempotent."""
        if self._saved is None:
            return
        if ray.is_initialized():
            ray.shutdown()
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved = None
        _reload_auth()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalRay:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class RayEnvs:
    """An ``EnvBackend`` over ``actors`` ``EnvWorker`` actors (default: one per CPU of the
    cluster). Use ``RayEnvs.start`` to connect (or start a local Ray) and create them.
    ``imports`` are modules every actor imports first (ones that register extra envs).
    ``where`` names the cluster in messages (default: its GCS address); ``local`` is the
    ``LocalRay`` that ``close`` stops, ``owns_ray`` says ``close`` shuts Ray down."""

    def __init__(
        self,
        actors: int,
        *,
        prefetch_oracle: bool = True,
        cpus_per_actor: float = 1.0,
        threads_per_actor: int = 8,
        imports: Sequence[str] = (),
        owns_ray: bool = False,
        local: LocalRay | None = None,
        where: str | None = None,
    ) -> None:
        if actors < 1 or threads_per_actor < 1:
            raise ValueError(f"need at least one actor and one thread per actor, got {actors}, {threads_per_actor}")
        worker: Any = ray.remote(num_cpus=cpus_per_actor, max_restarts=3)(EnvWorker)
        self.actors: list[Any] = [
            worker.remote(prefetch_oracle, list(imports)) for _ in range(actors)
        ]  # ray's stubs are partial
        self.threads_per_actor = threads_per_actor
        self.owns_ray = owns_ray
        self.local = local
        self.gcs: str | None = None  # checked with a TCP connect when calls fail (not over Ray Client)
        with contextlib.suppress(Exception):
            self.gcs = ray.get_runtime_context().gcs_address
        self.where = where or (
            "the local Ray of this run" if local is not None else f"the Ray cluster at {self.gcs or 'its address'}"
        )
        self.lost: str | None = None  # why the cluster is lost, once it is
        self._slots = itertools.count()
        self._lock = threading.Lock()
        self._checking = threading.Lock()

    @classmethod
    def start(
        cls,
        address: str | None = None,
        *,
        actors: int | None = None,
        num_cpus: int = 2,
        prefetch_oracle: bool = True,
        imports: Sequence[str] = (),
        cpus_per_actor: float = 1.0,
        start_timeout: float = 120.0,
    ) -> RayEnvs:
        """Connect to the cluster at ``address`` (``"auto"``, ``"HOST:6379"``, ``"ray://..."``)
        or, without one, start a ``LocalRay`` with ``num_cpus`` CPUs; then create the actors
        and wait (at most ``start_timeout`` seconds) until every one is placed and running.
        Joining raises ``ConnectionError`` when no cluster answers at ``address`` and
        ``BackendRefusedError`` when it refuses this driver's token (``check_cluster``)."""
        owns = not ray.is_initialized()
        local = None
        where = None
        if owns:
            if address is None:
                local = LocalRay(num_cpus).start()
            else:
                gcs = check_cluster(address)
                where = f"the Ray cluster at {gcs or address}"
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
        try:
            if actors is None:
                cpus = ray.cluster_resources().get("CPU", 1)  # type: ignore[no-untyped-call]
                actors = max(1, int(cpus))
            envs = cls(
                actors,
                prefetch_oracle=prefetch_oracle,
                imports=imports,
                cpus_per_actor=cpus_per_actor,
                owns_ray=owns,
                local=local,
                where=where,
            )
            try:
                ray.get([a.close_all.remote() for a in envs.actors], timeout=start_timeout)
            except ray.exceptions.GetTimeoutError as error:
                envs.close()
                raise RuntimeError(
                    f"{actors} env worker actors ({cpus_per_actor} CPU each) did not start within {start_timeout} s: "
                    f"the cluster has {ray.available_resources().get('CPU', 0)} CPUs free"  # type: ignore[no-untyped-call]
                ) from error
        except BaseException:
            if local is not None:
                local.stop()
            elif owns:
                ray.shutdown()
            raise
        return envs

    # -- EnvBackend --------------------------------------------------------------------
    def make_env(self, env_id: str, split: Split | str, env_kwargs: Mapping[str, Any]) -> RemoteEnv:
        with self._lock:
            slot = next(self._slots)
        actor = self.actors[slot % len(self.actors)]
        error = self.get(actor.make.remote(slot, env_id, split, dict(env_kwargs)))
        if error is not None:
            raise error
        return RemoteEnv(self, actor, slot)

    def step_threads(self, workers: int) -> int:
        return max(workers, self.threads_per_actor * len(self.actors))

    # -- a lost cluster ----------------------------------------------------------------
    def get(self, ref: Any) -> Any:
        """``ray.get(ref)``, for as long as the call takes while the cluster lives. A Ray
        error (an actor that died or cannot be reached) passes through while the cluster
        answers: that episode's ``infra_error``. Once it does not, ``BackendLostError``, for
        this call and every later one."""
        while True:
            if self.lost is not None:
                raise BackendLostError(self.lost)
            try:
                return ray.get(ref, timeout=WATCH_S)
            except ray.exceptions.GetTimeoutError:  # a long step, or a cluster that is gone
                if not self.alive():
                    raise BackendLostError(self.lost or self.where) from None
            except ray.exceptions.RayError as error:
                if self.alive():
                    raise
                raise BackendLostError(self.lost or self.where) from error

    def alive(self) -> bool:
        """Whether the cluster still answers (``_check``, up to ``PROBES`` times); once it did
        not, it is lost for this run. One thread checks; the others wait for its verdict."""
        with self._checking:
            if self.lost is not None:
                return False
            reason = None
            for attempt in range(PROBES):
                if attempt:
                    time.sleep(PROBE_INTERVAL_S)
                reason = self._check()
                if reason is None:
                    return True
            self.lost = (
                f"{self.where} (--backend ray) is lost: {reason}; the run stopped and its card is interrupted: "
                + (
                    "run the same command with --resume"
                    if self.local is not None
                    else "restart the cluster, then run the same command with --resume"
                )
            )
            return False

    def _check(self) -> str | None:
        """Why the cluster is lost (its GCS refuses or does not answer, no node is alive,
        every env worker actor is dead), or None while it lives."""
        if not ray.is_initialized():
            return "Ray was shut down in this process"
        if self.gcs is not None:
            reason = _unreachable(self.gcs, PROBE_TIMEOUT_S)
            if reason is not None:
                return f"its GCS at {self.gcs} does not answer ({reason})"
        try:
            nodes = _within(lambda: ray.nodes(), PROBE_TIMEOUT_S)  # type: ignore[no-untyped-call]
        except Exception as error:
            return f"its GCS does not answer ({_first_line(error)})"
        if not any(node.get("Alive") for node in nodes):
            return "no node of it is alive"
        from ray._private.state import actors as actor_table

        handles = list(self.actors)
        try:
            states = _within(lambda: [actor_table(a._actor_id.hex()).get("State") for a in handles], PROBE_TIMEOUT_S)
        except Exception:
            return None  # the GCS answered for its nodes: alive
        if handles and all(state == "DEAD" for state in states):
            return f"all {len(handles)} of its env worker actors are dead"
        return None

    # -- lifetime ----------------------------------------------------------------------
    def close(self) -> None:
        """Close every env, end the actors, and stop or shut down the Ray that ``start``
        started or joined (a lost cluster gets no calls: nothing there would answer)."""
        if self.lost is None:
            with contextlib.suppress(Exception):
                ray.get([a.close_all.remote() for a in self.actors], timeout=30)
            for actor in self.actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        self.actors = []
        if self.local is not None:
            self.local.stop()
        elif self.owns_ray:
            ray.shutdown()

    def __enter__(self) -> RayEnvs:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
