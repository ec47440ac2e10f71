"""Evaluating a policy into a rollout card, and working from cards: ``run_to_card`` (play a
plan into a card, and resume it), ``replay`` (replay and regrade a card), ``calibrate``
(where a model stands across levels) and ``exclusions`` (tasks a run leaves out)."""
