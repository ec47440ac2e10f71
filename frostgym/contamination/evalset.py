"""The eval side of a contamination check: every task of the chosen envs and splits, with
the text a training set could have leaked.

Why its own module: which tasks an eval plays, and what of a task counts as its text, are
decided once here for the check, the split-hygiene report and their tests. The tasks are
enumerated the way a run's plan enumerates a whole split (``frostgym.run.plan.choose_tasks``
with no task count), so a level or a category narrowing of an env (``ID[level=2]``) is
checked on exactly the tasks it plays. A task's text is its prompt (``Task.prompt``: the
question, the problem, HumanEval's signature and docstring, the user's request), not the
first messages the env shows: those add the env's system prompt, a database schema or a
tool listing, the same for thousands of tasks, which would match each other's leaks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from frostgym.core.splits import Split
from frostgym.envs.registry import ENTRIES, make_env
from frostgym.envs.specs import EnvSpec
from frostgym.run.plan import choose_tasks

#: The splits checked by default: those a published score comes from.
DEFAULT_SPLITS: tuple[Split, ...] = ("test", "private")


@dataclass(frozen=True)
class EvalTask:
    """One eval task: its env id, split, task id and text."""

    env: str
    split: Split
    task_id: str
    text: str


def all_env_specs() -> list[EnvSpec]:
    """Every registered env id, with no arguments."""
    return [EnvSpec(entry.id) for entry in ENTRIES]


def eval_tasks(specs: Sequence[EnvSpec], splits: Sequence[Split] = DEFAULT_SPLITS) -> list[EvalTask]:
    """Every task of each env of ``specs`` (made with its own arguments) in each of
    ``splits``, in that order and in index order within a split; a split an env has no task
    in adds none. Raises ``ValueError`` for an unbounded split (procedural ``train``: it has
    no list to check) and what ``make_env`` raises for an unknown id or arguments."""
    found: list[EvalTask] = []
    for spec in specs:
        env = make_env(spec.env_id, splits[0], spec.kwargs)
        try:
            for split in splits:
                if env.source.size(split) is None:
                    raise ValueError(f"split {split!r} of {spec} is unbounded: only fixed splits can be checked")
                found += [
                    EvalTask(spec.env_id, split, task.task_id, task.prompt)
                    for task in choose_tasks(env, spec.env_id, split, None, 0)
                ]
        finally:
            env.close()
    return found


def train_texts(spec: EnvSpec, count: int) -> Iterator[str]:
    """The prompts of the first ``count`` tasks of ``spec``'s unbounded train split (each a
    seeded draw: the same on every machine). Raises ``ValueError`` when its train split is
    fixed or empty (nothing is generated there)."""
    env = make_env(spec.env_id, "train", spec.kwargs)
    try:
        if env.source.size("train") is not None:
            raise ValueError(f"{spec} has no generated train split")
        for index in range(count):
            yield env.source.task("train", index).prompt
    finally:
        env.close()


def has_generated_train(spec: EnvSpec) -> bool:
    """Whether ``spec``'s train split is drawn by a generator (unbounded)."""
    env = make_env(spec.env_id, "dev", spec.kwargs)
    try:
        return env.source.size("train") is None
    finally:
        env.close()
