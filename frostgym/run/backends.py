"""Where a run's envs live, chosen in one place: ``local`` (this process), ``ray`` (Ray
actors, ``frostgym.run.ray_backend``) or ``remote`` (a ``frostgym serve`` server,
``frostgym.run.remote_backend``).

Why its own module: ``frostgym eval`` and library callers open a backend by its name and
address; each kind's optional dependencies (ray; the serve extra) are imported only when
it is chosen, and every way one cannot be opened is a ``BackendError`` saying what to do.
A card does not depend on its backend, so none is recorded: a Ray or remote card equals
the local one except its timings and hosts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal, get_args

from frostgym.core.errors import BackendError, BackendRefusedError
from frostgym.run.runner import EnvBackend, LocalEnvs

BackendKind = Literal["local", "ray", "remote"]
BACKENDS: tuple[str, ...] = get_args(BackendKind)


def check_backend_options(kind: str, address: str | None, ray_actors: int | None) -> None:
    """``BackendError`` unless ``kind`` is a backend and ``address`` and ``ray_actors`` fit it:
    ``remote`` needs an address, ``ray`` may take one (default: a local Ray of its own) and an
    actor count, ``local`` takes neither."""
    if kind not in BACKENDS:
        raise BackendError(f"--backend is {', '.join(BACKENDS)}, got {kind!r}")
    if kind == "local" and (address is not None or ray_actors is not None):
        raise BackendError("--address and --ray-actors need --backend ray (or --address, --backend remote)")
    if kind == "remote" and (address is None or ray_actors is not None):
        raise BackendError("--backend remote needs --address http://HOST:PORT and takes no --ray-actors")


@contextlib.contextmanager
def open_backend(
    kind: str,
    *,
    address: str | None = None,
    env_ids: tuple[str, ...] | list[str] = (),
    ray_actors: int | None = None,
    prefetch_oracle: bool = False,
    token: str | None = None,
) -> Iterator[EnvBackend]:
    """The backend ``kind`` for a run of ``env_ids``, closed when the block ends. ``remote``:
    the server at ``address`` (its token: ``token``, else ``FROSTGYM_SERVE_TOKEN``), checked to
    serve every id and trust this client with gold; ``ray``: the cluster at ``address`` (None:
    a local Ray of frostgym's own), ``ray_actors`` env workers, oracle actions computed with
    every step when ``prefetch_oracle``. Raises ``BackendError`` for options that do not fit
    (``check_backend_options``), a missing extra, or a backend that cannot be reached or has no
    room; ``BackendRefusedError`` (a cluster that refuses this driver's token) as itself."""
    check_backend_options(kind, address, ray_actors)
    if kind == "local":
        yield LocalEnvs()
        return
    if kind == "remote":
        assert address is not None
        try:
            from frostgym.run.remote_backend import RemoteEnvs
            from frostgym.serve.config import token_from
        except ImportError as error:
            raise BackendError(f"--backend remote needs: pip install 'frostgym[serve]' ({error})") from error
        try:
            served = RemoteEnvs.connect(address, env_ids, token=token if token is not None else token_from(None))
        except (ConnectionError, ValueError) as error:
            raise BackendError(f"--backend remote: {error}") from error
        with served:
            yield served
        return
    try:
        from frostgym.run.ray_backend import RayEnvs
    except ImportError as error:
        raise BackendError(f"--backend ray needs ray: pip install 'frostgym[ray]' ({error})") from error
    try:
        cluster = RayEnvs.start(address, actors=ray_actors, prefetch_oracle=prefetch_oracle)
    except BackendRefusedError as error:  # the cluster refuses this driver's token: said as it is, naming the backend
        raise BackendRefusedError(f"--backend ray: {error}") from None
    except (ConnectionError, RuntimeError) as error:  # no cluster there, or no room for the actors
        raise BackendError(f"--backend ray: {error}") from error
    with cluster:
        yield cluster
