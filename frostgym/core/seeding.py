"""The one seeding helper.

Every seed in frostgym (task instances, episode ids, per-episode seeds a runner hands
out, agent sampling seeds) is derived here from a tuple of labelled parts hashed with
SHA-256. Hashing, unlike ``seed + index``, gives streams that do not overlap for
nearby inputs: seed 42 item 1 and seed 43 item 0 are unrelated. No global RNG is
touched anywhere in the package.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: the card's readers need only SEED_BITS
    import numpy as np

SeedPart = str | int

#: Seeds are kept below 2**63 so they fit a signed 64-bit integer everywhere
#: (numpy, SQLite, JSON readers that use int64).
SEED_BITS = 63


def derive_seed(*parts: SeedPart) -> int:
    """A 63-bit seed that is a pure function of ``parts`` (order and type matter)."""
    if not parts:
        raise ValueError("derive_seed needs at least one part")
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, (str, int)):
            raise TypeError(f"seed parts must be str or int, got {type(part).__name__}")
    # JSON keeps 1 and "1" distinct and length-prefixes nothing ambiguous.
    encoded = json.dumps(list(parts), ensure_ascii=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(encoded).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


def derive_random(*parts: SeedPart) -> random.Random:
    """A private ``random.Random`` for generators written against the stdlib API."""
    return random.Random(derive_seed(*parts))


def derive_generator(*parts: SeedPart) -> np.random.Generator:
    """A private numpy ``Generator`` (PCG64) seeded from ``parts``."""
    import numpy as np

    return np.random.default_rng(derive_seed(*parts))


def draw_seed(rng: np.random.Generator) -> int:
    """Draw a fresh 63-bit seed from an existing generator (e.g. ``env.np_random``)."""
    import numpy as np

    return int(rng.integers(0, 2**SEED_BITS, dtype=np.int64))
