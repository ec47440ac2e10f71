"""Tool calling: the call parser, offered-tool schemas, BFCL data and executors, and the replayed HTTP tool world."""
