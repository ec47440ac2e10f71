"""Locked content hashes of shipped and generated task data.

A family's ``fixtures/<family>/lock.json`` records the SHA-256 of each task source's
dev split. The first time a process uses a source it recomputes that hash and refuses
to run on a mismatch (a different ``reasoning-gym``, an edited generator), so two
machines can never silently serve different episodes under the same id.
"""

from __future__ import annotations

import json
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from frostgym.core.errors import FixtureMismatchError
from frostgym.core.tasks import ProceduralSource

_verified: dict[tuple[str, str, type[ProceduralSource]], str] = {}
_lock = threading.Lock()


def lock_path(family: str) -> Path:
    return Path(str(resources.files("frostgym") / "fixtures" / family / "lock.json"))


def read_lock(family: str) -> dict[str, Any]:
    path = lock_path(family)
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def lock_entry(source: ProceduralSource) -> dict[str, Any]:
    return {
        "version": source.version,
        "sizes": {k: v for k, v in source.sizes.items()},
        "dev_sha256": source.fingerprint(("dev",)),
    }


def write_lock(family: str, sources: list[ProceduralSource]) -> Path:
    """Recompute and write the lock file; only for deliberate, reviewed data changes."""
    path = lock_path(family)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {s.name: lock_entry(s) for s in sorted(sources, key=lambda s: s.name)}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def merge_lock(family: str, source: ProceduralSource) -> Path:
    """Recompute one source's entry and keep the family's others: for a family whose
    sources are added one at a time."""
    path = lock_path(family)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = read_lock(family) if path.exists() else {}
    data[source.name] = lock_entry(source)
    path.write_text(json.dumps(dict(sorted(data.items())), indent=2, sort_keys=True) + "\n")
    return path


def verified_fixture_sha256(family: str, source: ProceduralSource) -> str:
    """The locked hash of ``source``, checked against a recomputation once per process."""
    # Keyed by class too: another generator under the same name is checked afresh.
    key = (family, source.name, type(source))
    with _lock:
        if key in _verified:
            return _verified[key]
        entry = read_lock(family).get(source.name)
        if entry is None:
            raise FixtureMismatchError(
                f"no locked hash for task source {source.name!r} in {lock_path(family)}; "
                "run `frostgym lock --write` after reviewing the data"
            )
        actual = lock_entry(source)
        if actual != entry:
            raise FixtureMismatchError(
                f"task source {source.name!r} does not match its lock: expected {entry}, got {actual}. "
                "A dependency that generates tasks (e.g. reasoning-gym) is not the pinned version, "
                "or the generator changed without a version bump."
            )
        _verified[key] = entry["dev_sha256"]
        return _verified[key]
