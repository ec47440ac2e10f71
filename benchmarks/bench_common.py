"""Helpers every benchmark script shares: the machine description and table layout.

Importing it also puts this checkout's root first on the import path (``REPO_ROOT``). Why:
the virtual environment's editable install points at one checkout, so a script run from a
``git worktree`` of another commit (the way two commits are compared here, alternating
runs of the same script in each tree) would otherwise measure the installed checkout's
``frostgym`` in both trees, not its own. Every script imports this module before
``frostgym``, and ``machine_info`` records which checkout and commit a result measured.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: The checkout these scripts belong to: its ``frostgym`` is the one they measure.
REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(distributions: Sequence[str]) -> dict[str, Any]:
    """CPU, interpreter, SQLite library and the versions of ``distributions``."""
    versions = {}
    for dist in distributions:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "?"
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "versions": versions,
        "frostgym": {"checkout": str(REPO_ROOT), "commit": _commit()},
    }


def _commit() -> str | None:
    """The checkout's commit, with ``+changes`` when its tracked files differ from it (None
    outside a git checkout)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=REPO_ROOT, capture_output=True, check=False)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("+changes" if dirty.returncode else "")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        cols = (c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True))
        return "  ".join(cols).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def ratio_phrase(ratio: float) -> str:
    return f"{ratio:.1f}x slower than" if ratio >= 1 else f"{1 / ratio:.1f}x faster than"


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


def serve_chat(answer: Callable[[dict[str, Any]], dict[str, Any]]) -> ThreadingHTTPServer:
    """A loopback OpenAI-compatible chat-completions server, serving on a thread of its own:
    each POST's JSON body is handed to ``answer`` (on the request's own thread), whose
    result is the JSON reply. Its address: ``http://127.0.0.1:{server_address[1]}/v1``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(answer(body)).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up and closed the connection
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.request_queue_size = 1024
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def chat_url(httpd: ThreadingHTTPServer) -> str:
    """The API root of a ``serve_chat`` server, for ``--agent openai:URL#MODEL``."""
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"
