"""Tool-calling envs: BFCL single turn (Tools-v0), BFCL multi turn (ToolsMultiTurn-v0), replayed HTTP APIs (ToolsHTTP-v0)."""
