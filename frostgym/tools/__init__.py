"""Tool calling: the call parser, BFCL data and executors, and the replayed HTTP tool world."""
