"""Serving frostgym envs over the network, and playing them from afar.

Why: trainers that are not a Python process beside the env (verl, OpenRLHF, SkyRL, TRL over
OpenEnv, a cluster of inference nodes) step environments over the network, and OpenEnv's
HTTP/WebSocket protocol is the one they share. ``frostgym serve`` speaks it for every frostgym
id, keeping every byte of an episode: the same seed and actions give the same observations,
rewards, infos and grades as in process.

One module per job: ``config`` (the server's settings), ``wire`` (request and answer shapes,
JSON, errors), ``sessions`` (who holds which env, and the limits), ``app`` (the ASGI app),
``server`` (running it) and ``remote`` (a remote env as a gymnasium env: ``frostgym.serve.remote.make``;
the runner's ``--backend remote`` is ``frostgym.run.remote_backend``). The server needs the ``serve`` extra
(``pip install 'frostgym[serve]'``: fastapi, uvicorn, websockets); importing this package
imports none of them.
"""
