"""What several commands share: the console they print to, and reading the options they
have in common (an env id made into its env, a JSON object, one env spec).

Why its own module: every command prints tables through one ``console`` (160 columns where
output is not a terminal: logs and CI, where rich would assume 80 and fold every table), and
help sent to a pipe or a file is wrapped at a readable width, never cut to "…".
"""

from __future__ import annotations

import os
import sys
from typing import Any

import gymnasium
import typer
from rich.console import Console
from typer import rich_utils

from frostgym.core.env import FrozenEnv
from frostgym.core.finite_json import loads_finite
from frostgym.envs.registry import EnvEntry
from frostgym.envs.specs import EnvSpec, parse_one_env_spec

console = Console()
if not console.is_terminal:  # logs and CI: rich would assume 80 columns and fold every table
    console = Console(width=160)
if not sys.stdout.isatty() and rich_utils.MAX_WIDTH is None:  # TERMINAL_WIDTH, when set, is the user's
    # Help (and usage errors) to a pipe or a file: at the 80 columns rich assumes there, a word
    # longer than an option's help column ends in "…". Never narrower than COLUMNS asks.
    _columns = os.environ.get("COLUMNS", "")
    rich_utils.MAX_WIDTH = max(160, int(_columns) if _columns.isdigit() else 0)


def every_env() -> list[tuple[EnvEntry, FrozenEnv]]:
    """One instance of every registered env: sources and families come from the envs
    themselves, so a new family needs no change here."""
    from frostgym.envs.registry import ENTRIES

    return [(e, make_frozen(e.id)) for e in ENTRIES]


def make_frozen(env_id: str, **kwargs: Any) -> FrozenEnv:
    """The env behind any gymnasium id (one registered outside frostgym too), unwrapped."""
    try:
        env = gymnasium.make(env_id, **kwargs).unwrapped
    except (TypeError, ValueError, gymnasium.error.Error) as error:
        raise typer.BadParameter(f"{env_id}: {error}") from error
    if not isinstance(env, FrozenEnv):
        raise typer.BadParameter(f"{env_id} is not a frostgym env")
    return env


def json_object(text: str, option: str) -> dict[str, Any]:
    """``option``'s JSON object; ``typer.BadParameter`` (exit 2) for text that is not JSON,
    a number that is not finite, or a value that is not an object."""
    try:
        value = loads_finite(text)
    except ValueError as error:
        raise typer.BadParameter(f"{option} is not JSON: {error}") from error
    if not isinstance(value, dict):
        raise typer.BadParameter(f"{option} must be a JSON object, got {text!r}")
    return value


def one_env_spec(text: str) -> EnvSpec:
    """The one env spec of ``text`` (``ID`` or ``ID[key=value,...]``), for commands that take one."""
    try:
        return parse_one_env_spec(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from error
