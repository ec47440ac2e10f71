"""``frostgym record-cassettes``: re-record ToolsHTTP-v0's cassettes from the loopback fixture server, or check them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from frostgym.commands.common import console


def record_cassettes_cmd(
    check: Annotated[
        bool, typer.Option(help="Re-record into a temporary folder and compare with the committed cassettes.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write the cassettes here instead of the package's fixtures.")
    ] = None,
) -> None:
    """Re-record every ToolsHTTP-v0 cassette from the local fixture API server (loopback
    only), or, with --check, show that recording again gives identical files."""
    from frostgym.tools.http.record import check_cassettes, record_cassettes

    if check:
        problems = check_cassettes()
        for problem in problems:
            console.print(f"MISMATCH {problem}")
        if problems:
            raise typer.Exit(1)
        console.print("cassettes: re-recorded byte for byte identical to the committed ones")
        return
    for path in record_cassettes(out):
        console.print(f"wrote {path}")
