"""Every model call frostgym makes itself (a user simulator in an env, an LLM judge in a
grader) goes through this one layer, so that it is frozen like the rest of an episode.

A call is named by its content (``ModelCall``: the model's pin, the messages, the decoding
parameters, the tools) and its key is the SHA-256 of that content. A ``ModelCache`` keeps
replies by key in a JSONL file whose entries are checked by their hashes, and a
``FrozenModel`` serves a call from the cache or asks the model, as its mode says:
``replay`` (the cache only: a miss is a ``replay_miss``, never a silent model call),
``record`` (the model fills the misses) or ``live`` (the model answers every call). An
env or grader that replays a cache gives the same episodes on any machine, with no model
loaded.
"""

from frostgym.models.cache import CACHE_MODES, CacheEntry, CacheMode, ModelCache, entry_sha256
from frostgym.models.calls import (
    ModelCall,
    ModelPin,
    call_seed,
    directory_sha256,
    pin_model,
    request_key,
    sampling_key,
)
from frostgym.models.frozen import CallOutcome, FrozenModel

__all__ = [
    "CACHE_MODES",
    "CacheEntry",
    "CacheMode",
    "CallOutcome",
    "FrozenModel",
    "ModelCache",
    "ModelCall",
    "ModelPin",
    "call_seed",
    "directory_sha256",
    "entry_sha256",
    "pin_model",
    "request_key",
    "sampling_key",
]
