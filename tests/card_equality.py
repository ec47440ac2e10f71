"""Two cards of one plan are equal except their timings and hosts: what the Ray and remote
backends are held to against the local one (tests/run/test_ray_backend.py, tests/run/test_remote_backend.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from frostgym.cards.card import load_card
from frostgym.cards.store import dumps_line

VOLATILE = {
    "created_at",
    "updated_at",
    "started_at",
    "ended_at",
    "wall_seconds",
    "agent_seconds",
    "env_seconds",
    "host",
}


def stable(value: Any) -> Any:
    """``value`` without timing and host fields (at any depth)."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def comparable(directory: Path) -> tuple[Any, Any, Any]:
    """A card's ``(card, episodes, drops)`` as JSON, without what differs between backends."""
    card, typed_episodes, typed_drops = load_card(directory)  # checksums verified against the files
    episodes = [orjson.loads(dumps_line(e)) for e in typed_episodes]
    drops = [orjson.loads(dumps_line(d.to_json())) for d in typed_drops]
    for entry in card["files"].values():  # the bytes differ by their timings, so their hashes do
        entry.pop("sha256")
        entry.pop("bytes")
        entry.pop("line_crc32")
    for drop in drops:  # remote frames differ; the exception line must not
        assert drop["traceback"] is None or "Error" in drop["traceback"]
        drop["traceback"] = drop["traceback"] is not None
    return stable(card), stable(episodes), stable(drops)


def assert_same_card(local: Path, remote: Path) -> None:
    a, b = comparable(local), comparable(remote)
    assert [e["plan_id"] for e in a[1]] == [e["plan_id"] for e in b[1]]
    assert [d["plan_id"] for d in a[2]] == [d["plan_id"] for d in b[2]]
    assert a[1] == b[1]
    assert a[2] == b[2]
    assert a[0] == b[0]
