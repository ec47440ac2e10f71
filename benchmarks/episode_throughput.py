"""Episodes per second of the runner with the oracle agent: local envs (1 and 2 stepping
threads) next to the Ray backend (envs in Ray actors, one per CPU), on this machine.

Families: math (``frostgym/Math-v0``, dev split, 2 samples per task) and code (``frostgym/Code-v0``, test split,
every step runs HumanEval's tests in the sandbox). Each configuration plays the same plan
in memory (``frostgym.run.runner.evaluate``, no card), once untimed to warm up, then
``--repeats`` timed rounds; the best round is kept. Ray's start-up (a local Ray with
``--num-cpus`` CPUs and its actors) is timed separately and left out of the rates. The
Ray runs are also checked to give the local runs' outcomes (same plan ids, actions, grades).

Run from the repository root: ``python benchmarks/episode_throughput.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, write_json

from frostgym.agents import OracleAgent
from frostgym.core.splits import Split
from frostgym.run.ray_backend import RayEnvs
from frostgym.run.runner import EnvBackend, MemorySink, RunOptions, evaluate

# family -> (env id, split, samples per task)
FAMILIES: dict[str, tuple[str, Split, int]] = {
    "math": ("frostgym/Math-v0", "dev", 2),
    "code": ("frostgym/Code-v0", "test", 1),
}


@dataclass
class Row:
    family: str
    backend: str
    episodes: int
    seconds: float
    episodes_per_second: float
    vs_local_1: float


def _play(
    env_id: str, split: Split, samples: int, episodes: int, workers: int, envs: EnvBackend | None
) -> tuple[float, MemorySink]:
    options = RunOptions(split=split, workers=workers, batch_size=64)
    began = time.perf_counter()
    sink = evaluate([env_id], OracleAgent(), episodes=episodes, samples=samples, options=options, envs=envs)
    return time.perf_counter() - began, sink


def _key(sink: MemorySink) -> list[tuple[str, str, Any]]:
    return [(o.plan_id, type(o).__name__, getattr(o, "grade", None)) for o in sink.outcomes]


def _best(run: Callable[[], tuple[float, MemorySink]], repeats: int) -> tuple[float, MemorySink]:
    run()  # warm-up: imports, fixtures, sandboxes, actors' caches
    results = [run() for _ in range(repeats)]
    return min(results, key=lambda r: r[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--math-episodes", type=int, default=200, help="Math tasks (2 samples each).")
    parser.add_argument("--code-episodes", type=int, default=164)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray (one env actor each).")
    parser.add_argument("--quick", action="store_true", help="20 math tasks and 16 code tasks, 1 repeat.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.math_episodes, args.code_episodes, args.repeats = 20, 16, 1
    counts = {"math": args.math_episodes, "code": args.code_episodes}

    began = time.perf_counter()
    envs = RayEnvs.start(num_cpus=args.num_cpus, prefetch_oracle=True)
    ray_start = time.perf_counter() - began
    rows: list[Row] = []
    try:
        for family, (env_id, split, samples) in FAMILIES.items():
            n = counts[family]
            results: dict[str, tuple[float, MemorySink]] = {}
            configs: list[tuple[str, int, EnvBackend | None]] = [
                ("local, 1 worker", 1, None),
                ("local, 2 workers", 2, None),
                (f"ray, {len(envs.actors)} actors", 1, envs),
            ]
            for name, workers, backend in configs:
                results[name] = _best(partial(_play, env_id, split, samples, n, workers, backend), args.repeats)
                print(f"{family}: {name}: {results[name][0]:.2f} s", file=sys.stderr)
            keys = {name: _key(sink) for name, (_, sink) in results.items()}
            if len({repr(k) for k in keys.values()}) != 1:
                raise SystemExit(f"{family}: the backends disagree on outcomes")
            base = next(iter(results.values()))[0]
            for name, (seconds, sink) in results.items():
                done = len(sink.outcomes)
                rows.append(Row(family, name, done, seconds, done / seconds, base / seconds))
    finally:
        envs.close()

    print(f"Ray start-up (local Ray, {args.num_cpus} CPUs, actors placed): {ray_start:.1f} s")
    print(
        format_table(
            ["family", "backend", "episodes", "seconds", "episodes/s", "vs local 1 worker"],
            [
                [
                    r.family,
                    r.backend,
                    str(r.episodes),
                    f"{r.seconds:.2f}",
                    f"{r.episodes_per_second:.1f}",
                    f"{r.vs_local_1:.2f}x",
                ]
                for r in rows
            ],
            [False, False, True, True, True, True],
        )
    )
    if args.json is not None:
        write_json(
            args.json,
            {"machine": machine_info(["frostgym", "ray"]), "ray_start_s": ray_start, "rows": [asdict(r) for r in rows]},
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
