"""``frostgym serve``: serve frostgym envs over OpenEnv's HTTP/WebSocket protocol.

Why its own module: the command only reads its options into a ``ServeConfig`` and runs the
server (``frostgym.serve``); fastapi and uvicorn are imported only when it runs, so every other
command starts without them and a missing ``serve`` extra is one line, exit code 2.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from frostgym.commands.options import finite_float

EXIT_ERROR = 2


def serve_cmd(
    env: Annotated[
        list[str] | None,
        typer.Option(help="An env id to serve (repeat, or separate with commas); default: every frostgym id."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on; loopback unless you mean otherwise.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    max_sessions: Annotated[int, typer.Option(min=1, help="Sessions (each one env) open at once; past it, 429.")] = 256,
    token: Annotated[
        str | None,
        typer.Option(
            help="Shared token every request must carry (Authorization: Bearer TOKEN); "
            "default: the FROSTGYM_SERVE_TOKEN environment variable, else none."
        ),
    ] = None,
    allow_oracle: Annotated[
        bool,
        typer.Option(
            help="Trust clients with gold: serve oracle actions and grade details (frostgym eval --backend remote "
            "needs it)."
        ),
    ] = False,
    allow_wider_limits: Annotated[
        bool,
        typer.Option(
            help="Let clients set an env's resource limits (Code-v0's cpu_seconds, memory_mb) above their "
            "defaults; without it such env_kwargs are refused (403)."
        ),
    ] = False,
    idle_timeout: Annotated[
        float, typer.Option(parser=finite_float(min=0.001), metavar="SECONDS", help="Close a session unused this long.")
    ] = 600.0,
    step_timeout: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=0.001),
            metavar="SECONDS",
            help="Longest one reset or step may run; past it, 408, the session closes and its work is stopped.",
        ),
    ] = 120.0,
    max_body_bytes: Annotated[
        int, typer.Option(min=1024, help="Largest request body or WebSocket message; past it, 413.")
    ] = 4 * 1024 * 1024,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level: critical | error | warning | info | debug.")] = (
        "info"
    ),
) -> None:
    """Serve envs over OpenEnv's protocol (POST /reset, POST /step, GET /state, /schema, /health,
    and WebSocket sessions at /ws) until Ctrl-C or SIGTERM, which finishes running steps first.
    Same seed and actions, same observations, rewards and grades as in process."""
    console = Console(stderr=True, soft_wrap=True)
    try:
        from frostgym.core.errors import ServeConfigError
        from frostgym.serve.config import ServeConfig, parse_env_ids, token_from
        from frostgym.serve.server import serve
    except ImportError as error:
        console.print(
            f"[red]error:[/red] frostgym serve needs the serve extra: pip install 'frostgym[serve]' ({error})"
        )
        raise typer.Exit(EXIT_ERROR) from None
    try:
        config = ServeConfig(
            env_ids=parse_env_ids(env or []),
            host=host,
            port=port,
            max_sessions=max_sessions,
            token=token_from(token),
            allow_oracle=allow_oracle,
            allow_wider_limits=allow_wider_limits,
            idle_timeout_s=idle_timeout,
            step_timeout_s=step_timeout,
            max_body_bytes=max_body_bytes,
        )
    except ServeConfigError as error:
        console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None
    if not _loopback(host) and config.token is None:
        console.print(
            f"[yellow]warning: listening on {escape(host)} with no token: anyone who can reach this port can use "
            "the envs (set --token or FROSTGYM_SERVE_TOKEN)[/yellow]"
        )
    console.print(
        f"serving {len(config.served)} env id(s) on http://{escape(host)}:{port} "
        f"(token: {'required' if config.token else 'none'}; oracle and gold: "
        f"{'served' if allow_oracle else 'withheld'}; at most {max_sessions} sessions)",
        highlight=False,
    )
    try:
        serve(config, log_level=log_level)
    except OSError as error:
        console.print(f"[red]error:[/red] cannot listen on {escape(host)}:{port}: {escape(str(error))}")
        raise typer.Exit(EXIT_ERROR) from None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
