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

An entry that names an env of the run (by its env id, or, for a task id alone, by the task
source the id starts with) but no task of it is *unknown*: a typo, or an id of another config
(another level tags its ids). It would exclude nothing, silently, so ``resolve`` refuses the
file, listing every unknown entry, unless told to warn (``--exclude-unknown=warn``, for one
file shared by runs of several configs). A finite split has the tasks its source lists; an
unbounded one (a generator's ``train``) has one at every index, so no index of it is unknown.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from frostgym.contamination.report import contaminated_in
from frostgym.core.errors import ContaminationInputError, ExclusionError, UnknownTaskError
from frostgym.core.splits import parse_splits
from frostgym.envs.registry import make_env

#: What ``resolve`` does with unknown entries: refuse the file, or return them to be warned of.
UnknownPolicy = Literal["error", "warn"]


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


@dataclass(frozen=True)
class Resolution:
    """What an exclusion file does to one run: ``applied``, the entries that take a task out
    of it (each with its env), and ``unknown``, those naming an env of the run but no task
    of it (each with its env, when the file named one), in file order."""

    applied: tuple[Exclusion, ...]
    unknown: tuple[Exclusion, ...]


def resolve(
    exclusions: ExclusionList,
    env_ids: Sequence[str],
    split: str,
    kwargs_for: Callable[[str], Mapping[str, Any]],
    *,
    unknown: UnknownPolicy = "error",
) -> Resolution:
    """The entries that take a task out of this run: those naming one of ``env_ids`` (or
    none) whose task that env (made with ``kwargs_for(env_id)``) has in one of the played
    ``split`` (comma-separated); the first entry of a task wins. An entry is unknown when it
    names an env of the run, or is a task id alone whose source is that of an env of the run,
    and that env has no such task (module docstring). Raises ``ExclusionError`` listing
    every unknown entry unless ``unknown`` is ``"warn"``: then they are returned in
    ``Resolution.unknown``, and exclude nothing."""
    played = set(parse_splits(split))
    kept: dict[tuple[str, str], Exclusion] = {}
    claimed: set[int] = set()  # entries some env of the run has the task of
    concerned: set[int] = set()  # entries naming an env of the run, or its task source
    problems: dict[int, str] = {}
    for env_id in env_ids:
        mine = [(n, e) for n, e in enumerate(exclusions.entries) if e.env in (None, env_id)]
        if not mine:
            continue
        env = make_env(env_id, split, kwargs_for(env_id))
        try:
            for number, entry in mine:
                if entry.env is None and _source_name(entry.task_id) != env.source.name:
                    continue  # another env's task
                concerned.add(number)
                try:
                    task = env.source.task_by_id(entry.task_id)
                except UnknownTaskError as error:
                    problems.setdefault(number, f"{env_id}: {error}")
                    continue
                claimed.add(number)
                if task.split in played:
                    kept.setdefault((env_id, entry.task_id), Exclusion(env_id, entry.task_id, entry.reason))
        finally:
            env.close()
    unknown_entries = tuple(exclusions.entries[n] for n in sorted(concerned - claimed))
    if unknown_entries and unknown == "error":
        first = problems[min(concerned - claimed)]
        raise ExclusionError(
            f"--exclude names {describe_unknown(unknown_entries)} ({first}); "
            "fix the file, or pass --exclude-unknown=warn to go on without them"
        )
    return Resolution(tuple(kept.values()), unknown_entries)


def describe_unknown(entries: Sequence[Exclusion]) -> str:
    """Unknown ``entries`` in one line: how many, then each as the file gave it."""
    listed = ", ".join(repr(e.task_id if e.env is None else f"{e.env} {e.task_id}") for e in entries)
    return f"{len(entries)} {'task' if len(entries) == 1 else 'tasks'} no env of the run has: {listed}"


def _source_name(task_id: str) -> str:
    """The name of the task source ``task_id`` starts with: ``arithmetic`` for
    ``arithmetic~L1/test/5``, ``bfcl_mt`` for ``bfcl_mt/base/test/3``."""
    return task_id.split("/", 1)[0].split("~", 1)[0]


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
