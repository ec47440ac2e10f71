"""``frostgym eval`` against a real ``transformers serve`` of the embedded SmolLM2, at default
flags, beside the in-process ``--agent smollm2`` on the same plan.

``transformers serve`` generates one request at a time and keeps generating a request whose
client has given up, so every request frostgym abandons is a wasted generation. Printed per
id: episodes completed and dropped, requests sent, requests that timed out (each one a
generation the server did for nothing, since frostgym never sends a timed-out request
again), the limit on requests in flight the agent reached, wall time, and how many replies
equal the in-process agent's (greedy on both sides, so they should all be equal).

    python benchmarks/transformers_serve.py              # Arithmetic level 1 (16) and Tools-v0 (8)
    python benchmarks/transformers_serve.py --json benchmarks/results/transformers_serve.json

``transformers serve``'s own dependencies (``fastapi``, ``uvicorn``, ``openai``) come with
``make install`` (the dev extra).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_common  # (also puts this checkout first on sys.path)

from frostgym.agents.smollm2 import ensure_converted
from tests.model_server import transformers_serve

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("frostgym/Arithmetic-v0[level=1]", "train", 16),
    ("frostgym/Tools-v0", "test", 8),
]


def _eval(env_id: str, split: str, episodes: int, agent: str) -> tuple[dict[str, Any], dict[str, Any], float]:
    out = Path(tempfile.mkdtemp()) / "card"
    command = [sys.executable, "-c", "from frostgym.cli import main; main()", "eval", "--env", env_id]
    command += ["--split", split, "--episodes", str(episodes), "--agent", agent, "--out", str(out)]
    began = time.perf_counter()
    subprocess.run(command, cwd=ROOT, capture_output=True, timeout=3600, check=False)
    wall = time.perf_counter() - began
    card = json.loads((out / "card.json").read_text())
    actions = {}
    for line in (out / "episodes.jsonl").read_bytes().splitlines():
        record = json.loads(line)
        actions[record["plan_id"]] = [step["action"] for step in record["steps"]]
    drops = len((out / "drops.jsonl").read_bytes().splitlines()) if (out / "drops.jsonl").exists() else 0
    return card, {"actions": actions, "dropped": drops}, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", help="run only the case whose env id starts with this")
    args = parser.parse_args()
    model_dir = ensure_converted()
    print(f"load {os.getloadavg()[0]:.2f}; model {model_dir.name}")
    rows = []
    with transformers_serve(model_dir) as url:
        for env_id, split, episodes in CASES:
            if args.only and not env_id.startswith(args.only):
                continue
            served_card, served, served_wall = _eval(env_id, split, episodes, f"openai:{url}#{model_dir}")
            _, local, local_wall = _eval(env_id, split, episodes, "smollm2")
            usage = served_card["agent"].get("usage", {})
            same = sum(1 for k, v in served["actions"].items() if local["actions"].get(k) == v)
            row = {
                "env": env_id,
                "episodes": episodes,
                "completed": len(served["actions"]),
                "dropped": served["dropped"],
                "requests": usage.get("requests"),
                "retries": usage.get("retries"),
                "failed_requests": usage.get("failures"),  # each a timed-out (so wasted) generation or worse
                "limit_reached": served_card["agent"].get("concurrency_limit", {}).get("reached"),
                "served_wall_s": round(served_wall, 1),
                "in_process_wall_s": round(local_wall, 1),
                "replies_equal_in_process": f"{same}/{len(local['actions'])}",
            }
            print(row, flush=True)
            rows.append(row)
    if args.json:
        bench_common.write_json(args.json, {"load_at_start": os.getloadavg(), "rows": rows})


if __name__ == "__main__":
    main()
