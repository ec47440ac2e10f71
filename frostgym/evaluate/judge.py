"""Judge a card: an LLM judge's grade of every episode's final reply, into a new card.

The path is regrade's (``frostgym.evaluate.replay.replay_into``): the source card's recorded actions are
played again through fresh envs by a ``ReplayAgent``, with the same plan, seeds and
execution options and no retries, into a new card by ``run_to_card``. What differs is the
envs they are played in: each is wrapped (``JudgingEnvs``) so that the step that ends an
episode carries the judge's grade (``frostgym.graders.judge.judge_rubric``) in place of the
env's own, and its score as the reward. A judge that gives no verdict raises ``JudgeError``
from that step, and the runner files the episode as a drop of the error's class
(``grader_error``, ``replay_miss``, ``infra_error``) with its reason. Episodes dropped in the
source, or whose actions the card keeps only in part, are ``skipped`` drops, as in regrade.

What the judge reads: the episode's final action (a non-text action as its canonical JSON),
with the task's question, the last user message of the observation at reset.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, SupportsFloat

from frostgym.cards.card import load_card
from frostgym.cards.store import write_json_atomic
from frostgym.core.grade import passes
from frostgym.core.hashing import canonical_json
from frostgym.core.messages import Action, Observation
from frostgym.core.seeding import derive_seed
from frostgym.core.splits import Split
from frostgym.evaluate.replay import replay_into
from frostgym.graders.judge import GRADER, Rubric, judge_rubric
from frostgym.models.frozen import FrozenModel
from frostgym.run.runner import LocalEnvs, RunnerEnv

#: The file ``judge_card`` writes next to the judged card's own files.
JUDGE_FILE = "judge.json"


def judge_seed(episode_seed: int) -> int:
    """The seed an episode's judge call is made with: a pure function of the episode's seed."""
    return derive_seed("llm_judge", episode_seed)


def question_of(observation: Observation) -> str | None:
    """The task's question: the last user message of ``observation`` (text), or None."""
    for message in reversed(observation):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


class JudgedEnv:
    """``env`` with the judge's grade on the step that ends an episode (see the module
    docstring); every other step, and everything else, is ``env``'s own."""

    def __init__(self, env: RunnerEnv, rubric: Rubric, model: FrozenModel) -> None:
        self._env = env
        self._rubric = rubric
        self._model = model
        self._seed = 0
        self._question: str | None = None

    @property
    def turn(self) -> int:
        return self._env.turn

    @property
    def tools(self) -> Any:
        return getattr(self._env, "tools", None)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        observation, info = self._env.reset(seed=seed, options=options)
        self._seed = judge_seed(seed if seed is not None else 0)
        self._question = question_of(observation)
        return observation, info

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self._env.step(action)
        if not (terminated or truncated):
            return observation, reward, terminated, truncated, info
        text = action if isinstance(action, str) else canonical_json(action)
        grade = judge_rubric(self._rubric, text, self._model, seed=self._seed, question=self._question)
        rule = info.get("grade")
        if isinstance(rule, Mapping):  # what maj@k votes with stays the env's reading of the answer
            answer_key = rule.get("details", {}).get("answer_key")
            grade = dataclasses.replace(grade, details={**grade.details, "answer_key": answer_key})
        return observation, grade.score, terminated, truncated, {**info, "grade": grade.to_dict()}

    def oracle_action(self) -> Action:
        return self._env.oracle_action()

    def close(self) -> None:
        self._env.close()


class JudgingEnvs:
    """An env backend (``frostgym.run.runner.EnvBackend``) of this process's envs, each
    wrapped in a ``JudgedEnv`` grading with ``rubric`` by ``model``."""

    def __init__(self, rubric: Rubric, model: FrozenModel) -> None:
        self._local = LocalEnvs()
        self.rubric = rubric
        self.model = model

    def make_env(self, env_id: str, split: Split | str, env_kwargs: Mapping[str, Any]) -> RunnerEnv:
        return JudgedEnv(self._local.make_env(env_id, split, env_kwargs), self.rubric, self.model)

    def step_threads(self, workers: int) -> int:
        return self._local.step_threads(workers)


def judge_card(source: Path, out: Path, rubric: Rubric, model: FrozenModel) -> dict[str, Any]:
    """Judge every episode of the card at ``source`` into a new card at ``out`` (see the
    module docstring), then write and return ``out/judge.json``: the source, the rubric,
    the judge (``FrozenModel.describe``, the grader's name and version), how many episodes
    were judged, passed and dropped (by drop class), and where the judge's replies came
    from (``cache`` or ``live``). Raises ``CardCorruptError`` for a source that fails its
    checksums or holds a line that is not a record, ``FileExistsError`` for an ``out`` that
    is not empty, and what opening the judge's model raises."""
    replay_into(source, out, envs=JudgingEnvs(rubric, model))
    _, judged, dropped = load_card(out)
    sources = Counter(str(e.grade.get("details", {}).get("judge_source")) for e in judged if e.grade is not None)
    report = {
        "source": str(source),
        "rubric": rubric.to_dict(),
        "rubric_sha256": rubric.sha256,
        "judge": {"grader": GRADER.name, "grader_version": GRADER.version, **model.describe()},
        "judged": len(judged),
        "passed": sum(1 for e in judged if e.grade is not None and passes(e.grade)),
        "drops": dict(sorted(Counter(d.drop.drop_class for d in dropped).items())),
        "judge_replies": dict(sorted(sources.items())),
    }
    write_json_atomic(out / JUDGE_FILE, report)
    return report
