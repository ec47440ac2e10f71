"""A Ray backend for the runner: envs live in Ray actors, the agent stays in the driver.

The runner's logic does not change (``frostgym.runner``): it still batches agent calls
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
  dead actor surfaces as an ``infra_error`` (retried like any other).
- ``oracle_action`` is computed with every reset and step when ``prefetch_oracle`` is
  set (the oracle agent then needs no extra round trip), else fetched on demand.

Usage::

    with RayEnvs.start(address=None) as envs:
        run_to_card(out, agent, config, options, envs=envs)
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import pickle
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, SupportsFloat

import ray

from frostgym.core.env import FrozenEnv
from frostgym.core.episode import DropClass, Stage
from frostgym.core.errors import FrostgymError
from frostgym.core.messages import Action, Observation
from frostgym.core.splits import Split
from frostgym.envs.registry import make_env


class RemoteEnvError(FrostgymError, RuntimeError):
    """An env exception that could not travel back as itself (it does not pickle). It keeps
    the original's drop class and stage, so the runner classifies it the same way."""

    def __init__(self, message: str, drop_class: DropClass | None, stage: Stage | None) -> None:
        super().__init__(message)
        if drop_class is not None:
            self.drop_class = drop_class
        if stage is not None:
            self.stage = stage


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
    """The runner's handle on one env slot of one actor (``frostgym.runner.RunnerEnv``)."""

    def __init__(self, actor: Any, slot: int, state: EnvState | None = None) -> None:
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
        result, error, state = ray.get(self.actor.reset.remote(self.slot, seed, options))
        if error is not None:
            raise error
        self._update(state)
        assert result is not None
        return result  # type: ignore[no-any-return]

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        result, error, state = ray.get(self.actor.step.remote(self.slot, action))
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
        action, error = ray.get(self.actor.oracle.remote(self.slot))
        if error is not None:
            raise error
        return action  # type: ignore[no-any-return]

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a dead actor has nothing left to close
            self.actor.close.remote(self.slot)  # fire and forget: the slot's env is closed in the actor


class RayEnvs:
    """An ``EnvBackend`` over ``actors`` ``EnvWorker`` actors (default: one per CPU of the
    cluster). Use ``RayEnvs.start`` to connect (or start a local Ray) and create them.
    ``imports`` are modules every actor imports first (ones that register extra envs)."""

    def __init__(
        self,
        actors: int,
        *,
        prefetch_oracle: bool = True,
        cpus_per_actor: float = 1.0,
        threads_per_actor: int = 8,
        imports: Sequence[str] = (),
        owns_ray: bool = False,
    ) -> None:
        if actors < 1 or threads_per_actor < 1:
            raise ValueError(f"need at least one actor and one thread per actor, got {actors}, {threads_per_actor}")
        worker: Any = ray.remote(num_cpus=cpus_per_actor, max_restarts=3)(EnvWorker)
        self.actors: list[Any] = [
            worker.remote(prefetch_oracle, list(imports)) for _ in range(actors)
        ]  # ray's stubs are partial
        self.threads_per_actor = threads_per_actor
        self.owns_ray = owns_ray
        self._slots = itertools.count()
        self._lock = threading.Lock()

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
        or, without one, start a local Ray with ``num_cpus`` CPUs; then create the actors and
        wait (at most ``start_timeout`` seconds) until every one is placed and running."""
        owns = not ray.is_initialized()
        if owns:
            if address is None:
                ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
        try:
            if actors is None:
                cpus = ray.cluster_resources().get("CPU", 1)  # type: ignore[no-untyped-call]
                actors = max(1, int(cpus))
            envs = cls(
                actors, prefetch_oracle=prefetch_oracle, imports=imports, cpus_per_actor=cpus_per_actor, owns_ray=owns
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
            if owns:
                ray.shutdown()
            raise
        return envs

    # -- EnvBackend --------------------------------------------------------------------
    def make_env(self, env_id: str, split: Split | str, env_kwargs: Mapping[str, Any]) -> RemoteEnv:
        with self._lock:
            slot = next(self._slots)
        actor = self.actors[slot % len(self.actors)]
        error = ray.get(actor.make.remote(slot, env_id, split, dict(env_kwargs)))
        if error is not None:
            raise error
        return RemoteEnv(actor, slot)

    def step_threads(self, workers: int) -> int:
        return max(workers, self.threads_per_actor * len(self.actors))

    # -- lifetime ----------------------------------------------------------------------
    def close(self) -> None:
        """Close every env, end the actors, and shut Ray down if ``start`` started it."""
        with contextlib.suppress(Exception):
            ray.get([a.close_all.remote() for a in self.actors], timeout=30)
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        if self.owns_ray:
            ray.shutdown()

    def __enter__(self) -> RayEnvs:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
