"""A real ``transformers serve`` on loopback, for the OpenAI agent's tests and benchmarks:
the model server that generates one request at a time and keeps generating a request whose
client has given up."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


class ServerDidNotStart(RuntimeError):
    """``transformers serve`` exited or did not answer ``/health`` in time (its reason attached)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def transformers_serve(model_dir: Path, start_timeout_s: float = 300) -> Iterator[str]:
    """``transformers serve MODEL_DIR`` on 127.0.0.1 (one thread of BLAS, as a loaded CPU
    box runs it); yields its API root (``http://127.0.0.1:PORT/v1``). Raises
    ``ServerDidNotStart`` when it cannot start."""
    port = _free_port()
    command = [str(Path(sys.executable).with_name("transformers")), "serve", str(model_dir)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if server.poll() is not None:
                why = server.stderr.read().decode(errors="replace")[-2000:] if server.stderr else ""
                raise ServerDidNotStart(f"transformers serve exited with {server.returncode}: {why}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError as error:
                if time.monotonic() > deadline:
                    raise ServerDidNotStart(f"transformers serve did not answer /health: {error}") from error
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for stop in (signal.SIGINT, signal.SIGINT):  # it needs a second SIGINT while it generates
            if server.poll() is None:
                server.send_signal(stop)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    server.wait(5)
        if server.poll() is None:
            server.kill()
            server.wait()
