"""The text-to-SQL family: real SQLite databases, hand-written and templated questions."""

from frostgym.envs.sql.env import TOOLS, SQLEnv
from frostgym.envs.sql.tasks import SQLTaskSource, sql_source

__all__ = ["TOOLS", "SQLEnv", "SQLTaskSource", "sql_source"]
