"""Peak memory and time per episode of ``frostgym eval`` as the plan grows: 10k, 100k, 1M episodes.

A run's memory must not grow with its plan or with the episodes it finished: before, the
``frostgym eval`` process tree's peak RSS grew about 10 KB an episode (243 MB at 10,000
oracle episodes of ``frostgym/Math-v0``, 1,167 MB at 100,000), so a 1,000,000-episode run
needed ~10 GB. The target: under 1 GB at 1,000,000 episodes, at a time per episode within
10% of a 10,000-episode run's.

Each run is a real process of the command as a user runs it, ``python -m frostgym.cli eval
--env frostgym/Math-v0 --agent oracle --split train --episodes N --out DIR`` (the train
split is unbounded: N distinct tasks, one sample each), its card written to a temporary
directory and deleted after. Reported per run: the peak RSS of the process tree (the
command and its children, the card's read-back process among them: psutil, every 0.05 s,
the sum of their RSS), the wall time from start to exit over N (seconds per episode: so the
10,000-episode run carries its start-up, ~3 s, spread over fewer episodes), and the
1-minute load average before it (other work on the machine slows a run).

``--baseline REV`` runs the same sizes (``--baseline-sizes``) with the code of an earlier
commit, from a ``git worktree`` at ``/tmp/wt_mem`` (removed, and ``git worktree prune``
run, after), alternating with this checkout's runs. A run whose tree passes ``--max-rss-mb``
is stopped and reported as such, with how far it got (the old code at 1,000,000 episodes).

Run from the repository root: ``python benchmarks/run_memory.py [--sizes 10000,100000,1000000]
[--baseline REV] [--baseline-sizes 10000,100000] [--runs 1] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from bench_common import REPO_ROOT, format_table, machine_info, write_json

ENV_ID = "frostgym/Math-v0"
WORKTREE = Path("/tmp/wt_mem")
POLL_SECONDS = 0.05


def tree_rss(process: psutil.Process) -> int:
    """The RSS of ``process`` and all its descendants, in bytes (0 once it is gone)."""
    total = 0
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    for member in members:
        with contextlib.suppress(psutil.Error):  # it ended meanwhile
            total += member.memory_info().rss
    return total


def episodes_written(card: Path) -> int:
    """How many lines the card's episodes file holds (how far a stopped run got)."""
    try:
        with (card / "episodes.jsonl").open("rb") as handle:
            return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 24), b""))
    except OSError:
        return 0


def run_eval(checkout: Path, episodes: int, root: Path, max_rss: int) -> dict[str, Any]:
    """One ``frostgym eval`` of ``episodes`` oracle episodes with ``checkout``'s code: its
    figures, and the load before it."""
    out = root / f"card-{episodes}"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "frostgym.cli", "eval", "--env", ENV_ID, "--agent", "oracle"]
    command += ["--split", "train", "--episodes", str(episodes), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(checkout), "COLUMNS": "160"}
    load = os.getloadavg()[0]
    began = time.perf_counter()
    child = subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watched = psutil.Process(child.pid)
    peak = 0
    stopped = False
    while child.poll() is None:
        peak = max(peak, tree_rss(watched))
        if peak > max_rss:
            for member in [*watched.children(recursive=True), watched]:
                with contextlib.suppress(psutil.Error):
                    member.kill()
            stopped = True
            break
        time.sleep(POLL_SECONDS)
    _, stderr = child.communicate()
    seconds = time.perf_counter() - began
    result: dict[str, Any] = {
        "checkout": str(checkout),
        "episodes": episodes,
        "load": load,
        "seconds": seconds,
        "peak_tree_rss_mib": peak / 2**20,
    }
    if stopped:
        result["stopped_at_mib"] = max_rss / 2**20
        result["episodes_written"] = episodes_written(out)
    elif child.returncode:
        raise RuntimeError(f"frostgym eval failed ({child.returncode}): {stderr.decode()[-2000:]}")
    else:
        result["s_per_episode"] = seconds / episodes
    shutil.rmtree(out, ignore_errors=True)
    return result


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _cell(results: list[dict[str, Any]], key: str, fmt: str) -> str:
    done = [r[key] for r in results if key in r]
    if not results:
        return "-"
    if not done:
        stopped = results[0]
        return f"stopped >{stopped['stopped_at_mib']:.0f} MiB at {stopped['episodes_written']:,} ep."
    return format(statistics.median(done), fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="Plan sizes for this checkout.")
    parser.add_argument("--baseline", metavar="REV", help="Also run an earlier commit's code (a git worktree).")
    parser.add_argument("--baseline-sizes", default="10000,100000", help="Plan sizes for the baseline.")
    parser.add_argument("--runs", type=int, default=1, help="Runs of each size and side (medians reported).")
    parser.add_argument("--max-rss-mb", type=float, default=16000, help="Stop a run whose tree passes this.")
    parser.add_argument("--json", type=Path, help="Also write the results as JSON here.")
    args = parser.parse_args()
    sizes, baseline_sizes = _sizes(args.sizes), _sizes(args.baseline_sizes) if args.baseline else []
    max_rss = int(args.max_rss_mb * 2**20)
    sides = {"new": REPO_ROOT}
    if args.baseline:
        shutil.rmtree(WORKTREE, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=REPO_ROOT, check=True)
        subprocess.run(
            ["git", "worktree", "add", "-f", "--detach", str(WORKTREE), args.baseline],
            cwd=REPO_ROOT,
            check=True,
            capture_output=True,
        )
        sides = {"old": WORKTREE, "new": REPO_ROOT}
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}", flush=True)
    results: dict[str, dict[int, list[dict[str, Any]]]] = {side: {} for side in sides}
    try:
        with tempfile.TemporaryDirectory(prefix="run-memory-") as tmp:
            for size in sorted(set(sizes) | set(baseline_sizes)):
                for _ in range(args.runs):
                    for side, checkout in sides.items():
                        if size not in (baseline_sizes if side == "old" else sizes):
                            continue
                        result = run_eval(checkout, size, Path(tmp), max_rss)
                        results[side].setdefault(size, []).append(result)
                        print(f"{side} {size:>9,}: {result}", flush=True)
    finally:
        if args.baseline:
            subprocess.run(["git", "worktree", "remove", "--force", str(WORKTREE)], cwd=REPO_ROOT, check=False)
            subprocess.run(["git", "worktree", "prune"], cwd=REPO_ROOT, check=False)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    rows = []
    for size in sorted(set(sizes) | set(baseline_sizes)):
        old, new = results.get("old", {}).get(size, []), results["new"].get(size, [])
        rows.append(
            [
                f"{size:,}",
                _cell(old, "peak_tree_rss_mib", ".0f"),
                _cell(new, "peak_tree_rss_mib", ".0f"),
                _cell(old, "s_per_episode", ".6f"),
                _cell(new, "s_per_episode", ".6f"),
            ]
        )
    headers = ["episodes", "peak RSS old (MiB)", "peak RSS new (MiB)", "s/episode old", "s/episode new"]
    print()
    print(format_table(headers, rows, [True] * len(headers)))
    if args.json is not None:
        payload = {
            "machine": machine_info(["orjson", "msgspec", "psutil"]),
            "baseline": args.baseline,
            "results": {side: {str(k): v for k, v in by.items()} for side, by in results.items()},
        }
        write_json(args.json, payload)


if __name__ == "__main__":
    main()
