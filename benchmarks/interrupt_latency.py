"""Ctrl-C latency of ``frostgym eval`` with requests in flight to a model server that hangs.

A loopback OpenAI-compatible server answers a third of the prompts at once and holds the
rest until the benchmark ends, so a run with ``--concurrency 16`` soon has 16 requests
hanging. Once the card stops growing, SIGINT is sent; timed is the wall time from the signal
to the process's exit, with what the card holds then (status, episodes kept). The request
deadline is the default 120 s, so waiting for the requests would take minutes.

    python benchmarks/interrupt_latency.py                    # this checkout, 5 runs
    python benchmarks/interrupt_latency.py --checkout DIR --old   # an earlier commit (no --concurrency flag)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import bench_common

STOP = threading.Event()


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """A third of the prompts at once; the rest are held until the benchmark ends."""
    if zlib.crc32(body["messages"][-1]["content"].encode()) % 3:
        STOP.wait(600)
    return {"choices": [{"message": {"role": "assistant", "content": "<answer>1</answer>"}, "finish_reason": "stop"}]}


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def one(checkout: Path, url: str, old: bool) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp()) / "card"
    command = [sys.executable, "-c", "from frostgym.cli import main; main()", "eval"]
    command += [
        "--env",
        "frostgym/Arithmetic-v0",
        "--episodes",
        "64",
        "--agent",
        f"openai:{url}#hang",
        "--out",
        str(out),
    ]
    command += ["--model-batch-size", "16"] if old else ["--concurrency", "16", "--fixed-concurrency"]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    run = subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen, still = -1, time.monotonic()
    while time.monotonic() - still < 3:  # the card has stopped growing: every slot hangs
        now = _lines(out / "episodes.jsonl")
        if now != seen:
            seen, still = now, time.monotonic()
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        run.wait(timeout=300)
    except subprocess.TimeoutExpired:
        run.kill()
    took = time.monotonic() - sent
    card = json.loads((out / "card.json").read_text()) if (out / "card.json").exists() else {}
    return {
        "seconds": round(took, 2),
        "exit": run.returncode,
        "status": card.get("status"),
        "episodes_kept": _lines(out / "episodes.jsonl"),
        "on_disk_before": seen,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--old", action="store_true", help="the checkout predates --concurrency")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    httpd = bench_common.serve_chat(_answer)
    url = bench_common.chat_url(httpd)
    print(f"load {os.getloadavg()[0]:.2f}; checkout {args.checkout}")
    results = [one(args.checkout, url, args.old) for _ in range(args.runs)]
    for result in results:
        print(result)
    print(f"median seconds from SIGINT to exit: {statistics.median(r['seconds'] for r in results):.2f}")
    STOP.set()


if __name__ == "__main__":
    main()
