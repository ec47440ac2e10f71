"""Run (or resume) a small oracle card in its own process, slowly enough to be killed
mid-run: ``python -m tests.card_run_script OUT [--resume]``."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from frostgym.agents import AgentReply, AgentRequest, OracleAgent
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions

ENVS = ["frostgym/Arithmetic-v0", "frostgym/Fractions-v0"]
OPTIONS = RunOptions(batch_size=4)


class SlowOracle(OracleAgent):
    """The oracle, 20 ms per batched call: a stand-in for model latency."""

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        time.sleep(0.02)
        return super().act(requests)

    def describe(self) -> dict[str, Any]:
        return {"spec": "oracle"}


def config() -> dict[str, Any]:
    return card_config(env_ids=ENVS, agent_spec="oracle", sampling={}, episodes=30, samples=2, seed=5, options=OPTIONS)


if __name__ == "__main__":
    run_to_card(Path(sys.argv[1]), SlowOracle(), config(), OPTIONS, resume="--resume" in sys.argv)
