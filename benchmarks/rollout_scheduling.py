"""Per-episode scheduling against lockstep turns, on a model server with stragglers.

A loopback OpenAI-compatible server (written here: a real HTTP server on 127.0.0.1, not a
mock of frostgym) with ``--slots`` parallel generation slots and a heavy-tailed latency per
reply (lognormal, p99 = 20x the median, seeded by the request's own seed so both sides draw
the same latencies). ``frostgym``'s OpenAI agent plays the same plan against it twice, on
the path ``frostgym eval --agent openai:...`` runs: with the agent fed one request per
episode as that episode needs it (its declared ``scheduling``, the default) and fed in
lockstep turns (every live episode's request in one call, the next turn after the slowest
reply; the runner's only way before). The per-episode side runs twice: with the agent's
default adaptive limit on requests in flight (it starts at one and grows to the server's
slots) and with ``--fixed-concurrency`` (all of them from the start). Printed: episodes/s
of each, their ratio, and how busy the server's slots were (the time they spent generating
over slots x wall time). A reply's completion tokens are in proportion to its time, as on
a real server, where the long replies are the slow ones.

The single-turn id is ``frostgym/Arithmetic-v0``; the multi-turn one ``frostgym/SQL-v0``,
where the server explores with two ``run_sql`` calls before it answers (three turns).

    python benchmarks/rollout_scheduling.py                 # 8, 64 and 256 in flight
    python benchmarks/rollout_scheduling.py --concurrency 64 --json benchmarks/results/rollout_scheduling.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

import bench_common  # (also puts this checkout first on sys.path)
import numpy as np

from frostgym.agents.openai_compat import OpenAIAgent
from frostgym.agents.sampling import SamplingParams
from frostgym.run.plan import make_plan
from frostgym.run.runner import MemorySink, RunOptions, run_plan

#: p99 / median of the latency: exp(2.326 * sigma) = 20.
SIGMA = math.log(20) / 2.326
#: Completion tokens of a median reply: a reply's length is what makes it slow (each takes
#: ``median_s / TOKENS_AT_MEDIAN`` per token), as on a real server.
TOKENS_AT_MEDIAN = 8


class StragglerServer:
    """``slots`` replies generated at once (the rest queue, as on a real server), each
    taking a lognormal time with median ``median_s``, drawn from the request's seed."""

    def __init__(self, slots: int, median_s: float) -> None:
        self.slots = threading.Semaphore(slots)
        self.slot_count = slots
        self.median_s = median_s
        self.busy_s = 0.0
        self.served = 0
        self.intervals: list[tuple[float, float]] = []  # (arrival, generation end) of each request
        self._lock = threading.Lock()
        self.httpd = bench_common.serve_chat(self.generate)

    @property
    def base_url(self) -> str:
        return bench_common.chat_url(self.httpd)

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        rng = np.random.default_rng(int(body["seed"]))
        seconds = self.median_s * float(np.exp(SIGMA * rng.standard_normal()))
        arrived = time.perf_counter()
        with self.slots:
            began = time.perf_counter()
            time.sleep(seconds)
            ended = time.perf_counter()
            with self._lock:
                self.busy_s += ended - began
                self.served += 1
                self.intervals.append((began, ended))
                self.last_arrival = max(getattr(self, "last_arrival", arrived), arrived)
        return _reply(body, max(1, round(TOKENS_AT_MEDIAN * seconds / self.median_s)))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _reply(body: dict[str, Any], tokens: int) -> dict[str, Any]:
    """Arithmetic: an answer. SQL: two ``run_sql`` explorations, then an answer. ``tokens``
    is the completion's length the usage reports."""
    messages = body["messages"]
    explored = sum(1 for m in messages if m["role"] == "assistant")
    if body.get("tools") and explored < 2:
        call: dict[str, Any] = {"id": f"c{explored}", "type": "function"}
        call["function"] = {"name": "run_sql", "arguments": json.dumps({"query": "SELECT 1"})}
        message: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {
            "role": "assistant",
            "content": "<answer>SELECT 1</answer>" if body.get("tools") else "<answer>7</answer>",
        }
        finish = "stop"
    usage = {"prompt_tokens": 50, "completion_tokens": tokens, "total_tokens": 50 + tokens}
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def one_run(
    env_id: str, episodes: int, concurrency: int, scheduling: str, median_s: float, adaptive: bool = True
) -> dict[str, Any]:
    server = StragglerServer(concurrency, median_s)
    began = time.perf_counter()
    try:
        agent = OpenAIAgent(
            server.base_url,
            "straggler",
            sampling=SamplingParams(max_new_tokens=16),
            concurrency=concurrency,
            adaptive_concurrency=adaptive and scheduling == "per_request",
        )
        agent.scheduling = scheduling  # type: ignore[assignment]  # the lockstep side feeds it in turns
        split = "dev" if env_id.endswith("SQL-v0") else "train"
        samples = max(1, math.ceil(episodes / 50)) if split == "dev" else 1  # 50 SQL tasks, sampled again
        plan = make_plan(
            [env_id], split=split, episodes=min(episodes, 50) if split == "dev" else episodes, samples=samples, seed=0
        )
        sink = MemorySink()
        began = time.perf_counter()
        run_plan(plan, agent, sink, RunOptions(split=split, batch_size=concurrency))
        wall = time.perf_counter() - began
        agent.close()
    finally:
        server.close()
    done = len(sink.episodes)
    return {
        "env_id": env_id,
        "scheduling": scheduling,
        "adaptive": adaptive and scheduling == "per_request",
        "concurrency": concurrency,
        "limit_reached": agent.describe()["concurrency_limit"]["reached"],
        "episodes": len(plan),
        "completed": done,
        "dropped": len(sink.drops),
        "wall_s": round(wall, 3),
        "episodes_per_s": round(len(plan) / wall, 2),
        "requests": server.served,
        "slots_busy": round(server.busy_s / (server.slot_count * wall), 3),
        # while there was work to send: up to the last request's arrival, before the drain of the last replies
        "slots_busy_until_drain": round(_busy_until(server, began), 3),
    }


def _busy_until(server: StragglerServer, began: float) -> float:
    """The slots' busy share of the time from the run's start to the last request's arrival."""
    end = server.last_arrival
    busy = sum(max(0.0, min(stop, end) - max(start, began)) for start, stop in server.intervals)
    return busy / (server.slot_count * max(end - began, 1e-9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, action="append", help="in flight (repeatable; default 8, 64, 256)")
    parser.add_argument("--median", type=float, default=0.1, help="median reply latency, seconds")
    parser.add_argument("--turns-of-work", type=int, default=6, help="episodes per slot on each side")
    parser.add_argument("--env", action="append", help="env ids (default Arithmetic-v0 and SQL-v0)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    print(f"load {os.getloadavg()[0]:.2f}; lognormal latency, median {args.median}s, p99 {20 * args.median:.1f}s")
    header = ("env", "in flight", "episodes", "lockstep eps/s", "per-episode eps/s", "ratio", "busy", "busy to drain")
    print("{:24} {:>9} {:>8} {:>15} {:>18} {:>6} {:>12} {:>14}".format(*header), " fixed: eps/s ratio busy")
    for env_id in args.env or ["frostgym/Arithmetic-v0", "frostgym/SQL-v0"]:
        for concurrency in args.concurrency or [8, 64, 256]:
            episodes = concurrency * args.turns_of_work
            lock = one_run(env_id, episodes, concurrency, "batched", args.median)
            per = one_run(env_id, episodes, concurrency, "per_request", args.median)
            fixed = one_run(env_id, episodes, concurrency, "per_request", args.median, adaptive=False)
            ratio = per["episodes_per_s"] / lock["episodes_per_s"]
            fixed_ratio = fixed["episodes_per_s"] / lock["episodes_per_s"]
            busy = f"{lock['slots_busy']:.0%} -> {per['slots_busy']:.0%}"
            steady = f"{lock['slots_busy_until_drain']:.0%} -> {per['slots_busy_until_drain']:.0%}"
            cells = (env_id, concurrency, per["episodes"], lock["episodes_per_s"], per["episodes_per_s"], ratio)
            tail = f"{fixed['episodes_per_s']:12.1f} {fixed_ratio:5.2f}x {fixed['slots_busy']:.0%}"
            print("{:24} {:9} {:8} {:15.1f} {:18.1f} {:5.2f}x".format(*cells), f"{busy:>12} {steady:>14}", tail)
            rows.append({"lockstep": lock, "per_episode": per, "per_episode_fixed": fixed, "ratio": round(ratio, 2)})
    if args.json:
        result = {"load_at_start": os.getloadavg(), "median_s": args.median, "rows": rows}
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
