"""Tool calling: the call parser, offered-tool schemas, tool responses, BFCL data and
executors, and the replayed HTTP tool world."""
