"""One episode of a frozen env as a trainer's adapter drives it: rows of tasks, then reset,
step and grade, with the new messages of each step.

Why one module: every trainer adapter (TRL, verifiers, SkyRL-gym, verl) must give the same
guarantee, that an episode played through it is the episode ``gym.make`` plays (the same
task for the same seed, the same observations, the same grade). Each adapter only translates
its trainer's calls into ``TrainingEpisode`` calls and its results back; where tasks come
from (``task_rows``, the plan's derivation, as an eval card's), how an assistant message
becomes an action (``assistant_action``) and what a grade logs (``grade_metrics``) are
decided here once. So is the one rule about splits: training never touches ``private``
unless the caller says ``allow_private=True`` (``check_training_split``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frostgym.core.env import FrozenEnv
from frostgym.core.errors import EpisodeNotActiveError, PrivateSplitError
from frostgym.core.messages import Action, Message
from frostgym.core.splits import Split
from frostgym.envs.registry import make_env
from frostgym.run.plan import make_plan

#: The split training helpers refuse unless told ``allow_private=True``.
PRIVATE_SPLIT: Split = "private"


def check_training_split(split: str, allow_private: bool = False) -> None:
    """Refuse ``split`` for training when it is (or, comma-separated, includes) ``private``
    and ``allow_private`` is not true: raises ``PrivateSplitError`` saying why and how to
    override. Every training helper (``task_rows``, ``TrainingEpisode``, the curriculum,
    the TRL helpers, the trainer adapters' row builders and envs) calls it; evaluation
    (``frostgym eval --split private``) does not, as measuring on the split is what it is for."""
    if allow_private or PRIVATE_SPLIT not in (part.strip() for part in str(split).split(",")):
        return
    raise PrivateSplitError(
        "refusing to train on the private split: it is held out to measure contamination and overfitting "
        "(the gap between public and private tasks), and a model trained on it has lost that measure for good. "
        "Train on train (or dev); to use private anyway, pass allow_private=True, and declare it on the cards "
        "of the models it trained (frostgym eval --trained-on-private)."
    )


@dataclass(frozen=True)
class TaskRow:
    """One task to train on: the env, its task id and the seed its episode is reset with.

    ``task_id`` and ``episode_seed`` are those of a ``frostgym eval`` plan with the same
    ``env_id``, ``split``, ``seed`` and env arguments (one sample per task), so a trained
    episode can be replayed or compared against an eval card's."""

    env_id: str
    split: Split
    task_id: str
    episode_seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "split": self.split, "task_id": self.task_id, "episode_seed": self.episode_seed}


def task_rows(
    env_id: str, *, split: Split = "train", n: int, seed: int, allow_private: bool = False, **env_kwargs: Any
) -> list[TaskRow]:
    """``n`` distinct tasks of ``split``, in the plan's seeded order (``make_plan``, one
    sample each). Raises ``ValueError`` where ``split`` has fewer than ``n`` tasks, and
    ``PrivateSplitError`` for ``private`` without ``allow_private`` (``check_training_split``)."""
    check_training_split(split, allow_private)
    plan = make_plan([env_id], split=split, episodes=n, samples=1, seed=seed, env_kwargs=env_kwargs)
    return [TaskRow(env_id, split, entry.task_id, entry.seed) for entry in plan]


def grade_metrics(grade: Mapping[str, Any] | None) -> dict[str, float]:
    """What a trainer logs of a grade: ``score`` and each component, as floats (a component
    the grade left unset is left out). An episode with no grade (the trainer stopped it)
    logs ``score`` 0."""
    if grade is None:
        return {"score": 0.0}
    metrics = {"score": float(grade["score"])}
    for name, value in grade["components"].items():
        if value is not None:
            metrics[name] = float(value)
    return metrics


def assistant_action(message: Mapping[str, Any] | str) -> Action:
    """The env action for an assistant message: its text, or ``{"content", "tool_calls"}``
    when it holds structured tool calls (OpenAI's ``{"function": {...}}`` form included;
    string arguments are decoded by the env's parser)."""
    if isinstance(message, str):
        return message
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if not calls:
        return text
    return {"content": text, "tool_calls": [_plain_call(call) for call in calls]}


def _plain_call(call: Any) -> Any:
    if isinstance(call, Mapping):
        return dict(call)
    function = getattr(call, "function", None)  # an SDK object (openai's ChatCompletionMessageToolCall)
    if function is not None:
        return {"name": getattr(function, "name", None), "arguments": getattr(function, "arguments", None)}
    return call


@dataclass(frozen=True)
class StepResult:
    """What one step gave: the messages the env added after the assistant's reply (tool
    results, feedback, the next user turn), the reward (the final score on the step that
    ends the episode, else 0), whether the episode is over, its grade (on that step) and
    the env's ``info``."""

    messages: list[Message]
    reward: float
    done: bool
    grade: dict[str, Any] | None
    info: dict[str, Any]


class TrainingEpisode:
    """A frozen env made once and reset per episode, for an adapter that plays episodes one
    after another (make one per concurrent episode: it is not thread-safe).

    ``start(task_id, episode_seed)`` resets it on that task and returns the first messages;
    ``step(action)`` plays one reply. ``tools`` is what the env offers on the current turn
    (OpenAI function schemas; ``[]`` for an env without tools). After the episode ends,
    ``step`` raises ``EpisodeNotActiveError`` and ``grade`` holds the final grade. The
    ``private`` split (made on, or started on) raises ``PrivateSplitError`` unless
    ``allow_private`` (``check_training_split``)."""

    def __init__(self, env_id: str, split: Split = "train", *, allow_private: bool = False, **env_kwargs: Any) -> None:
        check_training_split(split, allow_private)
        self.env_id = env_id
        self.split: Split = split
        self.allow_private = allow_private
        self.env_kwargs = dict(env_kwargs)
        self.env: FrozenEnv = make_env(env_id, split, self.env_kwargs)
        self.messages: list[Message] = []
        self.grade: dict[str, Any] | None = None
        self.done = True
        self.turns = 0

    @property
    def max_turns(self) -> int:
        return self.env.max_turns

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(getattr(self.env, "tools", None) or [])

    def start(self, task_id: str, episode_seed: int, split: Split | None = None) -> list[Message]:
        if split is not None:
            check_training_split(split, self.allow_private)
        observation, _ = self.env.reset(
            seed=int(episode_seed), options={"task_id": task_id, "split": split or self.split}
        )
        self.messages = list(observation)
        self.grade, self.done, self.turns = None, False, 0
        return list(observation)

    def step(self, action: Action) -> StepResult:
        if self.done:
            raise EpisodeNotActiveError("the episode is over: start another")
        before = len(self.messages)
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self.messages = list(observation)
        self.done = bool(terminated or truncated)
        if self.done:
            self.grade = dict(info["grade"]) if "grade" in info else None
        # The env's observation is the whole conversation: what it holds past the history
        # before this step and the assistant's reply is what the env said in answer.
        added = list(observation[before + 1 :])
        return StepResult(added, float(reward), self.done, self.grade, info)

    def finish(self, last: Action | None = None) -> dict[str, Any] | None:
        """The episode's grade, stepping ``last`` first when the episode is still open (a
        trainer whose loop ended it early: its last reply is then graded as the answer)."""
        if not self.done and last is not None:
            self.step(last)
        return self.grade

    def close(self) -> None:
        self.env.close()


def messages_text(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each message's content: what the contract test compares across adapters."""
    return [str(m.get("content") or "") for m in messages]


class EpisodePool:
    """Frozen envs made once per (id, split, env arguments) and lent to one episode at a time.

    Trainers make an env object per trajectory (SkyRL) or run episodes concurrently (verl,
    verifiers); making a frozen env each time costs more than a step of the cheap ids, and a
    ``TrainingEpisode`` is not thread-safe. A lent env is reset on its next task, and episodes
    are a pure function of the task and seed, so a lent env's episode is a new env's.
    ``borrow`` checks the split first (an idle env may be the private split's); ``close``
    closes every idle env, and the pool may lend again after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, list[TrainingEpisode]] = {}

    @staticmethod
    def _key(env_id: str, split: str, env_kwargs: Mapping[str, Any]) -> str:
        return json.dumps([env_id, split, dict(env_kwargs)], sort_keys=True, default=repr)

    def borrow(
        self, env_id: str, split: Split, env_kwargs: Mapping[str, Any], allow_private: bool = False
    ) -> TrainingEpisode:
        check_training_split(split, allow_private)
        key = self._key(env_id, split, env_kwargs)
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return idle.pop()
        return TrainingEpisode(env_id, split, allow_private=allow_private, **env_kwargs)

    def give_back(self, episode: TrainingEpisode) -> None:
        key = self._key(episode.env_id, episode.split, episode.env_kwargs)
        with self._lock:
            self._idle.setdefault(key, []).append(episode)

    def idle(self) -> int:
        """How many envs wait to be lent."""
        with self._lock:
            return sum(len(episodes) for episodes in self._idle.values())

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for episodes in idle.values():
            for episode in episodes:
                episode.close()
