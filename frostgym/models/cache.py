"""The content-addressed cache that freezes model calls: one JSONL file of replies by key.

Each line is one entry, ``{"key", "request", "reply", "entry_sha256"}``: ``key`` is the
call's key (``ModelCall.key``, the SHA-256 of the canonical JSON of ``request``), ``request``
the call as data (``ModelCall.request``), ``reply`` the model's text, and ``entry_sha256``
``sha256_json({"request": request, "reply": reply})``. The file is read once, when the
cache is opened, and appended to, one flushed line per ``put``.

An entry is served only when both hashes check: a line whose key is not its request's hash,
or whose ``entry_sha256`` is not its request's and reply's, was edited by hand and is not
served (its key is a miss); nor is a line that is not a JSON entry. Each is listed in
``rejected`` with its line number and why. Of several lines with one key (a ``live`` run
records every reply again) the last valid one is served.

``CacheMode`` says how a ``FrozenModel`` (``frostgym.models.frozen``) uses the cache:
``replay`` serves cached replies only (a miss is a ``replay_miss``, never a model call),
``record`` calls the model for misses and caches their replies, ``live`` calls the model
for every call and caches every reply.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from frostgym.core.hashing import canonical_json, sha256_json
from frostgym.models.calls import ModelCall, request_key

CacheMode = Literal["replay", "record", "live"]
CACHE_MODES: tuple[CacheMode, ...] = ("replay", "record", "live")


@dataclass(frozen=True)
class CacheEntry:
    """One served entry: the call's key and request, its reply, and ``entry_sha256``."""

    key: str
    request: dict[str, Any]
    reply: str
    entry_sha256: str

    @classmethod
    def of(cls, request: dict[str, Any], reply: str) -> CacheEntry:
        """The entry for ``request`` (``ModelCall.request`` data) and its ``reply``."""
        return cls(request_key(request), request, reply, entry_sha256(request, reply))

    def line(self) -> str:
        """The entry as one line of the cache file (canonical JSON, no newline)."""
        return canonical_json(
            {"key": self.key, "request": self.request, "reply": self.reply, "entry_sha256": self.entry_sha256}
        )


def entry_sha256(request: dict[str, Any], reply: str) -> str:
    """``sha256_json({"request": request, "reply": reply})``: what an entry's
    ``entry_sha256`` must be."""
    return sha256_json({"request": request, "reply": reply})


def _parse(text: str) -> CacheEntry | str:
    """The entry on one line, or why it is not served."""
    try:
        data = json.loads(text)
    except ValueError as error:
        return f"not JSON: {error}"
    if not isinstance(data, dict):
        return "not a JSON object"
    key, request, reply, checksum = (data.get(name) for name in ("key", "request", "reply", "entry_sha256"))
    if not isinstance(key, str) or not isinstance(request, dict) or not isinstance(reply, str):
        return "not an entry: needs a string 'key', an object 'request' and a string 'reply'"
    if not isinstance(checksum, str):
        return "not an entry: needs a string 'entry_sha256'"
    if request_key(request) != key:
        return "key is not the SHA-256 of the request (edited by hand?)"
    if entry_sha256(request, reply) != checksum:
        return "entry_sha256 does not match the request and reply (edited by hand?)"
    return CacheEntry(key, request, reply, checksum)


class ModelCache:
    """Replies to model calls by key, read from and appended to a JSONL file.

    ``path`` None is an in-memory cache: ``put`` keeps the reply and writes nothing. A
    missing file is an empty cache, created (with its parent directories) by the first
    ``put``. ``rejected`` lists the ``(line number, reason)`` of every line that is not
    served (1-based; see the module docstring). ``get`` and ``put`` may be called from any
    thread; only this object appends to the file while it is open.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.rejected: list[tuple[int, str]] = []
        self._entries: dict[str, CacheEntry] = {}
        self._lock = threading.Lock()
        self._needs_newline = False  # the file ends in a torn line: start the next one afresh
        if self.path is not None and self.path.exists():
            raw = self.path.read_text(encoding="utf-8")
            self._needs_newline = bool(raw) and not raw.endswith("\n")
            for number, text in enumerate(raw.splitlines(), start=1):
                if not text.strip():
                    continue
                parsed = _parse(text)
                if isinstance(parsed, str):
                    self.rejected.append((number, parsed))
                else:
                    self._entries[parsed.key] = parsed

    @classmethod
    def from_replies(cls, entries: Iterable[tuple[dict[str, Any], str]]) -> ModelCache:
        """An in-memory cache of ``(request, reply)`` pairs (``ModelCall.request`` data and
        the reply text): how the model calls a card stored are replayed. A later pair with
        the same request replaces an earlier one."""
        cache = cls(None)
        for request, reply in entries:
            entry = CacheEntry.of(json.loads(canonical_json(request)), reply)
            cache._entries[entry.key] = entry
        return cache

    def get(self, call: ModelCall) -> str | None:
        """The cached reply to ``call``, or None when there is none."""
        with self._lock:
            entry = self._entries.get(call.key)
        return None if entry is None else entry.reply

    def put(self, call: ModelCall, reply: str) -> None:
        """Cache ``reply`` for ``call``, replacing any reply it had: appends one line to
        the file and flushes it (none when in memory)."""
        entry = CacheEntry.of(call.request(), reply)
        with self._lock:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as file:
                    file.write(("\n" if self._needs_newline else "") + entry.line() + "\n")
                    file.flush()
                self._needs_newline = False
            self._entries[entry.key] = entry

    def entries(self) -> list[CacheEntry]:
        """The served entries, sorted by key."""
        with self._lock:
            return [self._entries[key] for key in sorted(self._entries)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, call: object) -> bool:
        if not isinstance(call, ModelCall):
            return False
        with self._lock:
            return call.key in self._entries

    @property
    def sha256(self) -> str:
        """The content hash of what the cache serves: SHA-256 of the canonical JSON of the
        sorted ``[key, entry_sha256]`` pairs of its served entries. The same whatever the
        order of the file's lines, and unchanged by lines that are not served."""
        with self._lock:
            pairs = sorted([key, entry.entry_sha256] for key, entry in self._entries.items())
        return sha256_json(pairs)
