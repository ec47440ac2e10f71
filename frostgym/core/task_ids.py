"""What a task id says: ``source/split/index``, and whether it names a twin.

Why a module of its own: code that only reads ids (a card's views, the read-back process
that tallies a card while it is written) needs these rules without the task sources and
their generators (``frostgym.core.tasks``, which imports numpy); the rules stay in one place.
"""

from __future__ import annotations

from frostgym.core.errors import UnknownTaskError
from frostgym.core.splits import ALL_SPLITS, Split, check_split

#: What a twin's id adds to its original's: ``arithmetic/test/5`` -> ``arithmetic/test/5~twin``.
TWIN_SUFFIX = "~twin"


def is_twin_id(task_id: str) -> bool:
    """Whether ``task_id`` names a twin (``...~twin``)."""
    return task_id.endswith(TWIN_SUFFIX)


def twin_id(task_id: str) -> str:
    """The id of the twin of the task ``task_id``."""
    return task_id + TWIN_SUFFIX


def original_id(task_id: str) -> str:
    """The id of the original of the twin ``task_id`` (``task_id`` itself when it names none)."""
    return task_id.removesuffix(TWIN_SUFFIX)


def parse_task_id(task_id: str) -> tuple[str, Split, int]:
    """Split ``"source/split/index"`` into its parts. Raises ``UnknownTaskError`` for an
    id not of that form (a twin's id included: it is read by its original's)."""
    parts = task_id.rsplit("/", 2) if isinstance(task_id, str) else []
    if len(parts) != 3 or not parts[2].isdigit() or parts[1] not in ALL_SPLITS:
        raise UnknownTaskError(f"malformed task id {task_id!r}; expected 'source/split/index'")
    return parts[0], check_split(parts[1]), int(parts[2])
