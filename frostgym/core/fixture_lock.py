"""Locked content hashes of shipped and generated task data.

A family's lock file (``frostgym/fixtures/<family>/lock.json`` in the package, or the
file its env names in ``FrozenEnv.lock_file``) keeps each task source's ``lock_record``:
its version, config, split sizes, and the SHA-256 of each split it locks, named
(``"sha256": {"dev": …}``; a generator locks dev, a fixed list every non-empty split).
Entries are keyed by the source's ``id_prefix``, so one file can lock a source under
several configs: its name for the default config, ``name~L<n>`` for a level, ``name~tag``
for another.

The first time a process uses a source it recomputes that record and refuses to run on
a mismatch (a different ``reasoning-gym``, an edited generator), so two machines can
never silently serve different episodes under the same id. The default config and every
level ship with the package, so each must have an entry. Any other config that no lock
holds is hashed once per process instead, and that hash is what the records carry as
``fixture_sha256``: nothing is refused up front, but a replay or regrade elsewhere
compares it and catches drift.

A source that makes twins (``TaskSource.twin_rule``) also keeps, in its entry, the rule's
version and a hash of the twins of its locked splits (``"twins"``). Twins are derived from
locked content, but by code of their own (and for code twins, by ``ast``, whose output may
differ between Python versions), so they are locked like the content: checked the first
time a process serves a twin (``verified_twins``), not at every first reset.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from frostgym.core.errors import FixtureMismatchError
from frostgym.core.hashing import canonical_json
from frostgym.core.tasks import TaskSource

_verified: dict[tuple[str, str, str, type[TaskSource]], str] = {}
_verified_twins: set[tuple[str, str, str, type[TaskSource]]] = set()
_lock = threading.Lock()


def package_lock_file(family: str) -> Path:
    """Where a family shipped inside the package keeps its lock."""
    return Path(str(resources.files("frostgym") / "fixtures" / family / "lock.json"))


def read_lock(path: Path) -> dict[str, Any]:
    """The entries of the lock file at ``path``; none if it does not exist."""
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _write(path: Path, entries: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(sorted(entries.items())), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def write_lock(path: Path, sources: Iterable[TaskSource]) -> Path:
    """Recompute the entries of ``sources`` and write them as the whole lock file at
    ``path``; only for deliberate, reviewed data changes."""
    return _write(path, {s.id_prefix: s.lock_record() for s in sources})


def merge_lock(path: Path, source: TaskSource) -> Path:
    """Recompute one source's entry and keep the file's others: for a source (or a
    config of one) locked on its own."""
    entries = read_lock(path)
    entries[source.id_prefix] = source.lock_record()
    return _write(path, entries)


def _fixture_sha256(source: TaskSource, record: dict[str, Any]) -> str:
    """The one hash that names the data ``source`` serves: SHA-256 over the full content
    of its locked splits together (for one split, that split's hash in ``record``)."""
    hashes = record["sha256"]
    if len(hashes) == 1:
        return str(next(iter(hashes.values())))
    return source.fingerprint(source.locked_splits)


def verified_fixture_sha256(path: Path, source: TaskSource) -> str:
    """The fixture hash of ``source``, checked once per process against its entry in the
    lock file at ``path``. Raises ``FixtureMismatchError`` if the entry differs from a
    recomputation, or if there is none for the default config or a level; any other
    config without an entry is hashed and trusted for this process."""
    # Keyed by class too: another generator under the same name is checked afresh.
    key = _key(path, source)
    with _lock:
        if key in _verified:
            return _verified[key]
        entry = read_lock(path).get(source.id_prefix)
        if entry is not None:  # the twins are checked when one is first served (verified_twins)
            entry = {name: value for name, value in entry.items() if name != "twins"}
        actual = source.lock_record(twins=False)
        if entry is None and (source.default_config or source.level is not None):
            how = "" if source.level is None or source.default_config else f" --env 'ID[level={source.level}]'"
            raise FixtureMismatchError(
                f"no locked hash for task source {source.id_prefix!r} in {path}; "
                f"run `frostgym lock --write{how}` after reviewing the data"
            )
        if entry is not None and entry != actual:
            raise FixtureMismatchError(
                f"task source {source.id_prefix!r} does not match its lock in {path}: expected {entry}, "
                f"got {actual}. A dependency that generates tasks (e.g. reasoning-gym) is not the pinned "
                "version, or the generator changed without a version bump."
            )
        _verified[key] = _fixture_sha256(source, actual)
        return _verified[key]


def verified_twins(path: Path, source: TaskSource) -> None:
    """Check ``source``'s twins once per process against its entry in the lock file at
    ``path`` (its ``twins`` record: the rule's version and the hash of the twins of the
    locked splits). Raises ``FixtureMismatchError`` when they differ, or when a locked
    entry has no twins record; a config without an entry is trusted, as its tasks are."""
    key = _key(path, source)
    with _lock:
        if key in _verified_twins:
            return
        entry = read_lock(path).get(source.id_prefix)
        if entry is not None:
            actual = source.twins_record()
            if entry.get("twins") != actual:
                raise FixtureMismatchError(
                    f"the twins of task source {source.id_prefix!r} do not match their lock in {path}: expected "
                    f"{entry.get('twins')}, got {actual}. The twin rule changed without a new twin_rule version, "
                    "or the lock predates it: run `frostgym lock --write` after reviewing the twins."
                )
        _verified_twins.add(key)


def _key(path: Path, source: TaskSource) -> tuple[str, str, str, type[TaskSource]]:
    return (str(path), source.id_prefix, canonical_json(source.config_record()), type(source))
