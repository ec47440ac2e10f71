"""The HTTP tool task set, ``fixtures/tools_http/tasks.json``: read, checked for shape and
turned into task drafts.

Tasks are fixed (their gold calls are in the committed cassettes), so there is no
generated ``train`` split; ``frostgym.envs.tools.tasks.HTTPToolsSource`` serves them.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from frostgym.core.tasks import Draft
from frostgym.tools.http.clients import TOOL_BY_NAME

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
