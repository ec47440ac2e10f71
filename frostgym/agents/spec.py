"""Agent specs: the strings the CLI accepts for ``--agent``."""

from __future__ import annotations

from frostgym.agents.base import Agent
from frostgym.agents.oracle import OracleAgent
from frostgym.agents.random_agent import RandomAgent

AGENT_SPECS = ("oracle", "random")


def make_agent(spec: str, *, seed: int = 0) -> Agent:
    """Build an agent from its spec; ``seed`` seeds agents that sample."""
    if spec == "oracle":
        return OracleAgent()
    if spec == "random":
        return RandomAgent(seed=seed)
    raise ValueError(f"unknown agent spec {spec!r}; expected one of {', '.join(AGENT_SPECS)}")
