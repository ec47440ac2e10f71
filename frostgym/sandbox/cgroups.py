"""Per-server control groups for the jail, where the host lets root write them.

RLIMIT_NPROC does not bind root and counts zombies; a pids cgroup does neither. A memory
cgroup bounds what a task's processes hold together, which RLIMIT_AS (per process,
virtual) cannot. Each fork server gets its own groups below the caller's own; the server
sets the limits per task and moves each task into them.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class TaskGroups:
    """Host paths of the groups, per slot: one group per controller (v1) or one in all
    (v2). Two slots, because the server forks the next task's process while the current
    task runs, and that process joins its groups then (a v1 join takes time): a task
    has its slot to itself, the next one waits in the other."""

    slots: tuple[tuple[Path, ...], ...]
    #: The process that made them. A forked copy of it (a trainer's data worker, say) holds
    #: this object too, and its clean-up must not remove the groups a live server still
    #: moves tasks into: only the owner removes them.
    owner: int = field(default_factory=os.getpid)

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(path for slot in self.slots for path in slot)

    def remove(self) -> None:
        if os.getpid() != self.owner:
            return
        for path in self.paths:
            with contextlib.suppress(OSError):
                path.rmdir()


def _own_group(controller: str) -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" and controllers == ""):
            return path
    return None


def _remove_stale(parent: Path, prefix: str) -> None:
    """Groups left by killed processes: empty ones whose creator is gone."""
    for path in parent.glob(f"{prefix}-*"):
        try:
            pid = int(path.name[len(prefix) + 1 :].split("-")[0])
        except ValueError:
            continue
        if not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                path.rmdir()  # fails (and is left alone) while processes remain in it


def create_task_groups(prefix: str = "frostgym-sandbox", slots: int = 2) -> TaskGroups | None:
    """Fresh pids + memory groups for one server, or None where they cannot be made."""
    name = f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    made: list[tuple[Path, ...]] = []
    try:
        for slot in range(slots):
            made.append(_create_slot(prefix, f"{name}-{slot}"))  # a failed slot removes its own
    except OSError:
        TaskGroups(tuple(made)).remove()
        return None
    if not made or not made[0]:
        return None
    return TaskGroups(tuple(made))


def _create_slot(prefix: str, name: str) -> tuple[Path, ...]:
    """One group per controller; () where this host has neither cgroup layout."""
    made: list[Path] = []
    try:
        if (CGROUP_ROOT / "pids").is_dir() and (CGROUP_ROOT / "memory").is_dir():  # v1
            for controller in ("pids", "memory"):
                own = _own_group(controller)
                if own is None:
                    raise OSError(f"no {controller} group")
                parent = CGROUP_ROOT / controller / own.lstrip("/")
                _remove_stale(parent, prefix)
                path = parent / name
                path.mkdir()
                made.append(path)
                if not (path / "cgroup.procs").exists():
                    raise OSError(f"{path} is not a cgroup")
        elif (CGROUP_ROOT / "cgroup.controllers").exists():  # v2
            own = _own_group("") or "/"
            parent = CGROUP_ROOT / own.lstrip("/")
            wanted = {"pids", "memory"}
            if not wanted <= set((parent / "cgroup.subtree_control").read_text().split()):
                raise OSError("pids/memory not delegated here")
            _remove_stale(parent, prefix)
            path = parent / name
            path.mkdir()
            made.append(path)
    except OSError:
        TaskGroups((tuple(made),)).remove()
        raise
    return tuple(made)
