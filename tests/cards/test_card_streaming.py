"""The card's readers that go through a file a block at a time read what the whole-file
readers read: ``JsonArrayFile`` (a plan) is ``orjson.loads``, ``fold_jsonl`` (a record file)
is ``read_jsonl``, checks and manifest included; and a tally reading its plan alongside the
records gives what one holding the whole plan gives."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from frostgym.cards.store import JsonArrayFile, fold_jsonl, read_jsonl
from frostgym.cards.tally import Tally
from frostgym.core.episode import Head, head_from_line
from frostgym.core.errors import CardCorruptError

TRICKY = ["},{", '"},{"', "\\", 'x}"', "{", "]", "},{\\", "\u00e9", ""]


def test_a_json_array_read_a_block_at_a_time_is_the_array(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "plan.json"
    for _ in range(60):
        values = [
            {
                "a": "".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 4))),
                "b": [{"c": rng.choice(TRICKY)}] if rng.random() < 0.3 else [],
                "d": rng.random(),
            }
            for _ in range(rng.randint(0, 25))
        ]
        path.write_bytes(orjson.dumps(values))
        for block in (1, 3, 17, 1 << 20):
            assert list(JsonArrayFile(path, block=block)) == values


@pytest.mark.parametrize("data", [b"[{}", b"[{},{]", b"[1,2]x", b""])
def test_a_file_that_is_not_a_json_array_is_refused_as_read_json_refuses_it(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(data)
    for block in (1, 2, 100):
        with pytest.raises(CardCorruptError, match="not valid JSON"):
            list(JsonArrayFile(path, block=block))
    with pytest.raises(CardCorruptError, match="is missing"):
        list(JsonArrayFile(tmp_path / "none.json"))


def _lines(count: int) -> bytes:
    return b"".join(orjson.dumps({"n": n, "text": "x" * (n % 50)}) + b"\n" for n in range(count))


@pytest.mark.parametrize("block", [7, 100, 1 << 22])
def test_a_record_file_folded_a_block_at_a_time_is_the_file_read_whole(tmp_path: Path, block: int) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(_lines(300))
    whole = read_jsonl(path)
    taken: list[Any] = []
    folded = fold_jsonl(path, orjson.loads, taken.extend, block=block)
    assert taken == whole.records
    assert folded.manifest() == whole.manifest() and folded.hasher.hexdigest() == whole.hasher.hexdigest()
    path.write_bytes(_lines(300) + b'{"torn": ')
    with pytest.raises(CardCorruptError, match="bytes after the last complete line"):
        fold_jsonl(path, orjson.loads, taken.extend, block=block)
    ignored = fold_jsonl(path, orjson.loads, lambda _: None, torn="ignore", block=block)
    assert ignored.manifest() == whole.manifest() and ignored.repaired_bytes == 9
    fold_jsonl(path, orjson.loads, lambda _: None, torn="repair", block=block)
    assert path.read_bytes() == _lines(300)
    path.write_bytes(_lines(3) + b"not json\n")
    with pytest.raises(CardCorruptError, match="line 4"):
        fold_jsonl(path, orjson.loads, lambda _: None, block=block)


ENV = "frostgym/Fake-v0"


def _entries(tasks: int, samples: int) -> list[dict[str, Any]]:
    return [
        {"plan_id": f"{ENV}:t{t}:{s}", "env_id": ENV, "task_id": f"t{t}", "sample": s}
        for t in range(tasks)
        for s in range(samples)
    ]


def _head(entry: dict[str, Any], reward: float) -> Head:
    line = {
        **{k: entry[k] for k in ("plan_id", "env_id", "task_id", "sample")},
        "difficulty": None,
        "tags": [],
        "reward": reward,
        "grade": None,
    }
    return head_from_line(orjson.dumps(line), "episode")


def _result(plan: list[dict[str, Any]], heads: list[Head], complete: bool) -> Any:
    tally = Tally(plan, [1, 2])
    for at in range(0, len(heads), 5):
        tally.add("episode", heads[at : at + 5])
    try:
        return tally.result(complete=complete)
    except CardCorruptError as error:
        return str(error)


def test_a_plan_read_alongside_the_records_tallies_as_one_held_whole() -> None:
    """The same plan in its order (read alongside) and with one entry moved away from its
    task's others (held whole): the same results, for records in any order, some missing,
    some repeated or not planned."""
    rng = random.Random(5)
    plan = _entries(12, 3)
    moved = [*plan[1:], plan[0]]  # t0's entries no longer together
    assert Tally(plan, [1])._entries is not None and Tally(moved, [1])._entries is None  # read along; held
    for trial in range(40):
        records = [e for e in plan if rng.random() < 0.9]
        if trial % 2:
            rng.shuffle(records)
        heads = [_head(e, rng.random()) for e in records]
        if trial % 5 == 1:
            heads.insert(rng.randrange(len(heads)), heads[0])  # recorded twice
        if trial % 5 == 2:
            heads.append(_head({**plan[0], "plan_id": "elsewhere"}, 0.5))  # not planned
        complete = len(records) == len(plan) and trial % 5 == 0
        assert _result(plan, heads, complete) == _result(moved, heads, complete)
