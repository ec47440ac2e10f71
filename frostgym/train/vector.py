"""Batched stepping (Gymnasium vector envs) and GRPO group sampling for every frostgym id.

Gymnasium's own ``SyncVectorEnv`` and ``AsyncVectorEnv`` carry chat observations; this
module only pins down the parts Gymnasium leaves to the caller:

- **Space hooks.** ``batch_space`` of ``ChatObservationSpace`` / ``TextActionSpace`` is a
  ``Tuple`` of copies (seeded from :func:`~frostgym.core.seeding.derive_seed`, so
  ``envs.action_space.sample()`` is reproducible); ``concatenate`` gives a ``tuple`` with
  one conversation (or reply) per sub-env; ``create_empty_array`` gives empty ones.
  ``iterate`` is deliberately *not* registered: Gymnasium would then iterate each
  sub-env's string character by character, while its fallback iterates the batch.
  Strings cannot live in shared memory, so async envs run with ``shared_memory=False``.
- **Seeds.** Gymnasium's ``reset(seed=s)`` gives sub-env ``i`` the seed ``s + i``, so
  batch seed 42's sub-env 1 replays batch seed 43's sub-env 0. The envs built here give
  sub-env ``i`` the seed ``derive_seed("frostgym.vector", s, i)`` (:func:`sub_env_seeds`)
  instead: no two (batch seed, index) pairs share an episode. A list of seeds is passed
  through unchanged, ``None`` means fresh entropy.
- **Autoreset.** Gymnasium 1.x's default, ``NEXT_STEP``: on the step *after* a sub-env's
  episode ends (terminated or truncated), that sub-env ignores its action and is reset
  instead. That step returns the new episode's first observation, reward ``0.0``,
  ``terminated = truncated = False`` and the reset ``info`` (a new ``episode_id``). The
  reset takes no seed or options: the sub-env's own ``np_random`` picks the next task, so
  runs stay deterministic, but a ``task_id`` option (a GRPO group) is *not* kept. Pass
  ``autoreset_mode=AutoresetMode.DISABLED`` and reset yourself to control every episode.
- **Infos.** Gymnasium batches ``info`` into per-key arrays with ``_key`` masks, typed by
  the first sub-env that reports a key. Grade ``details`` may hold an ``int`` in one
  sub-env and a ``str`` or ``None`` in another, so these envs widen such an array to
  ``object`` instead of failing.
- **The private split.** Both ``make_vector_env`` (a ``split`` env argument) and
  ``group_reset`` (its ``split``) refuse ``private`` unless ``allow_private=True``
  (``frostgym.train.session.check_training_split``): these are training's envs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium.spaces import Space, Tuple
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from frostgym.core.messages import Observation
from frostgym.core.seeding import derive_seed
from frostgym.core.spaces import ChatObservationSpace, TextActionSpace
from frostgym.train.session import check_training_split

__all__ = [
    "FrozenAsyncVectorEnv",
    "FrozenSyncVectorEnv",
    "GroupReset",
    "group_reset",
    "group_seeds",
    "make_vector_env",
    "sub_env_seeds",
]

_FreeSpace = ChatObservationSpace | TextActionSpace


# -- space hooks -------------------------------------------------------------------------
@batch_space.register(ChatObservationSpace)
@batch_space.register(TextActionSpace)
def _batch_free_space(space: _FreeSpace, n: int = 1) -> Space[Any]:
    batched = Tuple(tuple(deepcopy(space) for _ in range(n)))
    batched.seed([derive_seed("frostgym.batch_space", type(space).__name__, i) for i in range(n)])
    return batched


@concatenate.register(ChatObservationSpace)
@concatenate.register(TextActionSpace)
def _concatenate_free_space(space: _FreeSpace, items: Sequence[Any], out: Any) -> tuple[Any, ...]:
    return tuple(items)


@create_empty_array.register(ChatObservationSpace)
def _empty_chats(space: ChatObservationSpace, n: int = 1, fn: Callable[..., Any] = np.zeros) -> tuple[Observation, ...]:
    return tuple([] for _ in range(n))


@create_empty_array.register(TextActionSpace)
def _empty_texts(space: TextActionSpace, n: int = 1, fn: Callable[..., Any] = np.zeros) -> tuple[str, ...]:
    return tuple("" for _ in range(n))


# -- seeds -------------------------------------------------------------------------------
def sub_env_seeds(seed: int, num_envs: int) -> list[int]:
    """The reset seed of each sub-env for batch seed ``seed``: a hash of ``(seed, index)``,
    so nearby batch seeds never share an episode (unlike Gymnasium's ``seed + index``)."""
    # A frozen seed label, not a module path: changing it reseeds every vector env.
    return [derive_seed("frostgym.vector", seed, i) for i in range(num_envs)]


def group_seeds(seed: int, group_size: int) -> list[int]:
    """The reset seed of each member of a GRPO group: same rule, its own label, so a group
    never reuses the seeds of an ordinary batch reset with the same ``seed``."""
    return [derive_seed("frostgym.group", seed, i) for i in range(group_size)]


def _resolve_seed(seed: int | list[int | None] | None, num_envs: int) -> list[int | None] | None:
    if isinstance(seed, bool):
        raise TypeError("seed must be an int, a list of ints, or None")
    if isinstance(seed, (int, np.integer)):
        return list(sub_env_seeds(int(seed), num_envs))
    return seed


def _fits(array: np.ndarray, value: Any) -> bool:
    if bool(array.dtype == object):
        return True
    if isinstance(value, np.ndarray):
        return bool(value.shape == array.shape[1:] and value.dtype == array.dtype)
    if type(value) in (int, float, bool) or isinstance(value, np.number):
        return bool(np.asarray(value).dtype == array.dtype)
    return False


class _FrozenVectorMixin:
    """Shared by the sync and async classes: derived seeds, and ``info`` arrays that widen
    to ``object`` rather than fail when sub-envs report one key with different types."""

    num_envs: int

    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int) -> dict[str, Any]:
        for key, value in env_info.items():
            existing = vector_infos.get(key)
            mask = vector_infos.get(f"_{key}", np.zeros(self.num_envs, dtype=np.bool_))
            if isinstance(value, dict) and key != "final_obs" and (existing is None or isinstance(existing, dict)):
                array: Any = self._add_info(existing if existing is not None else {}, value, env_num)
            else:
                if existing is None:
                    array = _new_info_array(key, value, self.num_envs)
                elif isinstance(existing, dict) or not _fits(existing, value):
                    array = np.full(self.num_envs, None, dtype=object)
                    for i in np.flatnonzero(mask):
                        array[i] = existing[i] if not isinstance(existing, dict) else _unbatch(existing, int(i))
                else:
                    array = existing
                array[env_num] = value
            mask[env_num] = True
            vector_infos[key], vector_infos[f"_{key}"] = array, mask
        return vector_infos


def _new_info_array(key: str, value: Any, n: int) -> np.ndarray:
    if key != "final_obs":
        if type(value) in (int, float, bool) or isinstance(value, np.number):
            return np.zeros(n, dtype=type(value))
        if isinstance(value, np.ndarray):
            return np.zeros((n, *value.shape), dtype=value.dtype)
    return np.full(n, None, dtype=object)


def _unbatch(batched: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s entry of a batched info dict (used when a key changes kind)."""
    out: dict[str, Any] = {}
    for key, value in batched.items():
        if key.startswith("_") or not batched.get(f"_{key}", np.zeros(i + 1, dtype=bool))[i]:
            continue
        out[key] = _unbatch(value, i) if isinstance(value, dict) else value[i]
    return out


class FrozenSyncVectorEnv(_FrozenVectorMixin, SyncVectorEnv):
    """``SyncVectorEnv`` whose integer reset seed is spread with :func:`sub_env_seeds`."""

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        return super().reset(seed=_resolve_seed(seed, self.num_envs), options=options)


class FrozenAsyncVectorEnv(_FrozenVectorMixin, AsyncVectorEnv):
    """``AsyncVectorEnv`` (one worker process per sub-env, ``shared_memory=False``) whose
    integer reset seed is spread with :func:`sub_env_seeds`."""

    def reset_async(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        super().reset_async(seed=_resolve_seed(seed, self.num_envs), options=options)


def _make_env(env_id: str, env_kwargs: dict[str, Any]) -> gymnasium.Env[Any, Any]:
    # Module level (picklable by reference): a spawned worker imports frostgym.train.vector, and
    # importing any frostgym module runs ``frostgym/__init__``, which registers the ids.
    return gymnasium.make(env_id, **env_kwargs)


class _EnvFactory:
    def __init__(self, env_id: str, env_kwargs: dict[str, Any]) -> None:
        self.env_id = env_id
        self.env_kwargs = env_kwargs

    def __call__(self) -> gymnasium.Env[Any, Any]:
        return _make_env(self.env_id, self.env_kwargs)


def make_vector_env(
    env_id: str,
    num_envs: int,
    *,
    asynchronous: bool = False,
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP,
    context: str | None = None,
    allow_private: bool = False,
    **env_kwargs: Any,
) -> FrozenSyncVectorEnv | FrozenAsyncVectorEnv:
    """``num_envs`` copies of ``gymnasium.make(env_id, **env_kwargs)`` batched together.

    ``asynchronous=True`` runs each sub-env in its own process (``context`` picks the
    multiprocessing start method; ``None`` is the platform default). Observations come
    back as a tuple of conversations, actions go in as a sequence of replies (strings or
    tool-call dicts), one per sub-env. A ``split`` of ``private`` needs ``allow_private=True``.
    """
    if "split" in env_kwargs:
        check_training_split(str(env_kwargs["split"]), allow_private)
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    fns = [_EnvFactory(env_id, dict(env_kwargs)) for _ in range(num_envs)]
    if asynchronous:
        return FrozenAsyncVectorEnv(fns, shared_memory=False, context=context, autoreset_mode=autoreset_mode)
    return FrozenSyncVectorEnv(fns, autoreset_mode=autoreset_mode)


# -- GRPO groups -------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupReset:
    """One GRPO group: every sub-env plays ``task_id``, each from its own seed."""

    observations: tuple[Observation, ...]
    infos: dict[str, Any]
    task_id: str
    seeds: tuple[int, ...]
    episode_ids: tuple[str, ...]


def group_reset(
    envs: VectorEnv[Any, Any, Any],
    *,
    seed: int,
    task_id: str | None = None,
    split: str | None = None,
    allow_private: bool = False,
) -> GroupReset:
    """Reset every sub-env of ``envs`` on one task with distinct seeds (a GRPO group).

    With ``task_id=None`` the task is drawn by resetting sub-env 0 alone from
    ``derive_seed("frostgym.group.task", seed)`` (in ``split``, else the env's own split),
    so the draw depends on ``seed`` only. Then each sub-env ``i`` resets with
    ``options={"task_id": task_id}`` and seed ``group_seeds(seed, n)[i]``: the same task,
    different episode ids and per-episode randomness. The seeds are explicit, so this also
    works on a plain Gymnasium vector env. Raises ``RuntimeError`` if a sub-env ignored the
    option or two members share an episode id, the failure OpenEnv #1102 shipped silently,
    and ``PrivateSplitError`` for ``split="private"`` without ``allow_private=True``.
    """
    if split is not None:
        check_training_split(split, allow_private)
    n = envs.num_envs
    extra: dict[str, Any] = {} if split is None else {"split": split}
    if task_id is None:
        mask = np.zeros(n, dtype=np.bool_)
        mask[0] = True
        task_seeds: list[int | None] = [derive_seed("frostgym.group.task", seed)] + [None] * (n - 1)
        # VectorEnv.reset is typed ``seed: int | None``; Sync/Async (the only kinds) take lists.
        _, first = envs.reset(seed=task_seeds, options={**extra, "reset_mask": mask})  # type: ignore[arg-type]
        task_id = str(first["task_id"][0])
    seeds = group_seeds(seed, n)
    member_seeds: list[int | None] = list(seeds)
    obs, infos = envs.reset(seed=member_seeds, options={**extra, "task_id": task_id})  # type: ignore[arg-type]
    task_ids = {str(t) for t in infos["task_id"]}
    episode_ids = tuple(str(e) for e in infos["episode_id"])
    if task_ids != {task_id}:
        raise RuntimeError(f"group reset asked for task {task_id!r} but sub-envs played {sorted(task_ids)}")
    if len(set(episode_ids)) != n:
        raise RuntimeError(f"group members share episode ids: {episode_ids}")
    return GroupReset(
        observations=tuple(obs), infos=infos, task_id=task_id, seeds=tuple(seeds), episode_ids=episode_ids
    )
