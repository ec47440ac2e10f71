"""The customer-service family: tau2-bench's airline and retail tasks with a customer
(scripted, or a model frozen by a cache) as the second party."""

from frostgym.envs.customer.env import CustomerServiceEnv

__all__ = ["CustomerServiceEnv"]
