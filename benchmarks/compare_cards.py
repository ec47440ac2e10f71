"""What comparing two large cards costs: ``compare_cards`` on two 100,000-episode cards.

The target (issue 16): under 10 s on 2 cores and under 1 GB of memory, by streaming the
record files into per-card columns instead of holding both cards' trajectories. Side by
side with the naive baseline, ``load_card`` of both cards (every typed record in memory),
which is what a comparison would cost without streaming.

The cards: ``frostgym/Math-v0``'s train split, 5,000 tasks x 20 samples, the oracle (base)
and the random agent (cand), written once through the real runner and card writer into
``--cards`` (kept between runs: writing them takes minutes). Each measurement runs in a
fresh subprocess so its peak RSS (``ru_maxrss``) is its own. Cards this large are read at
once, the candidate by a second process (``frostgym.compare.parallel``) that lives while
the main process reads the base: the peak is bounded by the main process's peak plus the
reader's (``RUSAGE_CHILDREN``: the largest child). Every run is listed, and the best of
``--repeats`` is in the table.

Run from the repository root: ``python benchmarks/compare_cards.py [--tasks 5000 --samples 20]
[--cards DIR] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench_common import format_table, machine_info, write_json

ENV_ID = "frostgym/Math-v0"
SPLIT = "train"

_MEASURE = """
import json, resource, sys, time
began = time.perf_counter()
if sys.argv[1] == "compare":
    from frostgym.compare.compare import compare_cards
    comparison = compare_cards(sys.argv[2], sys.argv[3])
    size = len(comparison.views)
else:
    from frostgym.cards.card import load_card
    cards = [load_card(__import__("pathlib").Path(p)) for p in sys.argv[2:4]]
    size = sum(len(c[1]) for c in cards)
seconds = time.perf_counter() - began
main_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
reader_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
# One reader process runs beside the main process: bound the peak by the sum of their peaks.
print(json.dumps({"seconds": seconds, "peak_mb": main_mb + reader_mb, "main_mb": main_mb,
                  "reader_mb": reader_mb, "size": size}))
"""


def make_cards(root: Path, tasks: int, samples: int) -> tuple[Path, Path]:
    """The oracle and random cards of one plan, written once and reused."""
    paths = (root / f"oracle-{tasks}x{samples}", root / f"random-{tasks}x{samples}")
    for path, agent in zip(paths, ("oracle", "random"), strict=True):
        if (path / "card.json").exists() and json.loads((path / "card.json").read_text())["status"] == "complete":
            continue
        command = [sys.executable, "-m", "frostgym.cli", "eval", "--env", ENV_ID, "--split", SPLIT, "--agent", agent]
        command += ["--episodes", str(tasks), "--samples", str(samples), "--seed", "0", "--out", str(path)]
        subprocess.run(["rm", "-rf", str(path)], check=True)
        began = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        print(f"wrote {path} in {time.perf_counter() - began:.0f} s", file=sys.stderr)
    return paths


def measure(kind: str, base: Path, cand: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, kind, str(base), str(cand)], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cards", type=Path, default=Path("/tmp/frostgym-bench-cards"))
    parser.add_argument("--skip-naive", action="store_true", help="Leave out load_card of both cards.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    args.cards.mkdir(parents=True, exist_ok=True)
    base, cand = make_cards(args.cards, args.tasks, args.samples)
    episodes = args.tasks * args.samples
    card_mb = sum((p / name).stat().st_size for p in (base, cand) for name in ("episodes.jsonl",)) / 1e6
    kinds = ["compare"] if args.skip_naive else ["compare", "load_both"]
    results = {kind: [measure(kind, base, cand) for _ in range(args.repeats)] for kind in kinds}
    best = {kind: min(runs, key=lambda r: r["seconds"]) for kind, runs in results.items()}
    labels = {"compare": "compare_cards (streamed, columns)", "load_both": "load_card of both (naive)"}
    rows = [
        [
            labels[kind],
            f"{b['seconds']:.2f}",
            f"{max(r['peak_mb'] for r in results[kind]):.0f}",
            f"{best['compare']['seconds'] / b['seconds']:.2f}x" if kind != "compare" else "1.00x",
        ]
        for kind, b in best.items()
    ]
    print(f"two cards of {episodes:,} episodes each ({card_mb:.0f} MB of episodes.jsonl in all)")
    print(format_table(["what", "seconds", "peak RSS MB", "compare time / this"], rows, [False, True, True, True]))
    for kind, runs in results.items():
        listed = ", ".join(f"{r['seconds']:.2f} s / {r['peak_mb']:.0f} MB" for r in runs)
        print(f"{labels[kind]}, every run: {listed}")
    verdict = best["compare"]["seconds"] < 10 and max(r["peak_mb"] for r in results["compare"]) < 1024
    print(f"target (< 10 s, < 1 GB): {'met' if verdict else 'NOT met'}")
    if args.json:
        write_json(
            args.json,
            {
                "episodes_per_card": episodes,
                "episodes_jsonl_mb": card_mb,
                "runs": results,
                "machine": machine_info(["numpy", "orjson"]),
            },
        )


if __name__ == "__main__":
    main()
