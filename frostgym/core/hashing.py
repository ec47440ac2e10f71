"""Canonical JSON and content hashes: how frozen data is named and checked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

#: Bytes read at a time when hashing a file, so a large file is never held whole.
FILE_CHUNK = 1 << 20


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal data gives equal bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(obj: Any) -> str:
    return sha256_text(canonical_json(obj))


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read a chunk at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(FILE_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
