"""Peak memory of ``frostgym contamination`` on a file with one very long line, and on one of short lines.

Issue 34, defect 5: on a 200 MB single-line JSONL file the check took 92 s and 4.17 GB of
peak RSS, while the README says memory does not grow with the file. A line longer than a
window (1 MiB) is now read from the file a buffer at a time and scanned in windows
(``frostgym.contamination.windows``); this measures that the peak stays where a file of
short lines puts it.

Two files, written to a temporary directory and deleted after:

- ``short``: ``--size-mb`` MiB of short lines, the file ``benchmarks/contamination.py`` checks
  (``frostgym.contamination.synthetic``: 8-80 random words a line, drawn from the eval
  tasks' ASCII words, with 25 of Math-v0's test questions at seeded lines); 2.8 million
  lines at 1 GiB.
- ``long``: the same short lines around one line of ``--long-mb`` MiB in the middle, to
  ``--size-mb`` MiB in all. The long line is ``{"id": ..., "text": "..."}`` of the same
  random words, with JSON escapes (newlines, quotes) and a non-ASCII word now and then, and
  ``--long-leaks`` other Math-v0 test questions inside it, verbatim; the first one across
  the first window's end.

Each file is checked ``--runs`` times, alternately, by a real process of the command as a
user runs it, ``frostgym contamination --train FILE --workers W --json REPORT`` (every env's
test and private splits, 8,995 tasks), started from a small wrapper. Reported per file, as
medians over the runs: the wall time; the peak RSS of the largest process of the check (the
wrapper's ``RUSAGE_CHILDREN`` ``ru_maxrss``: the maximum over the main process and its
workers, exact); the main process's own peak (``VmHWM``, read every 0.1 s); the 1-minute
load average before each run (other work on the machine slows a run). And the leaks found:
of the long line's, and in all.

Run from the repository root: ``python benchmarks/contamination_memory.py [--size-mb 1024]
[--long-mb 200] [--runs 3] [--workers 2] [--checkout PATH] [--json PATH]``; small sizes
(``--size-mb 64 --long-mb 16 --runs 1``) for a quick check. ``--checkout`` measures another
checkout's ``frostgym`` (one made with ``git archive``, say: the code before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import REPO_ROOT, format_table, machine_info, write_json

from frostgym.contamination.evalset import EvalTask, all_env_specs, eval_tasks
from frostgym.contamination.ngrams import tokens
from frostgym.contamination.synthetic import write_training_file
from frostgym.contamination.windows import WINDOW
from frostgym.core.seeding import derive_generator

MATH = "frostgym/Math-v0"
#: Runs the command and reports its figures; ``RUSAGE_CHILDREN`` covers the command's
#: workers too, once it has waited for them (its pool does, before it exits).
_WRAPPER = """
import json, resource, subprocess, sys, time
began = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
main_hwm = 0
while child.poll() is None:
    try:
        for line in open(f"/proc/{child.pid}/status"):
            if line.startswith("VmHWM:"):
                main_hwm = max(main_hwm, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.1)
seconds = time.perf_counter() - began
if child.returncode:
    sys.exit(child.stderr.read().decode()[-2000:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_rss_mib": peak / 1024, "main_hwm_mib": main_hwm / 1024}))
"""


def short_file(path: Path, tasks: list[EvalTask], size_mb: float, seed: int) -> dict[str, int]:
    """Write the file of short lines (``benchmarks/contamination.py``'s); return each
    leaked task's line."""
    math_test = [t for t in tasks if t.env == MATH and t.split == "test"]
    chosen = sorted(derive_generator("benchmark-leaks", seed).choice(len(math_test), 25, replace=False).tolist())
    leaks = write_training_file(
        path,
        [(math_test[i].task_id, math_test[i].text) for i in chosen],
        _vocabulary(tasks),
        size_bytes=int(size_mb * 2**20),
        seed=seed,
    )
    return {leak.task_id: leak.line for leak in leaks}


def long_file(
    path: Path, short: Path, tasks: list[EvalTask], short_leaks: dict[str, int], long_mb: float, leaks: int, seed: int
) -> tuple[int, dict[str, int]]:
    """Write the file with one long line in the middle of ``short``'s lines, as large as
    ``short``; return the long line's number and each leaked task's line in this file
    (those inside the long line, and those of ``short_leaks`` among the lines kept)."""
    math_test = [t for t in tasks if t.env == MATH and t.split == "test" and t.task_id not in short_leaks]
    rng = random.Random(seed)
    inside = rng.sample(math_test, leaks)
    words = _vocabulary(tasks)
    total = short.stat().st_size
    long_bytes = int(long_mb * 2**20)
    head_bytes = max(0, (total - long_bytes) // 2)
    kept = 0  # short lines written before the long one
    with short.open("rb") as lines, path.open("wb") as out:
        written = 0
        for line in lines:  # the first half of the short lines
            if written + len(line) > head_bytes:
                break
            out.write(line)
            written += len(line)
            kept += 1
        written += _long_line(out, words, inside, long_bytes, rng)
        last = kept  # then the rest, to the same size (the line the first loop stopped at is dropped)
        for line in lines:
            if written >= total:
                break
            out.write(line)
            written += len(line)
            last += 1
    number = kept + 1
    where = {t: n for t, n in short_leaks.items() if n <= kept or kept + 1 < n <= last + 1}  # the same numbers
    return number, {**where, **{t.task_id: number for t in inside}}


def _long_line(out: Any, words: list[str], leaks: list[EvalTask], size: int, rng: random.Random) -> int:
    """Write one JSONL line of about ``size`` bytes, a block of text at a time; the first
    leak spans the first window's end (character ``WINDOW``), the others are spread."""
    chars = 0
    spread = rng.sample(range(2 * WINDOW, max(3 * WINDOW, size - 2 * WINDOW)), len(leaks) - 1)
    at = [WINDOW - len(leaks[0].text) // 2, *sorted(spread)]
    pending = list(zip(at, leaks, strict=True))
    written = out.write(b'{"id": "long", "text": "')
    while written < size:
        block = _words(words, rng, 1 << 16)
        if pending and chars + len(block) >= pending[0][0]:
            cut = pending[0][0] - chars
            block = f"{block[:cut]} {pending.pop(0)[1].text} {block[cut:]}"
        chars += len(block) + 1
        written += out.write(json.dumps(block + " ", ensure_ascii=False)[1:-1].encode())
    if pending:
        raise ValueError("--long-mb is too small for the leaks")
    return written + out.write(b'"}\n')


def _words(words: list[str], rng: random.Random, chars: int) -> str:
    out, length = [], 0
    while length < chars:
        word = rng.choice(words)
        roll = rng.random()
        if roll < 0.03:
            word += "\n"
        elif roll < 0.04:
            word = f'"{word}"'
        elif roll < 0.05:
            word += " caf\u00e9"
        out.append(word)
        length += len(word) + 1
    return " ".join(out)


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count:,} B"


def _vocabulary(tasks: list[EvalTask]) -> list[str]:
    return sorted({word for task in tasks for token in tokens(task.text) if (word := token.decode()).isascii()})


def run_check(path: Path, report: Path, workers: int, checkout: Path) -> dict[str, Any]:
    """One run of the command, in a fresh process tree; its figures and the load before it."""
    command = [sys.executable, "-m", "frostgym.cli", "contamination", "--train", str(path)]
    command += ["--workers", str(workers), "--json", str(report)]
    load = os.getloadavg()[0]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *command], capture_output=True, text=True, check=True, cwd=checkout, env=env
    )
    return {"load": load, **json.loads(done.stdout.strip().splitlines()[-1])}


def found(report: Path, leaks: dict[str, int]) -> int:
    """The leaks flagged at their own line."""
    tasks = {t["task_id"]: t for t in json.loads(report.read_text())["tasks"]}
    return sum(tasks[task]["contaminated"] and tasks[task]["train_line"] == line for task, line in leaks.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=1024.0, help="Size of each file (MiB).")
    parser.add_argument("--long-mb", type=float, default=200.0, help="Size of the long line (MiB).")
    parser.add_argument("--long-leaks", type=int, default=5, help="Math-v0 test questions inside the long line.")
    parser.add_argument("--runs", type=int, default=3, help="Checks of each file (medians reported).")
    parser.add_argument("--workers", type=int, default=2, help="Scanning processes (--workers).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkout", type=Path, default=REPO_ROOT, help="The checkout whose frostgym is measured.")
    parser.add_argument("--json", type=Path, help="Write the results here as JSON.")
    args = parser.parse_args()
    if not 3 * WINDOW / 2**20 < args.long_mb < args.size_mb:
        parser.error("--long-mb must be over 3 MiB and under --size-mb")

    tasks = eval_tasks(all_env_specs(), ("test", "private"))
    results: dict[str, list[dict[str, Any]]] = {"long": [], "short": []}
    with tempfile.TemporaryDirectory(prefix="contamination-memory-") as scratch:
        files = {"long": Path(scratch) / "long.jsonl", "short": Path(scratch) / "short.jsonl"}
        began = time.perf_counter()
        leaks = {"short": short_file(files["short"], tasks, args.size_mb, args.seed)}
        long_line, leaks["long"] = long_file(
            files["long"], files["short"], tasks, leaks["short"], args.long_mb, args.long_leaks, args.seed
        )
        inside = {t: n for t, n in leaks["long"].items() if n == long_line}
        described = {}
        for name, path in files.items():
            with path.open("rb") as stream:
                lengths = [len(line) for line in stream]
            described[name] = {"mib": path.stat().st_size / 2**20, "lines": len(lengths), "longest": max(lengths)}
        print(f"wrote the files in {time.perf_counter() - began:.0f} s: {json.dumps(described)}")
        for run in range(args.runs):
            for name in ("long", "short"):  # alternately, so that a change of load touches both
                report = Path(scratch) / f"{name}.report.json"
                figures = run_check(files[name], report, args.workers, args.checkout)
                figures["leaks_found"] = found(report, leaks[name])
                if name == "long":
                    figures["long_line_leaks_found"] = found(report, inside)
                results[name].append(figures)
                print(f"run {run + 1}, {name}: {json.dumps(figures)}", flush=True)

    rows, summary = [], {}
    for name in ("long", "short"):
        runs = results[name]
        median = {k: statistics.median(r[k] for r in runs) for k in ("seconds", "peak_rss_mib", "main_hwm_mib", "load")}
        summary[name] = {**described[name], "medians": median, "runs": runs, "leaks": len(leaks[name])}
        found_text = "/".join(str(r["leaks_found"]) for r in runs) + f" of {len(leaks[name])}"
        if name == "long":
            in_line = "/".join(str(r["long_line_leaks_found"]) for r in runs)
            found_text += f" ({in_line} of {len(inside)} in the long line)"
        rows.append(
            [
                name,
                f"{described[name]['mib']:.0f} MiB",
                f"{described[name]['lines']:,}",
                _size(described[name]["longest"]),
                f"{median['seconds']:.1f}",
                f"{median['peak_rss_mib']:.0f}",
                f"{median['main_hwm_mib']:.0f}",
                f"{min(r['load'] for r in runs):.1f}-{max(r['load'] for r in runs):.1f}",
                found_text,
            ]
        )
    headers = ["file", "size", "lines", "longest line", "wall s", "peak RSS MiB", "main MiB", "load", "leaks found"]
    print(format_table(headers, rows, [False, True, True, True, True, True, True, True, False]))
    print(
        f"(medians of {args.runs} runs each; command: frostgym contamination --train FILE --workers {args.workers} "
        "--json REPORT)"
    )
    if args.json:
        write_json(
            args.json,
            {
                "machine": {**machine_info(["numpy", "orjson", "datasketch"]), "measured_checkout": str(args.checkout)},
                "arguments": {k: str(v) for k, v in vars(args).items()},
                "files": summary,
            },
        )


if __name__ == "__main__":
    main()
