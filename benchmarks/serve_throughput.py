"""What serving envs over the network costs: ``frostgym serve`` against the same envs in process.

1. **One client, one call at a time** (``frostgym/Arithmetic-v0``, the oracle's replies, worked out
   in process up front so only env calls are timed): ``reset`` + ``step`` per episode, in process,
   over a WebSocket session (``frostgym.serve.remote``), over plain HTTP (``httpx``, one keep-alive
   connection, a named session) and through openenv-core's ``GenericEnvClient`` (sync). Calls/s,
   p50/p99 latency per call, and the overhead per call over in process.
2. **Load** (the issue's test): 64 concurrent WebSocket sessions of ``frostgym/Math-v0`` and 8 of
   ``frostgym/Code-v0`` (each a client thread playing oracle episodes back to back) for
   ``--seconds``; then the same threads on in-process envs for as long. Calls/s, episodes/s,
   p50/p99 per call, errors; afterwards the server must hold no session and every sandbox
   process it started must be gone once it stops.

The server runs as ``frostgym serve`` in its own process (``--allow-oracle``, loopback), so it
does not share the client's GIL; on a 2-core machine client and server still share the cores.

Run from the repository root: ``python benchmarks/serve_throughput.py [--episodes N] [--seconds S] [--quick]
[--json PATH]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from bench_common import format_table, machine_info, write_json

import frostgym
from frostgym.envs.registry import make_env
from frostgym.serve.remote import make

ROOT = Path(__file__).resolve().parents[1]
ARITHMETIC = "frostgym/Arithmetic-v0"
LOAD = {"frostgym/Math-v0": 64, "frostgym/Code-v0": 8}


@dataclass
class Timings:
    calls: list[float] = field(default_factory=list)  # seconds per env call
    episodes: int = 0
    errors: list[str] = field(default_factory=list)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _oracle_plan(env_id: str, n: int, split: str | None = None) -> list[tuple[int, Any]]:
    """``(seed, oracle reply)`` for ``n`` one-step episodes, worked out in process."""
    env = make_env(env_id, split, {})
    plan = []
    for seed in range(n):
        env.reset(seed=seed)
        plan.append((seed, env.oracle_action()))
    env.close()
    return plan


def _timed(timings: Timings, call: Callable[[], Any]) -> Any:
    began = time.perf_counter()
    result = call()
    timings.calls.append(time.perf_counter() - began)
    return result


# -- 1: one client ------------------------------------------------------------------------------
def _in_process(plan: list[tuple[int, Any]]) -> Timings:
    return _play(make_env(ARITHMETIC, None, {}), plan)


def _websocket(url: str, plan: list[tuple[int, Any]]) -> Timings:
    return _play(make(url, ARITHMETIC), plan)


def _play(env: Any, plan: list[tuple[int, Any]]) -> Timings:
    """Each (seed, oracle action) of ``plan`` as one reset and one step of ``env``, timed."""
    timings = Timings()
    for seed, action in plan:
        _timed(timings, lambda s=seed: env.reset(seed=s))
        result = _timed(timings, lambda a=action: env.step(a))
        assert result[1] == 1.0
        timings.episodes += 1
    env.close()
    return timings


def _http(url: str, plan: list[tuple[int, Any]]) -> Timings:
    timings = Timings()
    with httpx.Client(base_url=url, timeout=60) as http:
        for seed, action in plan:
            body = {"seed": seed, "env_id": ARITHMETIC, "session_id": "bench"}
            _timed(timings, lambda b=body: http.post("/reset", json=b).raise_for_status())
            answer = _timed(timings, lambda a=action: http.post("/step", json={"action": a, "session_id": "bench"}))
            assert answer.json()["reward"] == 1.0
            timings.episodes += 1
        http.post("/close", json={"session_id": "bench"})
    return timings


def _openenv(url: str, plan: list[tuple[int, Any]]) -> Timings | None:
    try:
        from openenv.core.generic_client import GenericEnvClient
    except ImportError:
        return None
    timings = Timings()
    with GenericEnvClient(base_url=url).sync() as client:
        for seed, action in plan:
            _timed(timings, lambda s=seed: client.reset(seed=s, env_id=ARITHMETIC))
            result = _timed(timings, lambda a=action: client.step({"content": a}))
            assert result.reward == 1.0
            timings.episodes += 1
    return timings


# -- 2: load ------------------------------------------------------------------------------------
def _load(
    make_one: Callable[[str], Any],
    plans: dict[str, list[tuple[int, Any]]],
    seconds: float,
    midway: Callable[[], None] = lambda: None,
) -> dict[str, Timings]:
    """``LOAD``'s threads, each on its own env (``make_one(env_id)``), playing oracle episodes
    until ``seconds`` have passed (``midway()`` is called half way); per env id, the timings of
    every thread together."""
    per_env = {env_id: Timings() for env_id in LOAD}
    lock = threading.Lock()
    start = threading.Barrier(sum(LOAD.values()) + 1)
    stop = threading.Event()

    def worker(env_id: str, index: int) -> None:
        mine = Timings()
        plan = plans[env_id]
        try:
            env = make_one(env_id)
        except Exception as error:
            mine.errors.append(f"make: {type(error).__name__}: {error}")
            start.wait()
        else:
            start.wait()
            i = index
            try:
                while not stop.is_set():
                    seed, action = plan[i % len(plan)]
                    i += sum(LOAD.values())
                    try:
                        _timed(mine, lambda s=seed: env.reset(seed=s))
                        result = _timed(mine, lambda a=action: env.step(a))
                        if result[1] != 1.0:
                            mine.errors.append(f"{env_id} seed {seed}: reward {result[1]}")
                        mine.episodes += 1
                    except Exception as error:
                        mine.errors.append(f"{type(error).__name__}: {error}")
            finally:
                env.close()
        with lock:
            per_env[env_id].calls += mine.calls
            per_env[env_id].episodes += mine.episodes
            per_env[env_id].errors += mine.errors

    threads = [
        threading.Thread(target=worker, args=(env_id, i)) for env_id, count in LOAD.items() for i in range(count)
    ]
    for thread in threads:
        thread.start()
    start.wait()  # every env is made
    time.sleep(seconds / 2)
    midway()
    time.sleep(seconds / 2)
    stop.set()
    for thread in threads:
        thread.join()
    return per_env


# -- the server ---------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if Path(f"/proc/{pid}").exists()}


def _start_server(port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "frostgym.cli", "serve", "--allow-oracle", "--port", str(port)]
    command += ["--max-sessions", "128", "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"frostgym serve did not start: {process.stderr.read().decode() if process.stderr else ''}"
            )
        time.sleep(0.2)


# -- report -------------------------------------------------------------------------------------
def _row(name: str, timings: Timings, seconds: float, base: Timings | None) -> dict[str, Any]:
    mean = statistics.fmean(timings.calls) if timings.calls else float("nan")
    return {
        "method": name,
        "calls": len(timings.calls),
        "calls_per_s": len(timings.calls) / seconds if seconds else float("nan"),
        "episodes_per_s": timings.episodes / seconds if seconds else float("nan"),
        "p50_ms": 1e3 * _percentile(timings.calls, 0.50),
        "p99_ms": 1e3 * _percentile(timings.calls, 0.99),
        "mean_ms": 1e3 * mean,
        "overhead_ms": None if base is None else 1e3 * (mean - statistics.fmean(base.calls)),
        "errors": len(timings.errors),
        "first_error": timings.errors[0] if timings.errors else None,
    }


def _print(rows: list[dict[str, Any]]) -> None:
    headers = ["method", "calls", "calls/s", "episodes/s", "p50 ms", "p99 ms", "overhead ms/call", "errors"]
    cells = [
        [
            r["method"],
            str(r["calls"]),
            f"{r['calls_per_s']:.0f}",
            f"{r['episodes_per_s']:.1f}",
            f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}",
            "" if r["overhead_ms"] is None else f"{r['overhead_ms']:+.2f}",
            str(r["errors"]),
        ]
        for r in rows
    ]
    print(format_table(headers, cells, [False, True, True, True, True, True, True, True]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500, help="episodes per method in part 1")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each load run in part 2")
    parser.add_argument("--quick", action="store_true", help="100 episodes and 5 s load runs")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    episodes, seconds = (100, 5.0) if args.quick else (args.episodes, args.seconds)
    print(f"frostgym {frostgym.__version__}; load average before: {os.getloadavg()}")

    plan = _oracle_plan(ARITHMETIC, episodes)
    load_plans = {
        "frostgym/Math-v0": _oracle_plan("frostgym/Math-v0", 256),
        "frostgym/Code-v0": _oracle_plan("frostgym/Code-v0", 164),
    }
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start_server(port)
    try:
        for warm in (_websocket, _http):  # the server's first calls import and verify fixtures
            warm(url, plan[:20])
        sequential: list[dict[str, Any]] = []
        base = None
        for name, run in [
            ("in process", lambda: _in_process(plan)),
            ("websocket (frostgym.serve.remote)", lambda: _websocket(url, plan)),
            ("http (httpx, keep-alive)", lambda: _http(url, plan)),
            ("openenv GenericEnvClient (ws)", lambda: _openenv(url, plan)),
        ]:
            timings = run()
            if timings is None:
                continue
            sequential.append(_row(name, timings, sum(timings.calls), base))  # connecting is not timed
            base = base or timings
        print(f"\n1. one client, {episodes} episodes of {ARITHMETIC} (reset + step), oracle replies")
        _print(sequential)

        load: list[dict[str, Any]] = []
        sandboxes: set[int] = set()
        remote = _load(
            lambda env_id: make(url, env_id), load_plans, seconds, lambda: sandboxes.update(_descendants(server.pid))
        )
        health = httpx.get(f"{url}/health").json()
        in_process = _load(lambda env_id: make_env(env_id, None, {}), load_plans, seconds)
        for env_id in LOAD:
            load.append(_row(f"{env_id} x{LOAD[env_id]} remote", remote[env_id], seconds, in_process[env_id]))
            load.append(_row(f"{env_id} x{LOAD[env_id]} in process", in_process[env_id], seconds, None))
        print(f"\n2. load: {LOAD} concurrent sessions, {seconds:g} s each way")
        _print(load)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
    deadline = time.monotonic() + 15  # bwrap's children take a moment to follow their parent
    while _alive(sandboxes) and time.monotonic() < deadline:
        time.sleep(0.2)
    leaked = sorted(_alive(sandboxes))
    print(f"\nsessions open on the server after the load: {health['sessions']}")
    print(f"sandbox processes half way through the load: {len(sandboxes)}; alive 15 s after the server ended: {leaked}")
    print(f"load average after: {os.getloadavg()}")
    if args.json is not None:
        write_json(
            args.json,
            {
                "machine": machine_info(["fastapi", "uvicorn", "websockets", "openenv-core"]),
                "episodes": episodes,
                "seconds": seconds,
                "sequential": sequential,
                "load": load,
                "sessions_after": health["sessions"],
                "leaked_processes": leaked,
            },
        )


if __name__ == "__main__":
    main()
