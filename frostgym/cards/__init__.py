"""Rollout cards: the on-disk card of a plan (``frostgym.plan``) run, score views, replay and regrade."""
