"""Tasks a run leaves out of its plan, and why: ``frostgym eval --exclude FILE``.

Why: a task found in the training data (``frostgym contamination``) says nothing about the
model, so it is taken out before the run, not dropped after it: the plan is drawn from the
tasks that remain, and the card's identity records each exclusion with its reason and the
file's SHA-256 (``identity_record``), so a resume, a replay or a comparison sees another
exclusion list as another plan, and the accounting counts them (``Tally``).

The file is either the JSON ``frostgym contamination --json`` writes (its contaminated
tasks are excluded, each with its figures as the reason) or text, one task a line:
``TASK_ID`` or ``ENV_ID TASK_ID``, optionally followed by ``# reason``; blank lines and
lines starting with ``#`` are ignored. A task id alone applies to whichever env of the run
has that task. Entries about other envs, or about tasks of splits the run does not play,
exclude nothing and are not recorded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frostgym.contamination.report import ContaminationInputError, contaminated_in
from frostgym.core.errors import FrostgymError, UnknownTaskError
from frostgym.core.splits import parse_splits
from frostgym.envs.registry import make_env


class ExclusionError(FrostgymError, ValueError):
    """An exclusion file that cannot be read, or names a task its env does not have."""


@dataclass(frozen=True)
class Exclusion:
    """One task to leave out: its env (None: whichever env of the run has it), id, reason."""

    env: str | None
    task_id: str
    reason: str


@dataclass(frozen=True)
class ExclusionList:
    """The entries of an exclusion file, in file order, and the file's SHA-256."""

    sha256: str
    entries: tuple[Exclusion, ...]


def read_exclusions(path: Path) -> ExclusionList:
    """The entries of ``path`` (see the module docstring). Raises ``ExclusionError`` for a
    file that is missing, not UTF-8, a report that is malformed, or a line that is neither
    ``TASK_ID`` nor ``ENV_ID TASK_ID``."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ExclusionError(f"cannot read the exclusion file {path}: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ExclusionError(f"{path} is not UTF-8 text") from None
    sha256 = hashlib.sha256(data).hexdigest()
    if text.lstrip().startswith("{"):
        return ExclusionList(sha256, _from_report(text, path))
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        content, _, comment = line.partition("#")
        fields = content.split()
        if not fields:
            continue
        if len(fields) > 2:
            raise ExclusionError(f"{path}, line {number}: expected 'TASK_ID' or 'ENV_ID TASK_ID' (then '# reason')")
        env = fields[0] if len(fields) == 2 else None
        entries.append(Exclusion(env, fields[-1], comment.strip() or f"listed in {path.name}"))
    return ExclusionList(sha256, tuple(entries))


def _from_report(text: str, path: Path) -> tuple[Exclusion, ...]:
    try:
        flagged = contaminated_in(json.loads(text), str(path))
    except ValueError as error:  # not JSON, or ContaminationInputError
        if isinstance(error, ContaminationInputError):
            raise ExclusionError(str(error)) from None
        raise ExclusionError(f"{path} is not JSON: {error}") from None
    return tuple(
        Exclusion(
            task.env,
            task.task_id,
            f"contaminated: n-gram overlap {task.ngram_overlap:.2f}, MinHash {task.minhash_similarity:.2f}"
            + ("" if task.train_line is None else f", training line {task.train_line}"),
        )
        for task in flagged
    )


def resolve(
    exclusions: ExclusionList,
    env_ids: Sequence[str],
    split: str,
    kwargs_for: Callable[[str], Mapping[str, Any]],
) -> list[Exclusion]:
    """The entries that take a task out of this run, each with its env: those naming one of
    ``env_ids`` (or none) whose task that env (made with ``kwargs_for(env_id)``) has in one
    of the played ``split`` (comma-separated); the first entry of a task wins. Raises
    ``ExclusionError`` for an entry that names an env of the run and a task id it does not
    have (a typo would otherwise exclude nothing, silently)."""
    played = set(parse_splits(split))
    kept: dict[tuple[str, str], Exclusion] = {}
    for env_id in env_ids:
        mine = [e for e in exclusions.entries if e.env in (None, env_id)]
        if not mine:
            continue
        env = make_env(env_id, split, kwargs_for(env_id))
        try:
            for entry in mine:
                try:
                    task = env.source.task_by_id(entry.task_id)
                except UnknownTaskError as error:
                    if entry.env is None:
                        continue  # another env's task
                    raise ExclusionError(f"--exclude names {entry.task_id!r} for {env_id}: {error}") from None
                if task.split in played:
                    kept.setdefault((env_id, entry.task_id), Exclusion(env_id, entry.task_id, entry.reason))
        finally:
            env.close()
    return list(kept.values())


def identity_record(exclusions: ExclusionList, applied: Sequence[Exclusion]) -> dict[str, Any]:
    """What a card's ``config.identity.excluded`` holds: the file's SHA-256 and each task
    taken out, with its env and reason."""
    return {
        "sha256": exclusions.sha256,
        "tasks": [{"env": e.env, "task_id": e.task_id, "reason": e.reason} for e in applied],
    }


def excluded_tasks(identity: Mapping[str, Any]) -> dict[str, Collection[str]]:
    """Per env id, the task ids a card's ``identity`` excludes (none: an empty mapping)."""
    found: dict[str, set[str]] = {}
    for entry in (identity.get("excluded") or {}).get("tasks", []):
        found.setdefault(entry["env"], set()).add(entry["task_id"])
    return {env: frozenset(ids) for env, ids in found.items()}
