"""What ``frostgym contamination`` finds, and what it costs, on a training file with known leaks.

Issue 20's target: on a synthetic training file holding a known set of test questions (some
verbatim, some lightly edited) among at least 100,000 unrelated lines, the check finds every
leaked task and flags no clean one; a 1 GB file is checked on 2 cores in minutes.

The file (``frostgym.contamination.synthetic``): JSONL of ``--size-mb`` MB of unrelated lines,
random word sequences (8-80 words, Zipf-weighted, seeded) drawn from the eval tasks' own
vocabulary, so every window of the file has to be looked up, the slowest case for the scan;
among them ``--leak-share`` (5%) of Math-v0's test questions at seeded lines, every other one
verbatim, the rest lightly edited (punctuation and case changed, and one number or one word
replaced). The check runs as ``frostgym contamination`` does, on every registered env's test
and private splits (8,995 tasks), in a fresh process with ``--workers`` scanning processes.

Reported: recall over the leaked tasks; precision over the flagged tasks, both counting a
task of a leaked task's own GSM template (Math-v0's ``template``: the same question with
other names or numbers) as a flag that is right, and with those counted as wrong; the
flagged tasks that are neither (the issue's "clean" tasks: must be 0); wall time of the
check (index, scan, merge; the eval tasks enumerated), the throughput, and the peak RSS of
the main process, of the largest worker and of all workers together (sampled every 0.2 s; a
forked worker shares the main process's pages, counted in both).

Run from the repository root: ``python benchmarks/contamination.py [--size-mb 1024]
[--workers 2] [--keep FILE] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, write_json

from frostgym.contamination.evalset import all_env_specs, eval_tasks
from frostgym.contamination.ngrams import tokens
from frostgym.contamination.synthetic import write_training_file
from frostgym.core.seeding import derive_generator
from frostgym.envs.registry import make_env

MATH = "frostgym/Math-v0"
# The check in a fresh process; a thread samples its workers' RSS (a forked worker's
# ru_maxrss would include the parent's pages at the fork).
_CHECK = """
import json, os, resource, sys, threading, time
began = time.perf_counter()
from pathlib import Path
from frostgym.contamination.check import check_training
from frostgym.contamination.evalset import all_env_specs, eval_tasks
from frostgym.contamination.reading import TrainingSource
peak = {"worker": 0, "workers": 0}
def sample(done):
    while not done.wait(0.2):
        sizes = []
        for task in os.listdir("/proc/self/task"):
            try:
                children = open(f"/proc/self/task/{task}/children").read().split()
                for pid in children:
                    for line in open(f"/proc/{pid}/status"):
                        if line.startswith("VmRSS:"):
                            sizes.append(int(line.split()[1]) / 1024)
            except OSError:
                pass
        if sizes:
            peak["worker"], peak["workers"] = max(peak["worker"], max(sizes)), max(peak["workers"], sum(sizes))
done = threading.Event()
threading.Thread(target=sample, args=(done,), daemon=True).start()
tasks = eval_tasks(all_env_specs(), ("test", "private"))
listed = time.perf_counter() - began
report = check_training(TrainingSource(Path(sys.argv[1])), tasks, workers=int(sys.argv[2]))
report.write(Path(sys.argv[3]))
seconds = time.perf_counter() - began
done.set()
main = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "eval_tasks_seconds": listed, "main_rss_mb": main,
                  "worker_rss_mb": peak["worker"], "workers_rss_mb": peak["workers"]}))
"""


def make_file(path: Path, size_mb: float, leak_share: float, seed: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Write the training file; return the leaks and Math-v0's task id -> template."""
    tasks = eval_tasks(all_env_specs(), ("test", "private"))
    math_test = [t for t in tasks if t.env == MATH and t.split == "test"]
    count = max(1, round(leak_share * len(math_test)))
    chosen = sorted(derive_generator("benchmark-leaks", seed).choice(len(math_test), count, replace=False).tolist())
    # ASCII words, as in most English training text (a line with any other character takes the
    # slower Unicode path of the normaliser: see the README)
    vocabulary = sorted({word for task in tasks for token in tokens(task.text) if (word := token.decode()).isascii()})
    leaks = write_training_file(
        path,
        [(math_test[i].task_id, math_test[i].text) for i in chosen],
        vocabulary,
        size_bytes=int(size_mb * 2**20),
        seed=seed,
    )
    source = make_env(MATH, "test", {}).source
    templates = {t.task_id: t.metadata["template"] for split in ("test", "private") for t in source.tasks(split)}
    return [{"task_id": leak.task_id, "line": leak.line, "edit": leak.edit} for leak in leaks], templates


def score(report: dict[str, Any], leaks: list[dict[str, Any]], templates: dict[str, int]) -> dict[str, Any]:
    """Recall and precision of the flags against the known leaks (see the module docstring)."""
    leaked = {leak["task_id"] for leak in leaks}
    leaked_templates = {templates[t] for t in leaked}
    flagged = {t["task_id"] for t in report["tasks"] if t["contaminated"]}
    siblings = {t["task_id"] for t in report["tasks"] if templates.get(t["task_id"]) in leaked_templates} - leaked
    found = flagged & leaked
    wrong = flagged - leaked - siblings
    by_id = {t["task_id"]: t for t in report["tasks"]}
    edited = [by_id[leak["task_id"]] for leak in leaks if leak["edit"] != "verbatim"]
    return {
        "leaked": len(leaked),
        "leaked_verbatim": sum(leak["edit"] == "verbatim" for leak in leaks),
        "found": len(found),
        "missed": sorted(leaked - flagged),
        "recall": len(found) / len(leaked),
        "flagged": len(flagged),
        "template_siblings": len(siblings),
        "template_siblings_flagged": len(flagged & siblings),
        "clean_flagged": sorted(wrong),
        "precision": len(flagged - wrong) / len(flagged) if flagged else 1.0,
        "precision_siblings_as_wrong": len(found) / len(flagged) if flagged else 1.0,
        "edited_min_ngram_overlap": min((t["ngram_overlap"] for t in edited), default=None),
        "edited_min_minhash": min((t["minhash_similarity"] for t in edited), default=None),
        "clean_max_ngram_overlap": max(by_id[t]["ngram_overlap"] for t in by_id if t not in leaked | siblings),
        "clean_max_minhash": max(by_id[t]["minhash_similarity"] for t in by_id if t not in leaked | siblings),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=1024.0, help="Size of the training file (MiB).")
    parser.add_argument("--leak-share", type=float, default=0.05, help="Share of Math-v0's test questions leaked.")
    parser.add_argument("--workers", type=int, default=2, help="Scanning processes.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="Write the training file here and keep it (else a temporary file).")
    parser.add_argument("--json", type=Path, help="Write the results here as JSON.")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="contamination-") as scratch:
        path = args.keep or Path(scratch) / "train.jsonl"
        began = time.perf_counter()
        leaks, templates = make_file(path, args.size_mb, args.leak_share, args.seed)
        written = time.perf_counter() - began
        lines = sum(1 for _ in path.open("rb"))
        size = path.stat().st_size
        print(f"wrote {path}: {size / 2**20:.0f} MiB, {lines:,} lines, {len(leaks)} leaks, in {written:.0f} s")
        out = Path(scratch) / "report.json"
        done = subprocess.run(
            [sys.executable, "-c", _CHECK, str(path), str(args.workers), str(out)],
            check=True,
            capture_output=True,
            text=True,
        )
        cost = json.loads(done.stdout.strip().splitlines()[-1])
        report = json.loads(out.read_text())
    scores = score(report, leaks, templates)
    rows = [
        [
            f"{size / 2**20:.0f} MiB",
            f"{lines:,}",
            str(args.workers),
            f"{cost['seconds']:.1f}",
            f"{size / 2**20 / cost['seconds']:.1f}",
            f"{cost['main_rss_mb']:.0f}",
            f"{cost['worker_rss_mb']:.0f}",
            f"{cost['workers_rss_mb']:.0f}",
            f"{scores['found']}/{scores['leaked']}",
            f"{scores['recall']:.3f}",
            f"{scores['precision']:.3f}",
            f"{scores['precision_siblings_as_wrong']:.3f}",
            f"{scores['template_siblings_flagged']}/{scores['template_siblings']}",
            str(len(scores["clean_flagged"])),
        ]
    ]
    headers = [
        "file",
        "lines",
        "workers",
        "wall s",
        "MiB/s",
        "main RSS MB",
        "worker RSS MB",
        "workers RSS MB",
        "leaks found",
        "recall",
        "precision",
        "precision (siblings wrong)",
        "siblings flagged",
        "clean flagged",
    ]
    print(format_table(headers, rows, [False] + [True] * 13))
    print(f"(of the {cost['seconds']:.1f} s, {cost['eval_tasks_seconds']:.1f} s enumerate the eval tasks)")
    print(
        f"edited leaks: lowest n-gram overlap {scores['edited_min_ngram_overlap']}, lowest MinHash "
        f"{scores['edited_min_minhash']}; other tasks: highest n-gram overlap {scores['clean_max_ngram_overlap']}, "
        f"highest MinHash {scores['clean_max_minhash']}"
    )
    if scores["missed"] or scores["clean_flagged"]:
        print(f"missed: {scores['missed']}; clean tasks flagged: {scores['clean_flagged']}")
    if args.json:
        write_json(
            args.json,
            {
                "machine": machine_info(["datasketch", "numpy", "orjson"]),
                "file": {"mib": size / 2**20, "lines": lines, "leaks": leaks, "seconds_to_write": written},
                "check": {"workers": args.workers, **cost},
                "parameters": report["parameters"],
                "scores": scores,
            },
        )


if __name__ == "__main__":
    main()
