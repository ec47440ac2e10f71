"""The coding family's parts: HumanEval tasks, code extraction, and the host-side test harness."""
