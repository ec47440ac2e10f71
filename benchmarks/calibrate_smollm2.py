"""SmolLM2-135M-Instruct (the embedded default) calibrated on every level of every id with levels.

Runs ``frostgym calibrate`` per id and temperature (greedy and 0.7), each level's probe a
card under ``--out``, and prints one Markdown table (the README's calibration table): pass@1
per level with its 95% Wilson interval, and the level nearest 0.5.

Run from the repository root: ``python benchmarks/calibrate_smollm2.py --out runs/calibration``
(``--episodes`` tasks per level, 20 by default; ``--resume`` finishes a killed run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Per id: the split probed and the token budget per turn (SQL and ToolsHTTP are multi-turn).
IDS: dict[str, tuple[str, int, str]] = {
    "frostgym/Arithmetic-v0": ("dev", 128, ""),
    "frostgym/Fractions-v0": ("dev", 160, ""),
    "frostgym/LinearEquations-v0": ("dev", 160, ""),
    "frostgym/Math-v0": ("dev", 192, ""),
    "frostgym/SQL-v0": ("dev", 160, "[max_turns=2]"),
    "frostgym/ToolsHTTP-v0": ("dev", 128, "[max_turns=3]"),
    "frostgym/Tools-v0": ("test", 128, ""),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/calibration"))
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--ids", default=",".join(IDS), help="comma-separated subset of the ids")
    parser.add_argument("--temperatures", default="0,0.7", help="comma-separated sampling temperatures")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    temperatures = [float(t) for t in args.temperatures.split(",")]
    results: dict[tuple[str, float], dict[str, Any]] = {}
    for env_id in args.ids.split(","):
        split, tokens, extra = IDS[env_id]
        for temperature in temperatures:
            name = f"{env_id.split('/')[1]}-t{temperature:g}"
            json_path = args.out / f"{name}.json"
            if not json_path.exists():
                command = [
                    sys.executable, "-m", "frostgym.cli", "calibrate",
                    "--env", env_id + extra, "--agent", "smollm2", "--split", split,
                    "--episodes", str(args.episodes), "--temperature", str(temperature),
                    "--max-new-tokens", str(tokens), "--out", str(args.out / name), "--json", str(json_path),
                ]  # fmt: skip
                if args.resume:
                    command.append("--resume")
                subprocess.run(command, check=True)
            results[(env_id, temperature)] = json.loads(json_path.read_text())
    header = " | ".join(f"T={t:g} pass@1 [95% CI]" if t else "greedy pass@1 [95% CI]" for t in temperatures)
    print(f"| id | level | {header} |")
    print("|---|---|" + "---|" * len(temperatures))
    for env_id in args.ids.split(","):
        runs = [results[(env_id, t)] for t in temperatures]
        for probes in zip(*(r["levels"] for r in runs), strict=True):
            cells = [
                f"{_cell(p)}{' *' if p['level'] == r['nearest'] else ''}" for p, r in zip(probes, runs, strict=True)
            ]
            print(f"| `{env_id}` | {probes[0]['level']} | {' | '.join(cells)} |")
    print("\n*: the level nearest 0.5 at that temperature.")


def _cell(probe: dict[str, Any]) -> str:
    low, high = probe["interval"]
    return f"{probe['passed']}/{probe['episodes']} = {probe['pass_rate']:.2f} [{low:.2f}, {high:.2f}]"


if __name__ == "__main__":
    main()
