"""Tool-calling envs: BFCL single turn (Tools-v0), BFCL multi turn (ToolsMultiTurn-v0) and
replayed HTTP APIs (ToolsHTTP-v0)."""
