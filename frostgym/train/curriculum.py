"""An adaptive curriculum: which level of an env to train on next, from the pass rate so far.

Why: RL learns where the reward varies. A group of completions that all pass, or all fail,
has no advantage to learn from, so training is best spent on the level where the running
pass rate sits inside a band (30-70% by default). ``Curriculum`` moves one level up when
the pass rate over the last ``window`` outcomes at a level rises above the band, one level
down when it falls below, and logs every decision.

It is deterministic: the level is a pure function of the config and the outcomes recorded
so far, and ``CurriculumSampler`` draws each task from a generator derived from the run
seed, the level and how many tasks that level has served (``derive_generator``), never
from global randomness. The same seed and the same history give the same tasks.

Used by ``frostgym.train.trl.curriculum_dataset`` (a streaming dataset for TRL's
GRPO whose rewards feed the curriculum back) and by anything that resets envs itself
(vector envs: ``CurriculumSampler.next`` gives the level, task id and seed to reset with).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, SupportsFloat

import gymnasium

from frostgym.core.env import FrozenEnv
from frostgym.core.messages import Action, Observation
from frostgym.core.seeding import derive_generator, derive_seed
from frostgym.core.splits import Split
from frostgym.envs.registry import make_env
from frostgym.train.session import check_training_split

Move = Literal["up", "down"]


@dataclass(frozen=True)
class CurriculumConfig:
    """``levels`` in order of difficulty (easiest first) and the one to ``start`` at; the
    ``band`` of running pass rates to keep (low, high); the ``window`` of outcomes at a
    level the pass rate is taken over (a level is left only once it has that many).
    Raises ``ValueError`` for an empty or repeating level list, a start not in it, a band
    outside [0, 1] or a window below 1."""

    levels: tuple[int, ...]
    start: int
    band: tuple[float, float] = (0.3, 0.7)
    window: int = 64

    def __post_init__(self) -> None:
        if not self.levels or len(set(self.levels)) != len(self.levels):
            raise ValueError(f"levels must be distinct and not empty, got {self.levels}")
        if self.start not in self.levels:
            raise ValueError(f"start level {self.start} is not one of {self.levels}")
        low, high = self.band
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(f"band must be 0 <= low < high <= 1, got {self.band}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")


@dataclass(frozen=True)
class CurriculumStep:
    """One ``record`` call: the outcomes it added at ``level``, the running pass rate after
    them (None until the window is full), and the move it caused, if any."""

    step: int
    level: int
    outcomes: int
    passed: int
    pass_rate: float | None
    move: Move | None


@dataclass
class Curriculum:
    """The current level and the running pass rate at it. Feed it each batch's outcomes
    with ``record``; read ``level`` before drawing the next batch; ``log`` holds one
    ``CurriculumStep`` per ``record``."""

    config: CurriculumConfig
    level: int = field(init=False)
    log: list[CurriculumStep] = field(init=False, default_factory=list)
    _recent: deque[bool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.level = self.config.start
        self._recent = deque(maxlen=self.config.window)

    @property
    def pass_rate(self) -> float | None:
        """The pass rate over the last ``window`` outcomes at this level (None: fewer yet)."""
        if len(self._recent) < self.config.window:
            return None
        return sum(self._recent) / len(self._recent)

    def record(self, passed: Iterable[bool], *, level: int | None = None) -> Move | None:
        """Add outcomes of episodes played at ``level`` (None: the current one; a pass is a
        reward of 1, or whatever the caller counts as one), then move a level when the full
        window's pass rate is outside the band and there is a level to move to. Outcomes of
        another level than the current one (a batch drawn before the last move) are logged
        but not counted. Returns the move."""
        outcomes = [bool(p) for p in passed]
        played = self.level if level is None else level
        if played != self.level:
            self.log.append(CurriculumStep(len(self.log), played, len(outcomes), sum(outcomes), self.pass_rate, None))
            return None
        self._recent.extend(outcomes)
        rate = self.pass_rate
        move: Move | None = None
        if rate is not None:
            low, high = self.config.band
            index = self.config.levels.index(self.level)
            if rate > high and index + 1 < len(self.config.levels):
                move = "up"
            elif rate < low and index > 0:
                move = "down"
        self.log.append(CurriculumStep(len(self.log), self.level, len(outcomes), sum(outcomes), rate, move))
        if move is not None:
            index = self.config.levels.index(self.level)
            self.level = self.config.levels[index + (1 if move == "up" else -1)]
            self._recent.clear()
        return move

    def log_records(self) -> list[dict[str, Any]]:
        """The log as JSON data (one object per step), for a training run's output."""
        return [asdict(step) for step in self.log]


@dataclass(frozen=True)
class CurriculumTask:
    """A task to play next: the level, the task id (it names the level) and the reset seed."""

    level: int
    task_id: str
    seed: int


class CurriculumSampler:
    """Draws tasks of ``env_id`` at the curriculum's current level: ``next(n)`` gives ``n``
    tasks of ``split`` (drawn independently: a finite split may repeat one), ``record``
    feeds outcomes back. Envs are made per level with ``env_kwargs`` plus ``level``.
    Raises what ``make_env`` raises for an id without levels or a level it lacks, and
    ``PrivateSplitError`` for ``split="private"`` without ``allow_private=True``
    (``frostgym.train.session.check_training_split``); what uses the sampler
    (``curriculum_dataset``, ``CurriculumEnv``, ``reward_functions(curriculum=...)``)
    inherits its ``allow_private``."""

    def __init__(
        self,
        env_id: str,
        config: CurriculumConfig,
        *,
        seed: int,
        split: Split = "train",
        env_kwargs: Mapping[str, Any] | None = None,
        allow_private: bool = False,
    ) -> None:
        check_training_split(split, allow_private)
        self.allow_private = allow_private
        self.env_id = env_id
        self.curriculum = Curriculum(config)
        self.seed = seed
        self.split: Split = split
        self.env_kwargs = dict(env_kwargs or {})
        self._envs: dict[int, FrozenEnv] = {}
        self._drawn: dict[int, int] = {}  # level -> tasks drawn at it so far
        #: The levels of each batch ``record_batch`` was given, in order.
        self.batches: list[tuple[int, ...]] = []

    def make_env(self, level: int) -> FrozenEnv:
        """A new env of ``level`` on this sampler's split, made with its ``env_kwargs``."""
        return make_env(self.env_id, self.split, {**self.env_kwargs, "level": level})

    def env(self, level: int) -> FrozenEnv:
        """The sampler's own env of ``level`` (made once), to reset on its tasks."""
        if level not in self._envs:
            self._envs[level] = self.make_env(level)
        return self._envs[level]

    def next(self, n: int) -> list[CurriculumTask]:
        """``n`` tasks at the current level, each from a generator derived from the run
        seed, the level and the number of tasks that level served before it."""
        level = self.curriculum.level
        source = self.env(level).source
        size = source.size(self.split)
        tasks: list[CurriculumTask] = []
        for _ in range(n):
            count = self._drawn.get(level, 0)
            self._drawn[level] = count + 1
            rng = derive_generator("curriculum", self.seed, self.env_id, level, count)
            index = int(rng.integers(0, 2**31 if size is None else size))
            task = source.task(self.split, index)
            seed = derive_seed("curriculum-episode", self.seed, self.env_id, task.task_id, count)
            tasks.append(CurriculumTask(level, task.task_id, seed))
        return tasks

    def record(self, passed: Sequence[bool], *, level: int | None = None) -> Move | None:
        """``Curriculum.record`` on this sampler's curriculum."""
        return self.curriculum.record(passed, level=level)

    def record_batch(self, levels: Sequence[int | None], passed: Sequence[bool]) -> None:
        """Record a training batch's outcomes, each at the level its row was drawn at (None:
        the current one), and log the batch's levels in ``batches`` (one entry per call:
        a trainer's step)."""
        by_level: dict[int | None, list[bool]] = {}
        for level, ok in zip(levels, passed, strict=True):
            by_level.setdefault(level, []).append(ok)
        self.batches.append(tuple(sorted(self.curriculum.level if level is None else level for level in by_level)))
        for level, outcomes in by_level.items():
            self.curriculum.record(outcomes, level=level)

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


class CurriculumEnv(gymnasium.Env[Observation, Action]):
    """An env that plays a curriculum: each ``reset`` plays the sampler's next task (its
    level, task and seed: the ``seed`` argument is not used, the sampler's run seed decides)
    on an env of its own for that level, and the end of each episode records its pass
    (reward 1) with the sampler. Several of these may share one sampler in one process
    (``gymnasium.vector.SyncVectorEnv([lambda: CurriculumEnv(sampler)] * n)``); processes
    of their own (an async vector env) would each hold a copy, so they must not."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's API)

    def __init__(self, sampler: CurriculumSampler) -> None:
        self.sampler = sampler
        self._envs: dict[int, FrozenEnv] = {}
        self._level = sampler.curriculum.level
        first = self._env(self._level)
        self.observation_space = first.observation_space
        self.action_space = first.action_space

    def _env(self, level: int) -> FrozenEnv:
        if level not in self._envs:
            self._envs[level] = self.sampler.make_env(level)  # its own: the sampler's is shared
        return self._envs[level]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        (task,) = self.sampler.next(1)
        self._level = task.level
        observation, info = self._env(task.level).reset(seed=task.seed, options={"task_id": task.task_id})
        return observation, {**info, "level": task.level}

    def step(self, action: Action) -> tuple[Observation, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self._env(self._level).step(action)
        if terminated or truncated:
            self.sampler.record([float(reward) == 1.0], level=self._level)
        return observation, reward, terminated, truncated, {**info, "level": self._level}

    def oracle_action(self) -> Action:
        """The gold action for the current step (``FrozenEnv.oracle_action`` of the level played)."""
        return self._env(self._level).oracle_action()

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
