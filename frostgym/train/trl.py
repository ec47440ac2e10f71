"""Train against frostgym envs with TRL's ``GRPOTrainer`` (tested with trl 1.16).

Single-turn families (the math ids, Code-v0, Tools-v0)::

    from trl import GRPOConfig, GRPOTrainer
    from frostgym.train.trl import env_dataset, reward_functions

    data = env_dataset("frostgym/Math-v0", split="train", n=512, seed=0)
    trainer = GRPOTrainer(model, reward_funcs=reward_functions("frostgym/Math-v0"), train_dataset=data, args=...)

``env_dataset`` builds conversational prompts (the env's reset observation) with the
columns ``task_id``, ``episode_seed`` and ``split``; tasks and seeds come from
``frostgym.run.plan.make_plan`` (one sample per task), the same derivation an eval
card uses. ``reward_functions`` returns one function per grade component
(``frostgym_correctness``, ``frostgym_format``, ...) and one for the total score
(``frostgym_score``). Each resets a private env on the row's task and steps the
completion, so a reward is exactly what an episode would have scored. The components
are logged separately but TRL *sums* every reward function, so give the components
weight 0 (``GRPOConfig(reward_weights=...)``, see ``reward_weights``) unless you mean
to re-weight them. A completion is graded once per batch however many functions ask.

Multi-turn: TRL 1.16 has two hooks, ``rollout_func`` (you generate yourself) and the
experimental ``environment_factory`` (an object whose public methods become tools the
model calls during generation; TRL runs the tool loop). SQL-v0 is wired through
``environment_factory``: ``sql_environment_factory`` returns a factory whose objects
expose ``run_sql`` and ``submit_sql`` and step the real env; ``reward_functions`` on
SQL-v0 then reads the grade from those objects (the ``environments`` kwarg TRL passes).
If the model ends without calling ``submit_sql``, its last reply is stepped as text, so
an ``<answer>`` block still counts. TRL requires a chat template that renders tool
calls (SmolLM2's does not; Qwen2.5/Qwen3 templates do). The other multi-turn ids
(ToolsMultiTurn-v0, ToolsHTTP-v0) need tool results between turns that are not wired
here: ``reward_functions`` raises ``MultiTurnNotSupportedError`` for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from frostgym.core.env import FrozenEnv
from frostgym.core.errors import FrostgymError, MultiTurnNotSupportedError
from frostgym.core.splits import Split
from frostgym.envs.registry import make_env
from frostgym.run.plan import make_plan
from frostgym.train.curriculum import CurriculumSampler

RewardFunc = Callable[..., list[float | None]]

#: Multi-turn ids with an ``environment_factory`` here.
TOOL_ENVS = ("frostgym/SQL-v0",)
PREFIX = "frostgym_"


def env_dataset(env_id: str, *, split: Split = "train", n: int, seed: int, **env_kwargs: Any) -> Any:
    """``n`` distinct tasks of ``split`` as a conversational ``datasets.Dataset``: columns
    ``prompt`` (the reset observation), ``task_id``, ``episode_seed`` and ``split``."""
    from datasets import Dataset  # type: ignore[import-untyped,unused-ignore]

    plan = make_plan([env_id], split=split, episodes=n, samples=1, seed=seed, env_kwargs=env_kwargs)
    env = make_env(env_id, split, env_kwargs)
    rows: dict[str, list[Any]] = {"prompt": [], "task_id": [], "episode_seed": [], "split": []}
    try:
        for planned in plan:
            observation, _ = env.reset(seed=planned.seed, options={"task_id": planned.task_id})
            rows["prompt"].append([{"role": m["role"], "content": m["content"]} for m in observation])
            rows["task_id"].append(planned.task_id)
            rows["episode_seed"].append(planned.seed)
            rows["split"].append(split)
    finally:
        env.close()
    return Dataset.from_dict(rows)


def completion_text(completion: Any) -> str:
    """The reply to grade: a text completion as is, or the last assistant message's content."""
    if isinstance(completion, str):
        return completion
    for msg in reversed(completion):
        if msg.get("role") == "assistant":
            content = msg.get("content")
            return content if isinstance(content, str) else ""
    return ""


class SQLToolEnv:
    """One SQL-v0 episode per rollout, driven by TRL's tool loop (``environment_factory``).

    TRL calls ``reset`` with the dataset row, exposes ``run_sql`` and ``submit_sql`` as tools,
    and hands the objects to the reward functions, which read ``final_grade``."""

    def __init__(self, env_id: str = "frostgym/SQL-v0", **env_kwargs: Any) -> None:
        self._env_id = env_id
        self._env_kwargs = env_kwargs
        self._env: FrozenEnv | None = None
        self._grade: dict[str, Any] | None = None
        self._done = True

    def reset(self, *, task_id: str, episode_seed: int, split: Split = "train", **_: Any) -> None:
        if self._env is None:
            self._env = make_env(self._env_id, split, self._env_kwargs)
        self._env.reset(seed=int(episode_seed), options={"task_id": task_id, "split": split})
        self._grade, self._done = None, False
        return None  # the dataset prompt already holds the observation

    def _call(self, name: str, query: str) -> str:
        if self._env is None or self._done:
            return "The episode is over: no more tool calls."
        observation, _, terminated, truncated, info = self._env.step(
            {"tool_calls": [{"name": name, "arguments": {"query": query}}]}
        )
        return self._after_step(observation, terminated or truncated, info)

    def _after_step(self, observation: Sequence[Mapping[str, Any]], done: bool, info: Mapping[str, Any]) -> str:
        if done:
            self._done = True
            self._grade = dict(info["grade"]) if "grade" in info else None
            label = self._grade.get("label") if self._grade else None
            return f"graded: {label or 'match'}"
        return str(observation[-1]["content"])

    def run_sql(self, query: str) -> str:
        """Run an exploratory read-only query and see (part of) its result.

        Args:
            query: One SQLite SELECT statement.

        Returns:
            The query's result (cut to a few rows) or an error message.
        """
        return self._call("run_sql", query)

    def submit_sql(self, query: str) -> str:
        """Submit the final query that answers the question. Ends the episode.

        Args:
            query: One SQLite SELECT statement.

        Returns:
            Whether the query was graded as a match.
        """
        return self._call("submit_sql", query)

    def final_grade(self, last_reply: str) -> dict[str, Any] | None:
        """The episode's grade; steps ``last_reply`` as text first if the episode is still open.
        Computed once per episode, so every reward function reads the same grade."""
        if not self._done and self._env is not None:
            observation, _, terminated, truncated, info = self._env.step(last_reply)
            self._after_step(observation, terminated or truncated, info)
        return self._grade


def sql_environment_factory(env_id: str = "frostgym/SQL-v0", **env_kwargs: Any) -> Callable[[], SQLToolEnv]:
    """For ``GRPOTrainer(environment_factory=...)`` on SQL-v0 (with ``env_dataset`` rows)."""
    if env_id not in TOOL_ENVS:
        raise MultiTurnNotSupportedError(f"no environment factory for {env_id}; only {', '.join(TOOL_ENVS)}")
    return lambda: SQLToolEnv(env_id, **env_kwargs)


class _Grader:
    """One env per thread, and a per-batch memo of grades keyed by (task, seed, split, text)."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.local = threading.local()

    def _env(self, split: Split, level: int | None) -> FrozenEnv:
        envs: dict[tuple[str, int | None], FrozenEnv] = self.local.__dict__.setdefault("envs", {})
        if (split, level) not in envs:
            kwargs = self.env_kwargs if level is None else {**self.env_kwargs, "level": level}
            envs[(split, level)] = make_env(self.env_id, split, kwargs)
        return envs[(split, level)]

    def grade(
        self, task_id: str, episode_seed: int, split: Split, text: str, level: int | None = None
    ) -> dict[str, Any]:
        env = self._env(split, level)
        env.reset(seed=int(episode_seed), options={"task_id": task_id, "split": split})
        _, _, _, _, info = env.step(text)
        if "grade" not in info:
            raise MultiTurnNotSupportedError(
                f"{self.env_id} did not grade a single reply (it answered with feedback for another turn); "
                "this integration grades the first reply as the final answer"
            )
        return dict(info["grade"])

    def batch(self, completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[dict[str, Any] | None]:
        """Grades for a batch, computed once however many reward functions ask for it."""
        if getattr(self.local, "completions", None) is completions:
            return cast(list[dict[str, Any] | None], self.local.grades)
        texts = [completion_text(c) for c in completions]
        environments = kwargs.get("environments")
        grades: list[dict[str, Any] | None]
        if environments is not None:
            grades = [env.final_grade(text) for env, text in zip(environments, texts, strict=True)]
        else:
            if "task_id" not in kwargs or "episode_seed" not in kwargs:
                raise ValueError("the dataset needs task_id and episode_seed columns: build it with env_dataset()")
            splits = kwargs.get("split") or ["train"] * len(texts)
            levels = kwargs.get("level") or [None] * len(texts)  # a curriculum's rows name their level
            memo: dict[tuple[str, int, str, str], dict[str, Any]] = {}
            grades = []
            for task_id, seed, split, level, text in zip(
                kwargs["task_id"], kwargs["episode_seed"], splits, levels, texts, strict=True
            ):
                key = (task_id, int(seed), split, text)
                if key not in memo:
                    memo[key] = self.grade(task_id, int(seed), split, text, None if level is None else int(level))
                grades.append(memo[key])
        self.local.completions, self.local.grades = completions, grades
        return grades


def _probe_components(env_id: str, env_kwargs: Mapping[str, Any]) -> list[str]:
    """The weighted component names, read from one graded oracle reply on a dev/test task."""
    splits: tuple[Split, ...] = ("dev", "test")
    for split in splits:
        env = make_env(env_id, split, env_kwargs)
        try:
            if not env.source.size(split):
                continue
            env.reset(seed=0)
            _, _, _, _, info = env.step(env.oracle_action())
            if "grade" in info:
                return list(info["grade"]["weights"])
        finally:
            env.close()
    raise FrostgymError(f"could not read the grade components of {env_id}")


def reward_functions(
    env_id: str, *, curriculum: CurriculumSampler | None = None, **env_kwargs: Any
) -> list[RewardFunc]:
    """One reward function per weighted grade component, then ``frostgym_score`` (the reward).

    Each takes TRL's ``prompts``/``completions`` plus the dataset columns and returns one
    float per completion. Rows need ``task_id`` and ``episode_seed`` (see ``env_dataset``),
    and ``level`` when they come from ``curriculum_dataset``: pass its ``curriculum`` too,
    and ``frostgym_score`` records each completion's pass (score 1) at its row's level.
    """
    if curriculum is not None:
        env_kwargs = {**curriculum.env_kwargs, **env_kwargs}
        probe_kwargs = {**env_kwargs, "level": curriculum.curriculum.level}
    else:
        probe_kwargs = env_kwargs
    probe = make_env(env_id, "test", probe_kwargs)
    max_turns = probe.max_turns
    probe.close()
    if max_turns > 1 and env_id not in TOOL_ENVS:
        raise MultiTurnNotSupportedError(
            f"{env_id} is multi-turn (up to {max_turns} turns, with tool results between them); "
            f"the TRL integration grades single replies, and wires multi-turn only for {', '.join(TOOL_ENVS)}"
        )
    grader = _Grader(env_id, env_kwargs)

    def make(component: str | None) -> RewardFunc:
        def reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
            out: list[float | None] = []
            grades = grader.batch(completions, kwargs)
            for grade in grades:
                if grade is None:
                    out.append(0.0)
                elif component is None:
                    out.append(float(grade["score"]))
                else:
                    value = grade["components"].get(component)
                    out.append(None if value is None else float(value))
            if component is None and curriculum is not None:
                curriculum.record_batch(kwargs.get("level") or [None] * len(out), [score == 1.0 for score in out])
            return out

        reward.__name__ = f"{PREFIX}{component or 'score'}"
        reward.__qualname__ = reward.__name__
        return reward

    return [make(name) for name in _probe_components(env_id, probe_kwargs)] + [make(None)]


def curriculum_dataset(sampler: CurriculumSampler, *, batch: int = 8) -> Any:
    """An endless ``datasets.IterableDataset`` of prompts drawn ``batch`` tasks at a time at
    the curriculum's current level: columns ``prompt``, ``task_id``, ``episode_seed``,
    ``split`` and ``level``. Give TRL ``max_steps`` (the stream has no end) and
    ``shuffle_dataset=False``, and pass the same sampler to ``reward_functions(...,
    curriculum=sampler)`` so each batch's rewards move the curriculum. The loader reads
    ahead, so a move shows a batch or two later; the tasks are still a function of the
    seed and the rewards so far (``frostgym.train.curriculum``)."""
    from datasets import IterableDataset  # type: ignore[import-untyped,unused-ignore]

    def rows() -> Any:
        while True:
            for task in sampler.next(batch):
                observation, _ = sampler.env(task.level).reset(seed=task.seed, options={"task_id": task.task_id})
                yield {
                    "prompt": [{"role": m["role"], "content": m["content"]} for m in observation],
                    "task_id": task.task_id,
                    "episode_seed": task.seed,
                    "split": sampler.split,
                    "level": task.level,
                }

    return IterableDataset.from_generator(rows)


def reward_weights(funcs: Sequence[RewardFunc]) -> list[float]:
    """``GRPOConfig.reward_weights`` that train on the env's reward only: 1 for
    ``frostgym_score``, 0 for the logged-only components."""
    return [1.0 if f.__name__ == f"{PREFIX}score" else 0.0 for f in funcs]
