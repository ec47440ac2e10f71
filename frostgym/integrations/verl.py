"""verl adapter: one frostgym episode per verl agent-loop run, and the dataset rows verl's
trainer reads (tested with verl 0.9.1 on CPU: ``docs/trainers/verl.md`` says how to install it).

Why: verl's rollout (``AgentLoopWorker``) runs one agent loop per dataset row. It builds the
loop class named by the row's ``agent_name`` from its registry (``@register``, or the YAML
file ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` names), with
``hydra.utils.instantiate``, and awaits ``run(sampling_params, **row)``; ``run`` talks to the
model server in token ids (``server_manager.generate``) and returns an ``AgentLoopOutput``:
the prompt ids, the response ids (the model's tokens, mask 1, and the environment's, mask 0)
and the reward. Training on a frozen env through verl must play exactly the episode
``gym.make`` plays (same task for the same seed, same observations, same grade), so this loop
only translates: the env is driven through ``frostgym.train.session.TrainingEpisode`` and its
messages are turned into tokens by verl's own Continuous Token builder, the one every verl
agent loop uses (``ct_build_initial_tokens``, ``ct_merge_assistant_token``,
``ct_merge_context_msg``), so the ids are those verl's ``ToolAgentLoop`` would build.

- ``FrostgymAgentLoop`` (registered as ``AGENT_NAME``, ``"frostgym_agent"``): ``run`` reads
  the task from the row's ``extra_info`` (``env_id``, ``task_id``, ``episode_seed``,
  ``split``, ``env_kwargs`` as JSON text), resets the env and tokenises its first messages
  with its tools (the chat template's ``tools=``), then until the episode ends: generates a
  reply, decodes it (special tokens dropped) as the action, steps the env and appends the
  messages the env added. The dataset's ``prompt`` only serves verl before ``run`` (length
  filtering, logging): the env's own first messages are what the model sees.
- The output: ``reward_score`` is the grade's score (verl puts it on the last response
  token as ``rm_scores`` and trains on it; no reward function is needed), ``num_turns``
  counts the first messages, the assistant's turns and the env's turns as verl's loops do,
  ``extra_fields`` holds ``turn_scores`` (each step's reward), ``reward_extra_info``
  (``score``: the same key set for every row, as verl requires) and ``frostgym`` (the task,
  the grade, ``grade_metrics``, the first messages and each step's added messages, and
  ``graded``).
- Turns and length: the episode ends when the env ends it (its ``max_turns``).
  ``multi_turn.max_assistant_turns`` below an id's limit makes the env with ``max_turns``
  set to it (the prompt states the limit and the last reply is graded, the
  ``gym.make(id, max_turns=k)`` episode). A trajectory that fills ``response_length`` first
  is stopped there and never graded: reward 0, ``graded`` False.
- ``verl_row``/``verl_rows`` give verl's dataset rows (``data_source``, ``prompt``,
  ``agent_name``, ``reward_model`` with no ground truth: the env grades, the answer never
  enters the data, and ``extra_info``) for ``task_rows``' tasks; ``write_verl_parquet``
  writes them for ``data.train_files``. A row of the ``private`` split needs
  ``allow_private=True`` and is marked so (``extra_info.allow_private``); the loop plays
  no other private row (``PrivateSplitError``: ``frostgym.train.session.check_training_split``).

Envs are made once per (id, split, env arguments) and reused across runs from a pool (verl
makes a new loop object per row, and runs many at once in one event loop); every env call
runs in a worker thread so generation for the other rows goes on meanwhile.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast
from uuid import uuid4

try:
    from verl.experimental.agent_loop.agent_loop import (  # type: ignore[import-not-found, unused-ignore]
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
    from verl.utils.profiler import simple_timer  # type: ignore[import-not-found, unused-ignore]
except ImportError as error:  # pragma: no cover - exercised only without the package
    raise ImportError(
        "frostgym.integrations.verl needs verl 0.9.1 and what its agent loop imports (docs/trainers/verl.md: Install)"
    ) from error

from frostgym.core.messages import Message
from frostgym.core.splits import Split
from frostgym.train.session import (
    EpisodePool,
    StepResult,
    TaskRow,
    TrainingEpisode,
    assistant_action,
    check_training_split,
    grade_metrics,
    task_rows,
)

__all__ = [
    "AGENT_NAME",
    "FrostgymAgentLoop",
    "agent_loop_config",
    "verl_row",
    "verl_rows",
    "write_verl_parquet",
]

#: The name the loop is registered under: a row's ``agent_name``.
AGENT_NAME = "frostgym_agent"
#: ``reward_model["style"]`` of the rows: the env's own grade is the reward.
REWARD_STYLE = "frostgym"

_T = TypeVar("_T")


_POOL = EpisodePool()


def _config_get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    value = getter(key, default) if callable(getter) else getattr(config, key, default)
    return default if value is None else value


def _allows_private(kwargs: Mapping[str, Any]) -> bool:
    """Whether a row was made with ``allow_private=True`` (``verl_rows`` marks its ``extra_info``)."""
    extra = kwargs.get("extra_info")
    return bool((dict(extra) if extra else {}).get("allow_private", kwargs.get("allow_private", False)))


def _task_of(kwargs: Mapping[str, Any]) -> tuple[str, str, int, Split, dict[str, Any]]:
    """The task a row names: ``extra_info``'s keys, or the row's own columns (checked by
    ``check_training_split``: a private row must say ``allow_private``)."""
    extra = kwargs.get("extra_info")
    sample = {**{k: v for k, v in kwargs.items() if k != "extra_info"}, **(dict(extra) if extra else {})}
    missing = [k for k in ("env_id", "task_id", "episode_seed") if sample.get(k) is None]
    if missing:
        raise ValueError(f"a frostgym row needs {', '.join(missing)} in extra_info (verl_rows writes them)")
    env_kwargs = sample.get("env_kwargs") or {}
    if isinstance(env_kwargs, str):
        env_kwargs = json.loads(env_kwargs)
    split = cast(Split, str(sample.get("split") or "train"))
    check_training_split(split, _allows_private(kwargs))
    return str(sample["env_id"]), str(sample["task_id"]), int(sample["episode_seed"]), split, dict(env_kwargs)


@dataclass
class _Trajectory:
    """One run's state between turns: the chat so far, the token sequence and its metadata."""

    tools: Any
    messages: list[dict[str, Any]]
    token_ids: list[int]
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    added: list[list[Message]] = field(default_factory=list)
    turn_scores: list[float] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    assistant_turns: int = 0
    env_turns: int = 0


@register(AGENT_NAME)  # type: ignore[misc, unused-ignore]  # verl ships no type hints
class FrostgymAgentLoop(AgentLoopBase):  # type: ignore[misc, unused-ignore]
    """One frostgym episode per ``run`` (see the module docstring). Made by verl's worker
    with the arguments every ``AgentLoopBase`` takes; ``tools`` (verl's own tool list) is
    accepted and unused: the env's tools are the ones offered."""

    def __init__(self, *args: Any, tools: Any = None, **kwargs: Any) -> None:
        del tools
        super().__init__(*args, **kwargs)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        multi_turn = _config_get(self.rollout_config, "multi_turn")
        self.max_assistant_turns = _config_get(multi_turn, "max_assistant_turns")

    async def _in_thread(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _episode_for(
        self, env_id: str, split: Split, env_kwargs: dict[str, Any], allow_private: bool = False
    ) -> TrainingEpisode:
        episode = _POOL.borrow(env_id, split, env_kwargs, allow_private)
        cap = self.max_assistant_turns
        if cap is not None and 1 <= int(cap) < episode.max_turns and "max_turns" not in env_kwargs:
            _POOL.give_back(episode)
            episode = _POOL.borrow(env_id, split, {**env_kwargs, "max_turns": int(cap)}, allow_private)
        return episode

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        """Play the row's episode; returns verl's ``AgentLoopOutput``."""
        env_id, task_id, episode_seed, split, env_kwargs = _task_of(kwargs)
        episode = await self._in_thread(self._episode_for, env_id, split, env_kwargs, _allows_private(kwargs))
        try:
            return await self._play(episode, task_id, episode_seed, split, sampling_params)
        finally:
            _POOL.give_back(episode)

    async def _env_turn(self, episode: TrainingEpisode, t: _Trajectory, reply_ids: list[int]) -> bool:
        """One turn's env part, after the reply's ids joined the sequence: decode the reply
        (special tokens dropped) as the action, step the env, and unless the episode (or the
        response length) ends there, append the messages the env added to the sequence
        (verl's ``ct_merge_context_msg``, mask 0). True when the episode goes on."""
        tokenizer: Any = self.tokenizer  # verl annotates the class, AutoTokenizer, not an instance
        reply = tokenizer.decode(reply_ids, skip_special_tokens=True)
        with simple_timer("tool_calls", t.metrics):
            result: StepResult = await self._in_thread(episode.step, assistant_action(reply))
        t.added.append(result.messages)
        t.turn_scores.append(result.reward)
        t.messages.append({"role": "assistant", "content": reply})
        if result.done or len(t.response_mask) >= self.response_length:
            return False
        previous = list(t.messages)
        t.messages.extend(dict(m) for m in result.messages)
        merged, mask, merged_logprobs = await self.ct_merge_context_msg(
            previous, t.messages, t.token_ids, t.response_mask, t.response_logprobs or None, tools=t.tools
        )
        if len(mask) >= self.response_length:
            return False
        t.token_ids, t.response_mask = merged.token_ids, mask
        if t.response_logprobs:
            t.response_logprobs = merged_logprobs or []
        t.env_turns += 1
        return True

    async def _play(
        self, episode: TrainingEpisode, task_id: str, episode_seed: int, split: Split, sampling_params: dict[str, Any]
    ) -> Any:
        first: list[Message] = await self._in_thread(episode.start, task_id, episode_seed, split)
        tools: Any = episode.tools or None  # verl annotates it list[dict] and passes None itself
        messages: list[dict[str, Any]] = [dict(m) for m in first]
        token_ids: list[int] = await self.ct_build_initial_tokens(messages, tools=tools)
        t = _Trajectory(tools=tools, messages=messages, token_ids=token_ids)
        metrics = t.metrics
        request_id = uuid4().hex
        while True:
            with simple_timer("generate_sequences", metrics):
                output = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=t.token_ids, sampling_params=sampling_params
                )
            if "num_preempted" not in metrics:  # as ToolAgentLoop counts it: -1 where the server gives none
                metrics["num_preempted"] = output.num_preempted if output.num_preempted is not None else -1
            else:
                metrics["num_preempted"] += output.num_preempted or 0
            logprobs = list(output.log_probs) if output.log_probs else None
            reply_ids = list(output.token_ids)
            merged, t.response_mask, aligned = await self.ct_merge_assistant_token(
                t.token_ids,
                reply_ids,
                t.response_mask,
                t.response_logprobs if (t.response_logprobs or logprobs) else None,
                assistant_logprobs=logprobs,
            )
            t.token_ids = merged.token_ids
            if aligned is not None:
                t.response_logprobs = aligned
            t.assistant_turns += 1
            if not await self._env_turn(episode, t, reply_ids):
                break

        token_ids, response_mask, response_logprobs = t.token_ids, t.response_mask, t.response_logprobs
        added, turn_scores, assistant_turns, env_turns = t.added, t.turn_scores, t.assistant_turns, t.env_turns
        grade = episode.grade if episode.done else None
        scores = grade_metrics(grade)
        n = len(response_mask)
        prompt_ids = token_ids[: len(token_ids) - n]
        response_ids = token_ids[len(token_ids) - n :] if n else []
        out = AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[: self.response_length],
            response_mask=response_mask[: self.response_length],
            response_logprobs=response_logprobs[: self.response_length] if response_logprobs else None,
            reward_score=scores["score"],
            num_turns=1 + assistant_turns + env_turns,
            metrics=AgentLoopMetrics(**metrics),
            extra_fields={},
        )
        out.extra_fields.update(
            {
                "turn_scores": turn_scores,
                "tool_rewards": [],
                "reward_extra_info": {"score": scores["score"]},
                "frostgym": {
                    "env_id": episode.env_id,
                    "task_id": task_id,
                    "episode_seed": episode_seed,
                    "split": split,
                    "graded": grade is not None,
                    "grade": grade,
                    "metrics": scores,
                    "first": [dict(m) for m in first],
                    "added": [[dict(m) for m in step] for step in added],
                },
            }
        )
        return out


def agent_loop_config(path: str | Path) -> Path:
    """Write the YAML file ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` names:
    ``AGENT_NAME`` to ``FrostgymAgentLoop``, for a worker process that has not imported
    this module (verl's workers read the file; the ``@register`` of an import suffices
    only in the process that imported it)."""
    target = Path(path)
    target.write_text(f"- name: {AGENT_NAME}\n  _target_: {FrostgymAgentLoop.__module__}.FrostgymAgentLoop\n")
    return target


def _prompt_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    return [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in messages]


def verl_row(
    row: TaskRow, *, index: int = 0, env_kwargs: Mapping[str, Any] | None = None, allow_private: bool = False
) -> dict[str, Any]:
    """verl's dataset row of one task; its ``prompt`` is the env's first messages. A row of
    ``private`` needs ``allow_private=True`` (and is marked so)."""
    kwargs = dict(env_kwargs or {})
    episode = TrainingEpisode(row.env_id, row.split, allow_private=allow_private, **kwargs)
    try:
        prompt = _prompt_messages(episode.start(row.task_id, row.episode_seed, row.split))
    finally:
        episode.close()
    return _row(row, prompt, index, kwargs, allow_private)


def _row(
    row: TaskRow, prompt: list[dict[str, str]], index: int, env_kwargs: Mapping[str, Any], allow_private: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "data_source": row.env_id,
        "prompt": prompt,
        "agent_name": AGENT_NAME,
        "ability": "frostgym",
        "reward_model": {"style": REWARD_STYLE, "ground_truth": ""},
        "extra_info": {
            "index": index,
            "env_id": row.env_id,
            "split": row.split,
            "task_id": row.task_id,
            "episode_seed": row.episode_seed,
            "env_kwargs": json.dumps(dict(env_kwargs), sort_keys=True),
        },
    }
    if allow_private:
        out["extra_info"]["allow_private"] = True
    return out


def verl_rows(
    env_id: str | Iterable[TaskRow],
    *,
    split: Split = "train",
    n: int = 0,
    seed: int = 0,
    allow_private: bool = False,
    **env_kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's dataset rows: for ``n`` tasks of ``env_id`` (``task_rows``: the plan's tasks
    and seeds, as ``frostgym eval`` draws them), or for the given ``TaskRow``s. Each row's
    ``extra_info["index"]`` is its position. ``private`` needs ``allow_private=True``."""
    rows = (
        task_rows(env_id, split=split, n=n, seed=seed, allow_private=allow_private, **env_kwargs)
        if isinstance(env_id, str)
        else list(env_id)
    )
    out: list[dict[str, Any]] = []
    episodes: dict[tuple[str, str], TrainingEpisode] = {}
    try:
        for index, row in enumerate(rows):
            key = (row.env_id, row.split)
            if key not in episodes:
                episodes[key] = TrainingEpisode(row.env_id, row.split, allow_private=allow_private, **env_kwargs)
            first = episodes[key].start(row.task_id, row.episode_seed, row.split)
            out.append(_row(row, _prompt_messages(first), index, env_kwargs, allow_private))
    finally:
        for episode in episodes.values():
            episode.close()
    return out


def write_verl_parquet(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write ``rows`` (``verl_rows``) as the Parquet file ``data.train_files`` (or
    ``data.val_files``) names. A row of ``private`` not marked ``allow_private`` (by
    ``verl_rows``) raises ``PrivateSplitError``."""
    for r in rows:
        info = dict(r.get("extra_info") or {})
        check_training_split(str(info.get("split", "")), bool(info.get("allow_private", False)))
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), target)
    return target
