"""Wasted generations on a one-at-a-time model server: ``frostgym eval`` today against an
earlier commit, side by side.

A loopback OpenAI-compatible server with one generation slot (requests wait their turn in
arrival order, as on ``transformers serve``) takes ``--reply-s`` per reply and, like that
server, generates every request it accepted, even one whose client has given up. A
generation is wasted when its reply did not become an episode's step: counted here as the
server's generations minus the episodes completed (Arithmetic-v0 is single-turn, so each
completed episode used exactly one reply). Each side runs the real CLI
(``frostgym eval --agent openai:...``) at its default flags, plus ``--request-timeout``.

    python benchmarks/one_slot_server.py --old-checkout /tmp/wt_old            # both scenarios
    python benchmarks/one_slot_server.py --old-checkout /tmp/wt_old --json benchmarks/results/one_slot_server.json

Scenarios: 12 episodes with 1 s replies at the default deadline (120 s), and the same with
``--request-timeout 5``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bench_common


class OneSlotServer:
    """One reply at a time, ``reply_s`` each, in arrival order; counts its generations."""

    def __init__(self, reply_s: float) -> None:
        self.reply_s = reply_s
        self.slot = threading.Semaphore(1)  # its waiters wake in arrival order
        self.generated = 0
        self.max_waiting = 0
        self._waiting = 0
        self._lock = threading.Lock()
        self.httpd = bench_common.serve_chat(self.generate)
        self.base_url = bench_common.chat_url(self.httpd)

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._waiting += 1
            self.max_waiting = max(self.max_waiting, self._waiting)
        with self.slot:
            with self._lock:
                self._waiting -= 1
            time.sleep(self.reply_s)
            with self._lock:
                self.generated += 1
        message = {"role": "assistant", "content": "<answer>7</answer>"}
        usage = {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def one(checkout: Path, episodes: int, reply_s: float, timeout_s: float | None) -> dict[str, Any]:
    server = OneSlotServer(reply_s)
    out = Path(tempfile.mkdtemp()) / "card"
    command = [sys.executable, "-c", "from frostgym.cli import main; main()", "eval"]
    command += ["--env", "frostgym/Arithmetic-v0", "--episodes", str(episodes), "--out", str(out)]
    command += ["--agent", f"openai:{server.base_url}#one-slot"]
    if timeout_s is not None:
        command += ["--request-timeout", str(timeout_s)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    began = time.perf_counter()
    try:
        subprocess.run(command, cwd=checkout, env=env, capture_output=True, timeout=1800, check=False)
        wall = time.perf_counter() - began
        time.sleep(reply_s * server.max_waiting + 0.5)  # let the server finish what it still holds
    finally:
        server.close()
    completed = len((out / "episodes.jsonl").read_bytes().splitlines()) if (out / "episodes.jsonl").exists() else 0
    dropped = len((out / "drops.jsonl").read_bytes().splitlines()) if (out / "drops.jsonl").exists() else 0
    card = json.loads((out / "card.json").read_text()) if (out / "card.json").exists() else {}
    limit = card.get("agent", {}).get("concurrency_limit", {})
    return {
        "completed": completed,
        "dropped": dropped,
        "generated": server.generated,
        "wasted": server.generated - completed,
        "most_waiting_at_server": server.max_waiting,
        "wall_s": round(wall, 1),
        "limit_reached": limit.get("reached"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--old-checkout", type=Path, help="an earlier commit's worktree, run side by side")
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--reply-s", type=float, default=1.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}; one slot, {args.reply_s} s per reply, {args.episodes} episodes")
    sides = [("new", args.checkout)] + ([("old", args.old_checkout)] if args.old_checkout else [])
    rows = []
    for timeout_s in (None, 5.0):
        for name, checkout in sides:
            result = {
                "side": name,
                "request_timeout_s": timeout_s,
                **one(checkout, args.episodes, args.reply_s, timeout_s),
            }
            print(result, flush=True)
            rows.append(result)
    if args.json:
        bench_common.write_json(args.json, {"load_at_start": os.getloadavg(), "reply_s": args.reply_s, "rows": rows})


if __name__ == "__main__":
    main()
