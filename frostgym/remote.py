"""Remote envs: ``frostgym.remote.make(url, env_id, **kwargs)`` is a gymnasium env whose episodes
run on a ``frostgym serve`` server, with the same observations, rewards and infos as in process.

Why a top-level module: it is the one name a user needs (``frostgym.vector``'s vector envs and
any gymnasium code take the env it returns); the client itself lives in
``frostgym.serve.client``. Needs the ``serve`` extra (``pip install 'frostgym[serve]'``).
"""

from __future__ import annotations

from frostgym.serve.client import RemoteConnectionError, RemoteEnv, make
from frostgym.serve.wire import ServedEnvError

__all__ = ["RemoteConnectionError", "RemoteEnv", "ServedEnvError", "make"]
