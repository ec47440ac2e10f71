"""Policies behind one batched interface (see ``base.py``)."""

from frostgym.agents.base import Agent, AgentReply, AgentRequest
from frostgym.agents.oracle import OracleAgent
from frostgym.agents.random_agent import RandomAgent
from frostgym.agents.spec import AGENT_SPECS, make_agent

__all__ = ["AGENT_SPECS", "Agent", "AgentReply", "AgentRequest", "OracleAgent", "RandomAgent", "make_agent"]
