"""Plays fixed seeds on every env (or every level of every env) and prints canonical JSON
of what happened.

Run in a fresh interpreter by the determinism tests and compared byte for byte with
the same function run in the test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium

import frostgym
from frostgym.agents.base import AgentRequest
from frostgym.agents.random_agent import RandomAgent
from frostgym.core.hashing import canonical_json
from frostgym.core.seeding import derive_seed
from frostgym.envs.levels import env_levels


def _play(label: list[Any], env: Any, seeds: int, junk: RandomAgent) -> list[list[Any]]:
    out = []
    for seed in range(seeds):
        obs, info = env.reset(seed=seed)
        oracle = env.oracle_action()
        reply = junk.act([AgentRequest(obs, info["episode_id"], 0, derive_seed("probe", seed))])[0].action
        _, reward, _, _, step_info = env.step(reply)
        env.reset(seed=seed)
        _, gold_reward, _, _, gold_info = env.step(oracle)
        out.append([*label, seed, obs, info, reply, reward, step_info, oracle, gold_reward, gold_info])
    return out


def probe(seeds: int) -> str:
    junk = RandomAgent(seed=7)
    out = []
    for entry in frostgym.ENTRIES:
        out += _play([entry.id], gymnasium.make(entry.id).unwrapped, seeds, junk)
    return canonical_json(out)


def probe_levels(seeds: int) -> str:
    """``seeds`` seeds at every level of every id that has levels, and each level's
    fixture hash (which the first reset checks against the lock)."""
    junk = RandomAgent(seed=7)
    out = []
    for entry in frostgym.ENTRIES:
        for level in env_levels(entry.id):
            env = gymnasium.make(entry.id, level=level.level).unwrapped
            out += _play([entry.id, level.level], env, seeds, junk)
            out.append([entry.id, level.level, env.fixture_sha256])
    return canonical_json(out)


def in_fresh_process(*args: str, hash_seed: str) -> str:
    """This module's output for ``args`` from a new interpreter with another str-hash salt
    (``PYTHONHASHSEED``), which must not change any episode."""
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(
        [sys.executable, "-m", "tests.determinism_probe", *args],
        cwd=root,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout


if __name__ == "__main__":
    sys.stdout.write((probe_levels if sys.argv[2:] == ["levels"] else probe)(int(sys.argv[1])))
