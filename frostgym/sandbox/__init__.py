"""Run untrusted code with time, memory, process, file and network limits."""
