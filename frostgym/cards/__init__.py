"""Rollout cards: the plan, the on-disk card, score views, replay and regrade."""
