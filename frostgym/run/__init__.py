"""A run: a plan of episodes (``plan``), played by one agent (``runner``), with its envs in
this process, in Ray actors or on an env server (``backends`` chooses; ``ray_backend``,
``remote_backend``). What it produces are outcomes handed to a sink; writing them as a
rollout card is ``frostgym.cards``, and running a plan into a card ``frostgym.evaluate``."""
