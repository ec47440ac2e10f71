"""Plays fixed seeds on every env and prints canonical JSON of what happened.

Run in a fresh interpreter by the determinism test and compared byte for byte with
the same function run in the test process.
"""

from __future__ import annotations

import sys

import gymnasium

import frostgym
from frostgym.agents.base import AgentRequest
from frostgym.agents.random_agent import RandomAgent
from frostgym.core.hashing import canonical_json
from frostgym.core.seeding import derive_seed


def probe(seeds: int) -> str:
    junk = RandomAgent(seed=7)
    out = []
    for entry in frostgym.ENTRIES:
        env = gymnasium.make(entry.id).unwrapped
        for seed in range(seeds):
            obs, info = env.reset(seed=seed)
            oracle = env.oracle_action()
            reply = junk.act([AgentRequest(obs, info["episode_id"], 0, derive_seed("probe", seed))])[0].action
            _, reward, _, _, step_info = env.step(reply)
            env.reset(seed=seed)
            _, gold_reward, _, _, gold_info = env.step(oracle)
            out.append([entry.id, seed, obs, info, reply, reward, step_info, oracle, gold_reward, gold_info])
    return canonical_json(out)


if __name__ == "__main__":
    sys.stdout.write(probe(int(sys.argv[1])))
