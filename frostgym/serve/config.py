"""The settings of one env server, checked once, in one place.

Why its own module: the command line (``frostgym serve``), the in-process server the tests
and benchmarks start (``frostgym.serve.server.ServerThread``) and the app itself read the same
settings; each limit is validated here so a bad value fails at start, never mid-request.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from frostgym.core.errors import EnvSpecError, ServeConfigError
from frostgym.envs.specs import parse_env_specs

#: The environment variable ``frostgym serve`` reads its shared token from when ``--token`` is not given.
TOKEN_ENV = "FROSTGYM_SERVE_TOKEN"
#: Env keyword arguments a client may not set: they are the server's to decide. ``sandbox`` and
#: ``allow_insecure`` choose how Code-v0 runs untrusted code; a client could otherwise ask for none.
#: ``customer``, ``customer_cache`` and ``cache_mode`` choose the model CustomerService-v0 calls and
#: the file it reads and writes; a client could otherwise have the server call any address or write
#: any path.
SERVER_ONLY_KWARGS = frozenset({"sandbox", "allow_insecure", "customer", "customer_cache", "cache_mode"})


@dataclass(frozen=True)
class ServeConfig:
    """How one server runs.

    ``env_ids``: the ids it serves (empty: every frostgym id; an id registered with gymnasium
    from outside frostgym may be named too, if its env is a ``FrozenEnv``); ``host``/``port``
    where it listens (loopback by default); ``max_sessions`` how many sessions (HTTP and
    WebSocket together) may hold an env at once; ``token`` the shared secret every request must
    carry (None: none needed); ``allow_oracle`` whether clients are trusted with gold (oracle
    actions, and grade ``details``, which quote gold answers); ``idle_timeout_s`` how long a
    session may sit unused before it is closed; ``step_timeout_s`` the longest one reset or step
    may run; ``max_body_bytes`` the largest request body or WebSocket message;
    ``allow_wider_limits`` whether clients may set an env's resource limits (its
    ``limit_kwargs``: Code-v0's ``cpu_seconds``, ``memory_mb``) above their defaults (by default
    they may only narrow them: the limits are the operator's).

    Raises ``ServeConfigError`` for a limit below its minimum, an unknown env id or an empty token.
    """

    env_ids: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    max_sessions: int = 256
    token: str | None = None
    allow_oracle: bool = False
    idle_timeout_s: float = 600.0
    step_timeout_s: float = 120.0
    max_body_bytes: int = 4 * 1024 * 1024
    allow_wider_limits: bool = False
    served: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        import gymnasium

        from frostgym.envs.registry import ENTRIES, register_envs

        register_envs()
        known = [e.id for e in ENTRIES]
        unknown = [env_id for env_id in self.env_ids if env_id not in gymnasium.registry]
        if unknown:
            raise ServeConfigError(f"not registered env ids: {', '.join(unknown)}; frostgym's: {', '.join(known)}")
        if len(set(self.env_ids)) != len(self.env_ids):
            raise ServeConfigError(f"an env id is given twice: {', '.join(self.env_ids)}")
        if self.max_sessions < 1:
            raise ServeConfigError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if not all(math.isfinite(t) and t > 0 for t in (self.idle_timeout_s, self.step_timeout_s)):
            raise ServeConfigError(
                f"idle and step timeouts must be finite and > 0 seconds, got {self.idle_timeout_s!r} and "
                f"{self.step_timeout_s!r}"
            )
        if self.max_body_bytes < 1024:
            raise ServeConfigError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if not 0 <= self.port <= 65535:
            raise ServeConfigError(f"port must be in 0..65535, got {self.port}")
        if self.token is not None and not self.token:
            raise ServeConfigError("the token is empty: give a non-empty one, or none")
        object.__setattr__(self, "served", tuple(self.env_ids) or tuple(known))


def token_from(option: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The shared token: ``option`` when given, else the ``FROSTGYM_SERVE_TOKEN`` environment
    variable, else None (an empty variable counts as unset)."""
    if option is not None:
        return option
    value = (os.environ if environ is None else environ).get(TOKEN_ENV, "")
    return value or None


def parse_env_ids(values: Sequence[str]) -> tuple[str, ...]:
    """The ids of ``--env`` options, each one id or several separated by commas, read as
    every command reads env specs (``frostgym.envs.specs.parse_env_specs``). Raises
    ``ServeConfigError`` for a spec that does not read, or one with arguments in brackets: a
    server serves ids, and every client sends the arguments its env is made with (a level
    pinned on the server would be missing from the client's card)."""
    ids: list[str] = []
    for value in values:
        if not value.strip(","):
            continue
        try:
            specs = parse_env_specs(value)
        except EnvSpecError as error:
            raise ServeConfigError(str(error)) from None
        for spec in specs:
            if spec.kwargs:
                raise ServeConfigError(
                    f"--env takes plain ids, got {str(spec)!r}: clients send env arguments (level, ...) with each reset"
                )
            ids.append(spec.env_id)
    return tuple(ids)
