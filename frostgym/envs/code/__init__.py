"""The coding family: HumanEval's hidden tests, run against the agent's code in a sandbox."""

from frostgym.envs.code.env import TOOLS, CodeEnv

__all__ = ["TOOLS", "CodeEnv"]
