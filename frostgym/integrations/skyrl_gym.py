"""SkyRL-gym adapter: every frostgym id as a ``skyrl_gym`` text env, and the dataset rows
SkyRL's trainer reads (tested with skyrl-gym 0.4.0).

Why: SkyRL's generator (``SkyRLGymGenerator``) drives an environment it makes itself, one
per trajectory, with ``skyrl_gym.make(env_class, env_config=..., extras=...)``, then calls
``init(prompt)`` once and ``step(reply_text)`` until ``done``. Training on a frozen env
through SkyRL must play exactly the episode ``gym.make`` plays (same task for the same seed,
same observations, same grade), so this module only translates: each call goes to
``frostgym.train.session.TrainingEpisode`` and its result comes back in SkyRL's types.

- ``register_skyrl_envs()`` registers every id (``frostgym.envs.registry.ENTRIES``)
  with skyrl-gym's registry under the gymnasium ids themselves (``frostgym/Math-v0``:
  skyrl-gym's ids are free strings), all to ``FrozenTextEnv``. Idempotent. Call it in the
  process that runs the generator (SkyRL's ``skyrl_entrypoint`` Ray task), as SkyRL's own
  docs register a custom env.
- ``skyrl_rows(env_id, split=..., n=..., seed=...)`` returns one SkyRL dataset row per task
  of ``task_rows`` (the plan's tasks and seeds, as ``frostgym eval`` draws them);
  ``write_skyrl_dataset`` writes them as Parquet or JSON lines. A row is ``data_source``,
  ``prompt`` (the env's first messages), ``env_class`` (the id), ``reward_spec`` (method
  ``frostgym``, no ground truth: the env grades, and the answer never enters the data) and
  ``extra_info`` (``env_id``, ``split``, ``task_id``, ``episode_seed``, ``env_kwargs`` as
  JSON text, and ``allow_private``: true for rows of the ``private`` split made with
  ``allow_private=True``, the only ones ``FrozenTextEnv`` plays: ``PrivateSplitError``
  otherwise). SkyRL passes every column but ``prompt`` and ``env_class`` to the env as
  ``extras``; flat ``task_id``/``episode_seed``/``split`` keys (TRL's dataset columns) are
  read too.
- ``FrozenTextEnv.init(prompt)`` resets the frozen env on the row's task and returns the
  env's own first messages, which SkyRL then generates from. The dataset's ``prompt`` is
  those same messages, written when the rows were made: SkyRL uses it before ``init`` (to
  drop prompts over ``max_prompt_length``); should it differ (an edited dataset, another
  frostgym version), the env's messages win and ``init``'s metadata says
  ``prompt_matches: False``.
- ``step(text)`` plays the reply: observations are the messages the env added (tool or SQL
  results, feedback, the next user turn; ``[]`` on the last step), ``reward`` the final
  grade's score on the step that ends the episode (0 before), ``metadata`` the task id,
  the turn and, on the last step, the grade and its components (``grade_metrics``).
  ``get_metrics()`` (what SkyRL logs per episode, averaged per env class) is the grade's
  components and ``turns``.
- Turns: SkyRL's generator puts ``generator.max_turns`` into ``extras["max_turns"]`` and
  leaves ending the episode to the env. Where it is below the id's own limit, the env is
  made with ``max_turns`` set to it (the prompt states that limit, and the reply on the
  last turn is graded as the final answer: the ``gym.make(id, max_turns=k)`` episode);
  where it is not, the id's own limit ends the episode. A trajectory SkyRL stops on length
  (context full) is never graded: reward 0, ``score`` 0 in its metrics.
- Envs: SkyRL makes one env object per trajectory; the frozen env behind it is made once
  per (id, split, env arguments) in a process and lent to one ``FrozenTextEnv`` at a time
  (``close`` gives it back; ``init`` resets it on the row's task), so a trajectory costs no
  env construction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

try:
    import skyrl_gym  # type: ignore[import-untyped,unused-ignore]
    from skyrl_gym.envs.base_text_env import (  # type: ignore[import-untyped,unused-ignore]
        BaseTextEnv,
        BaseTextEnvStepOutput,
    )
except ImportError as error:  # pragma: no cover - exercised only without the package
    raise ImportError("frostgym.integrations.skyrl_gym needs skyrl-gym: pip install skyrl-gym==0.4.0") from error

from frostgym.core.splits import Split
from frostgym.envs.registry import ENTRIES, entry
from frostgym.train.session import (
    EpisodePool,
    TaskRow,
    TrainingEpisode,
    check_training_split,
    grade_metrics,
    messages_text,
    task_rows,
)

__all__ = [
    "ENTRY_POINT",
    "FrozenTextEnv",
    "register_skyrl_envs",
    "skyrl_row",
    "skyrl_rows",
    "task_row_of",
    "write_skyrl_dataset",
]

#: What every id is registered to in skyrl-gym's registry.
ENTRY_POINT = "frostgym.integrations.skyrl_gym:FrozenTextEnv"
#: ``reward_spec["method"]`` of the rows: the env's own grade is the reward.
REWARD_METHOD = "frostgym"

SkyRLMessage = dict[str, str]
_MESSAGE_KEYS = ("role", "content", "name", "tool_call_id")
_log = logging.getLogger(__name__)
_warned: set[tuple[str, ...]] = set()


def register_skyrl_envs() -> tuple[str, ...]:
    """Register every frostgym id with skyrl-gym (``skyrl_gym.register``) under the id
    itself, to ``FrozenTextEnv`` with ``env_id`` fixed; ids already registered are left
    as they are. Returns the ids."""
    for e in ENTRIES:
        if e.id not in skyrl_gym.registry:
            skyrl_gym.register(id=e.id, entry_point=ENTRY_POINT, kwargs={"env_id": e.id})
    return tuple(e.id for e in ENTRIES)


class FrozenTextEnv(BaseTextEnv):  # type: ignore[misc]  # skyrl-gym ships no type hints
    """One frostgym episode as a SkyRL-gym ``BaseTextEnv`` (one object per trajectory, as
    SkyRL's generator makes them).

    ``env_id``: the frostgym id (fixed by the registration); ``env_config`` (SkyRL's
    ``environment.skyrl_gym.<env_class>`` config, a mapping or ``DictConfig``) may give
    ``split`` and ``env_kwargs`` for rows that do not; ``extras`` is the dataset row's
    other columns (``extra_info`` with ``task_id``, ``episode_seed``, ``split``,
    ``env_kwargs``; see the module docstring) plus SkyRL's ``max_turns``. ``ValueError``
    when the row names another id or lacks its task. ``init`` must come before ``step``.
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None, env_id: str | None = None):
        super().__init__()
        config = _plain(env_config)
        extras = dict(extras or {})
        sample = {**{k: v for k, v in extras.items() if k != "extra_info"}, **_plain(extras.get("extra_info"))}
        self.env_id = _one_env_id(env_id, config.get("env_id"), sample.get("env_id"))
        if "task_id" not in sample or "episode_seed" not in sample:
            raise ValueError(
                f"{self.env_id}: the row's extras need task_id and episode_seed (skyrl_rows writes them in extra_info)"
            )
        self.task_id = str(sample["task_id"])
        self.episode_seed = int(sample["episode_seed"])
        self.split: Split = cast(Split, str(sample.get("split") or config.get("split") or "train"))
        env_kwargs = {**_kwargs(config.get("env_kwargs")), **_kwargs(sample.get("env_kwargs"))}
        # private only for a row skyrl_rows(..., allow_private=True) marked (or a config that says so)
        self.allow_private = bool(sample.get("allow_private") or config.get("allow_private"))
        self.episode = _POOL.borrow(self.env_id, self.split, env_kwargs, self.allow_private)
        cap = extras.get("max_turns")
        if cap is not None and 1 <= int(cap) < self.episode.max_turns:
            _warn_once(
                ("max_turns", self.env_id, str(cap)),
                "%s allows %d turns; SkyRL's max_turns=%d: its episodes are made with max_turns=%d",
                self.env_id,
                self.episode.max_turns,
                int(cap),
                int(cap),
            )
            _POOL.give_back(self.episode)
            self.episode = _POOL.borrow(
                self.env_id, self.split, {**env_kwargs, "max_turns": int(cap)}, self.allow_private
            )
        self._lent = True
        self.max_turns = self.episode.max_turns
        self.turns = 0

    def init(self, prompt: Sequence[Mapping[str, Any]] | None = None) -> tuple[list[SkyRLMessage], dict[str, Any]]:
        """Reset on the row's task: the env's first messages (what SkyRL generates from)
        and metadata (task id, split, ``max_turns``, whether ``prompt`` matched them)."""
        first = self.episode.start(self.task_id, self.episode_seed, self.split)
        self.turns = 0
        matches = prompt is None or messages_text(prompt) == messages_text(first)
        if not matches:
            _warn_once(
                ("prompt", self.env_id),
                "%s: a dataset prompt differs from the env's first messages; the env's are used",
                self.env_id,
            )
        metadata = {
            "env_id": self.env_id,
            "task_id": self.task_id,
            "split": self.split,
            "max_turns": self.max_turns,
            "prompt_matches": matches,
        }
        return to_skyrl_messages(first), metadata

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play one reply (the model's text). See the module docstring for what comes back."""
        result = self.episode.step(action)
        self.turns = self.episode.turns
        metadata: dict[str, Any] = {"env_id": self.env_id, "task_id": self.task_id, "turn": self.turns}
        if "turn_grade" in result.info:
            metadata["turn_grade"] = result.info["turn_grade"]
        if result.done:
            metadata["grade"] = result.grade
            metadata["metrics"] = grade_metrics(result.grade)
        return BaseTextEnvStepOutput(
            observations=to_skyrl_messages(result.messages),
            reward=float(result.reward),
            done=result.done,
            metadata=metadata,
            postprocessed_action=None,
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's grade components (``grade_metrics``; ``score`` 0 when it was never
        graded) and ``turns``: what SkyRL logs per episode."""
        return {**grade_metrics(self.episode.grade), "turns": float(self.turns)}

    def close(self) -> None:
        """Hand the frozen env back to the process's pool (the next trajectory resets it)."""
        if self._lent:
            self._lent = False
            _POOL.give_back(self.episode)


#: SkyRL makes an env object per trajectory (and runs their calls on worker threads).
_POOL = EpisodePool()


def to_skyrl_messages(messages: Sequence[Mapping[str, Any]]) -> list[SkyRLMessage]:
    """OpenAI-style messages as SkyRL's ``ConversationType`` (string fields: role,
    content and, where set, name and tool_call_id)."""
    out: list[SkyRLMessage] = []
    for m in messages:
        out.append({k: str(m[k]) for k in _MESSAGE_KEYS if isinstance(m.get(k), str)})
    return out


def skyrl_row(
    row: TaskRow, *, env_kwargs: Mapping[str, Any] | None = None, allow_private: bool = False
) -> dict[str, Any]:
    """The SkyRL dataset row of one task: its prompt is the env's first messages. A row of
    ``private`` needs ``allow_private=True`` (and is marked so, for ``FrozenTextEnv``)."""
    kwargs = dict(env_kwargs or {})
    episode = TrainingEpisode(row.env_id, row.split, allow_private=allow_private, **kwargs)
    try:
        prompt = to_skyrl_messages(episode.start(row.task_id, row.episode_seed, row.split))
    finally:
        episode.close()
    return _row(row, prompt, kwargs, allow_private)


def skyrl_rows(
    env_id: str, *, split: Split = "train", n: int, seed: int, allow_private: bool = False, **env_kwargs: Any
) -> list[dict[str, Any]]:
    """``n`` tasks of ``split`` (``task_rows``: the plan's tasks and seeds, as ``frostgym
    eval`` draws them) as SkyRL dataset rows, in that order. One env serves every row.
    ``private`` needs ``allow_private=True``; its rows say so (``extra_info.allow_private``)."""
    entry(env_id)  # an unknown id fails here, naming the known ones
    rows = task_rows(env_id, split=split, n=n, seed=seed, allow_private=allow_private, **env_kwargs)
    episode = TrainingEpisode(env_id, split, allow_private=allow_private, **env_kwargs)
    try:
        return [
            _row(
                row,
                to_skyrl_messages(episode.start(row.task_id, row.episode_seed, row.split)),
                env_kwargs,
                allow_private,
            )
            for row in rows
        ]
    finally:
        episode.close()


def task_row_of(row: Mapping[str, Any]) -> TaskRow:
    """The ``TaskRow`` a SkyRL dataset row (from ``skyrl_rows``) plays."""
    info = _plain(row.get("extra_info"))
    return TaskRow(str(info["env_id"]), cast(Split, info["split"]), str(info["task_id"]), int(info["episode_seed"]))


def write_skyrl_dataset(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` where SkyRL's ``data.train_data`` / ``data.val_data`` can read them:
    Parquet for a ``.parquet`` path (needs pyarrow), JSON lines for ``.jsonl``/``.json``.
    A row of ``private`` not marked ``allow_private`` (by ``skyrl_rows``) raises ``PrivateSplitError``."""
    for r in rows:
        info = _plain(r.get("extra_info"))
        check_training_split(str(info.get("split", "")), bool(info.get("allow_private", False)))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), path)
    elif suffix in (".jsonl", ".json"):
        with path.open("w", encoding="utf-8") as handle:
            for r in rows:
                handle.write(json.dumps(r, ensure_ascii=False) + "\n")
    else:
        raise ValueError(f"write_skyrl_dataset writes .parquet or .jsonl, not {path.name!r}")
    return path


def _row(
    row: TaskRow, prompt: list[SkyRLMessage], env_kwargs: Mapping[str, Any], allow_private: bool = False
) -> dict[str, Any]:
    extra_info: dict[str, Any] = {**row.to_dict(), "env_kwargs": json.dumps(dict(env_kwargs), sort_keys=True)}
    if allow_private:
        extra_info["allow_private"] = True
    return {
        "data_source": row.env_id,
        "prompt": prompt,
        "env_class": row.env_id,
        "reward_spec": {"method": REWARD_METHOD, "ground_truth": None},
        "extra_info": extra_info,
    }


def _one_env_id(*candidates: Any) -> str:
    given = {str(c) for c in candidates if c}
    if not given:
        raise ValueError("FrozenTextEnv needs a frostgym env id (register_skyrl_envs fixes it per id)")
    if len(given) > 1:
        raise ValueError(f"FrozenTextEnv was given different env ids: {sorted(given)}")
    env_id = given.pop()
    entry(env_id)  # gymnasium's UnregisteredEnv for an id frostgym does not have
    return env_id


def _plain(value: Any) -> dict[str, Any]:
    """A mapping (``DictConfig`` included) as a plain dict; None as ``{}``."""
    if value is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf comes with skyrl-gym
        pass
    else:
        if isinstance(value, DictConfig):
            return cast(dict[str, Any], OmegaConf.to_container(value, resolve=True))
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"expected a mapping, got {type(value).__name__}")


def _kwargs(value: Any) -> dict[str, Any]:
    """Env keyword arguments: a mapping, or JSON text of one (how rows carry them)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    return _plain(value)


def _warn_once(key: tuple[str, ...], text: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        _log.warning(text, *args)
