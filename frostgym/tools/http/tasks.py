"""The HTTP tool task set: ``fixtures/tools_http/tasks.json`` as a ``ProceduralSource``.

Tasks are fixed (their gold calls are in the committed cassettes), so there is no
generated ``train`` split. Each task is owned by the split its prompt hashes into (30%
dev, 50% test, 20% private): adding a task never moves another between splits.
"""

from __future__ import annotations

import json
import random
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np

from frostgym.core.errors import UnknownTaskError
from frostgym.core.splits import Split, check_split, split_of
from frostgym.core.tasks import Draft, ProceduralSource, Task
from frostgym.tools.http.clients import TOOL_BY_NAME

SPLIT_PERCENT: MappingProxyType[Split, int] = MappingProxyType({"train": 0, "dev": 30, "test": 50, "private": 20})
KINDS = frozenset({"single", "multi", "parallel", "none"})
CHECK_TYPES = frozenset({"number", "text"})


def load_task_records() -> list[dict[str, Any]]:
    """Every task record of ``tasks.json``, in file order, checked for shape."""
    path = resources.files("frostgym") / "fixtures" / "tools_http" / "tasks.json"
    records: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["tasks"]
    for record in records:
        _check_record(record)
    return records


def _check_record(record: dict[str, Any]) -> None:
    where = f"tools_http task {record.get('id')!r}"
    if record["kind"] not in KINDS:
        raise ValueError(f"{where}: unknown kind {record['kind']!r}")
    unknown = [n for n in record["tools"] if n not in TOOL_BY_NAME]
    if unknown:
        raise ValueError(f"{where}: unknown tools {unknown}")
    for call in record["gold_calls"]:
        if call["name"] not in record["tools"]:
            raise ValueError(f"{where}: gold call {call['name']!r} is not among the offered tools")
    if sum(record["gold_rounds"]) != len(record["gold_calls"]):
        raise ValueError(f"{where}: gold_rounds do not add up to the gold calls")
    if not record["check"] or any(c["type"] not in CHECK_TYPES for c in record["check"]):
        raise ValueError(f"{where}: needs at least one number/text check")


def draft_of(record: dict[str, Any]) -> Draft:
    metadata = {
        "id": record["id"],
        "kind": record["kind"],
        "tools": list(record["tools"]),
        "gold_calls": record["gold_calls"],
        "gold_rounds": list(record["gold_rounds"]),
        "check": record["check"],
    }
    return Draft(
        prompt=record["prompt"],
        answer=record["answer"],
        solution=json.dumps(record["gold_calls"], sort_keys=True, separators=(",", ":")),
        metadata=metadata,
        difficulty=record["difficulty"],
        tags=("tools", "http", record["kind"]),
    )


class HTTPToolsSource(ProceduralSource):
    """The fixed HTTP tool tasks, shared out among dev/test/private by prompt hash."""

    name = "tools_http"
    version = "1"
    distributions = ("vcrpy", "httpx")
    difficulty = "mixed"
    tags = ("tools", "http")
    split_percent = SPLIT_PERCENT

    def __init__(self) -> None:
        super().__init__()
        self._drafts = [draft_of(r) for r in load_task_records()]
        if len({d.prompt for d in self._drafts}) != len(self._drafts):
            raise ValueError("two tools_http tasks share a prompt")
        sizes: dict[Split, int | None] = {"train": 0}
        for split in ("dev", "test", "private"):
            sizes[split] = sum(self._owner(d) == split for d in self._drafts)
        self.sizes = MappingProxyType(sizes)
        self._by_key: dict[str, Task] = {}

    def _owner(self, draft: Draft) -> Split:
        return split_of(draft.prompt, salt=self.name, percent=self.split_percent)

    def generate(self, rng: random.Random) -> Draft:
        raise NotImplementedError("tools_http is a fixed task set: its gold calls must be in the cassettes")

    def sample(self, split: Split, rng: np.random.Generator) -> Task:
        if self.size(check_split(split)) == 0:
            raise UnknownTaskError(f"tools_http has no tasks in split {split!r}; use dev, test or private")
        return super().sample(split, rng)

    def _finite_split(self, split: Split) -> list[Task]:
        cached = self._finite.get(split)
        if cached is None:
            mine = [d for d in self._drafts if self._owner(d) == split]
            cached = self._finite[split] = [self._make(split, i, d) for i, d in enumerate(mine)]
        return cached

    def all_tasks(self) -> list[Task]:
        return [t for split in ("dev", "test", "private") for t in self.tasks(split)]

    def task_by_key(self, key: str) -> Task:
        """The task whose ``tasks.json`` id is ``key`` (stable across splits and indices)."""
        if not self._by_key:
            self._by_key = {str(t.metadata["id"]): t for t in self.all_tasks()}
        try:
            return self._by_key[key]
        except KeyError:
            raise UnknownTaskError(f"no tools_http task with id {key!r}") from None


@cache
def http_tools_source() -> HTTPToolsSource:
    return HTTPToolsSource()
