"""The read-back process of a large card (``frostgym.cards.readback``): the summary it
computes from the files while the run writes them is the one close computes in process,
it is refused when it did not read exactly what was written, and it never outlives its
writer."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from frostgym.agents import AgentReply, AgentRequest, OracleAgent
from frostgym.cards.card import (
    DROPS_FILE,
    EPISODES_FILE,
    FLUSH_SECONDS,
    PLAN_FILE,
    CardWriter,
    read_card_json,
    summarize_card,
)
from frostgym.cards.readback import MAX_BYTES_BEHIND, ReadBack, Tail
from frostgym.cards.store import crc_sidecar, read_jsonl
from frostgym.core.episode import head_from_line
from frostgym.core.errors import CardCorruptError
from frostgym.evaluate.run_to_card import card_config
from frostgym.run.plan import PlannedEpisode, make_plan, plan_json_and_sha256
from frostgym.run.runner import RunOptions, run_plan

ENVS = ["frostgym/Arithmetic-v0", "frostgym/Fractions-v0"]
OPTIONS = RunOptions(batch_size=4)
TIMES = ("created_at", "updated_at", "started_at", "ended_at")


class HalfUnwritable(OracleAgent):
    """The oracle, with a trace no JSON can hold on every third request: those episodes
    become ``infra_error`` drops, so the card has drops beside its episodes."""

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        cycle: dict[str, Any] = {}
        cycle["self"] = cycle
        replies = super().act(requests)
        return [
            AgentReply(action=r.action, extra={"trace": cycle}) if int(q.episode_id, 16) % 3 == 0 else r
            for q, r in zip(requests, replies, strict=True)
        ]


def _plan() -> tuple[list[PlannedEpisode], dict[str, Any]]:
    plan = make_plan(ENVS, split="dev", episodes=5, samples=4, seed=2)
    config = card_config(env_ids=ENVS, agent_spec="test", sampling={}, episodes=5, samples=4, seed=2, options=OPTIONS)
    return plan, config


def _write(out: Path, read_back: bool, plan: Sequence[PlannedEpisode] | None = None) -> dict[str, Any]:
    full, config = _plan()
    writer = CardWriter.create(out, config=config, plan=full, provenance={}, read_back=read_back)
    run_plan(list(plan or full), HalfUnwritable(), writer, OPTIONS)
    card = writer.close("complete" if plan is None else "interrupted")
    assert writer.read_back_used == read_back
    return card


def _without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def test_a_card_read_back_by_its_process_is_the_card_read_back_in_process(tmp_path: Path) -> None:
    by_process = _write(tmp_path / "process", read_back=True)
    in_process = _write(tmp_path / "here", read_back=False)
    assert by_process["accounting"]["dropped"] > 0 and by_process["accounting"]["completed"] > 0
    # The records hold their timings, so the files' checksums differ between the runs.
    assert {**_without_times(by_process), "files": None} == {**_without_times(in_process), "files": None}
    assert orjson.loads((tmp_path / "process" / "card.json").read_bytes()) == by_process
    # Its CRC sidecars and the journal are gone with the run: both cards hold the same files.
    assert sorted(p.name for p in (tmp_path / "process").iterdir()) == sorted(
        p.name for p in (tmp_path / "here").iterdir()
    )
    summary = summarize_card(tmp_path / "process", read_card_json(tmp_path / "process"), "complete")
    for key in ("files", "graders", "accounting", "views"):  # the same bytes in card.json, key order too
        assert orjson.dumps(by_process[key]) == orjson.dumps(summary[key])


def test_a_resumed_card_is_read_back_whole_by_its_process(tmp_path: Path) -> None:
    plan, config = _plan()
    _write(tmp_path / "process", read_back=True, plan=plan[:9])
    writer = CardWriter.resume(tmp_path / "process", config=config, plan=plan, read_back=True)
    run_plan([p for p in plan if p.plan_id not in writer.done], HalfUnwritable(), writer, OPTIONS)
    resumed = writer.close("complete")
    assert writer.read_back_used
    whole = _write(tmp_path / "here", read_back=False)
    assert resumed["accounting"] == whole["accounting"] and resumed["views"] == whole["views"]
    assert (
        resumed["files"]
        == summarize_card(tmp_path / "process", read_card_json(tmp_path / "process"), "complete")["files"]
    )


def _wrote(directory: Path) -> dict[str, dict[str, Any]]:
    wrote = {}
    for kind, name in (("episode", EPISODES_FILE), ("drop", DROPS_FILE)):
        contents = read_jsonl(directory / name)
        wrote[kind] = {"bytes": contents.bytes, "lines": len(contents.records), "sha256": contents.sha256}
    return wrote


def _start(directory: Path) -> ReadBack:
    return ReadBack.start(*(directory / name for name in ("card.json", PLAN_FILE, EPISODES_FILE, DROPS_FILE)))


def test_the_process_summary_is_summarize_cards_and_refused_for_other_bytes(tmp_path: Path) -> None:
    out = tmp_path / "c"
    _write(out, read_back=False)
    card = read_card_json(out)
    expected = summarize_card(out, card, "complete")
    reply = _start(out).finish(_wrote(out), complete=True)
    assert reply is not None
    assert reply["files"] == {"episode": expected["files"][EPISODES_FILE], "drop": expected["files"][DROPS_FILE]}
    assert {k: reply[k] for k in ("graders", "accounting", "views")} == {
        k: expected[k] for k in ("graders", "accounting", "views")
    }
    other = _wrote(out)
    other["episode"]["sha256"] = "0" * 64  # the writer wrote other bytes than are on disk
    assert _start(out).finish(other, complete=True) is None
    shorter = _wrote(out)
    shorter["drop"]["bytes"] += 1
    assert _start(out).finish(shorter, complete=True) is None


def test_a_tail_reads_a_growing_file_as_the_whole_file_reads(tmp_path: Path) -> None:
    """Whatever the cuts between reads (mid-line, just before a newline, through a line of
    megabytes), a tail ends with the lines, checksums and CRCs of the whole file."""
    out = tmp_path / "c"
    _write(out, read_back=False)
    lines = (out / EPISODES_FILE).read_bytes().splitlines(keepends=True)
    record = orjson.loads(lines[0])
    record["observation"][0]["content"] = "x" * (2 << 20)
    data = b"".join([lines[0], orjson.dumps(record) + b"\n", *lines[1:]])
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"")
    tail = Tail(path, lambda line: head_from_line(line, "episode"))
    cuts = [0, 7, len(lines[0]) - 1, len(lines[0]) + 3, len(lines[0]) + (1 << 20), len(data) - 2, len(data)]
    heads = []
    with path.open("ab") as file:
        for start, stop in itertools.pairwise(cuts):
            file.write(data[start:stop])
            file.flush()
            heads += tail.read()
    whole = read_jsonl(path, decode=lambda line: head_from_line(line, "episode"))
    assert heads == whole.records and len(heads) == len(lines) + 1
    assert tail.manifest() == whole.manifest() and tail.rest == b""  # sha256, bytes, lines, CRCs
    assert crc_sidecar(path).read_bytes().hex() == whole.line_crc32


def _moved(records: list[dict[str, Any]], into: dict[str, Any]) -> list[dict[str, Any]]:
    """``records`` with the one farthest from ``into`` of the same env, other task, moved to
    ``into``'s task under a sample number no task uses."""
    order = records if into is records[0] else records[::-1]
    moved = next(r for r in order[::-1] if r["env_id"] == into["env_id"] and r["task_id"] != into["task_id"])
    return [{**r, "task_id": into["task_id"], "sample": 99} if r is moved else r for r in records]


def test_a_record_moved_to_another_task_is_refused_by_both_readers(tmp_path: Path) -> None:
    """A record whose task was edited (its plan id still planned, once) leaves a task more
    records than the plan has for it: both readers refuse the card, whether the moved
    record comes after that task's own records or before them, or names no planned task."""
    out = tmp_path / "c"
    _write(out, read_back=False)
    path = out / EPISODES_FILE
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for edited in (
        _moved(records, into=records[0]),  # after the task has all its records
        _moved(records, into=records[-1]),  # before
        [{**records[0], "task_id": "not-planned"}, *records[1:]],
    ):
        path.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in edited))
        with pytest.raises(CardCorruptError, match="more records than its plan has episodes"):
            summarize_card(out, read_card_json(out), "complete")
        reader = _start(out)
        assert reader.finish(_wrote(out), complete=True) is None
        assert reader.refused is not None and "more records than its plan has episodes" in reader.refused


def test_a_process_far_behind_the_writer_is_not_waited_for(tmp_path: Path) -> None:
    out = tmp_path / "c"
    _write(out, read_back=False)
    wrote = _wrote(out)
    wrote["episode"]["bytes"] += MAX_BYTES_BEHIND + 1  # more written than it can have read
    reader = _start(out)
    assert reader.finish(wrote, complete=True) is None
    assert reader.refused is not None and "lagged" in reader.refused


def test_a_line_the_process_cannot_read_leaves_close_to_the_writer(tmp_path: Path) -> None:
    out = tmp_path / "c"
    _write(out, read_back=False)
    with (out / EPISODES_FILE).open("ab") as f:
        f.write(b'{"not": "a record"}\n')
    assert _start(out).finish(_wrote(out), complete=True) is None


@pytest.mark.parametrize("how", ["stdin closed", "stopped"])
def test_the_process_ends_with_its_writer(tmp_path: Path, how: str) -> None:
    out = tmp_path / "c"
    _write(out, read_back=False)
    reader = _start(out)
    process = reader._process
    if how == "stopped":
        reader.stop()
    else:
        assert process.stdin is not None
        process.stdin.close()  # what a writer killed with -9 leaves it
    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is not None
    if how == "stdin closed":
        assert process.returncode == 0
        reader.stop()


def test_the_plan_a_card_writes_from_its_episodes_is_their_entries(tmp_path: Path) -> None:
    """``create`` writes ``plan.json`` by encoding the planned episodes and hashes those
    bytes, never building the entries; ``read_card_json`` reads them back as the entries
    (``to_dict``) exactly, or resume and compare would see another plan than the one the card
    holds. ``close`` returns ``card.json``'s content, which holds only the plan's hash and size."""
    plan, config = _plan()
    entries = [p.to_dict() for p in plan]
    plan_json, digest = plan_json_and_sha256(plan)
    assert plan_json == orjson.dumps(entries) == orjson.dumps(entries, option=orjson.OPT_SORT_KEYS)
    writer = CardWriter.create(tmp_path / "card", config=config, plan=plan, provenance={}, read_back=False)
    run_plan(plan, OracleAgent(), writer, OPTIONS)
    card = writer.close("complete")
    assert card == orjson.loads((tmp_path / "card" / "card.json").read_bytes())
    assert card["plan"] == {"sha256": digest, "count": len(plan)}
    assert read_card_json(tmp_path / "card")["plan"] == {**card["plan"], "episodes": entries}
    assert (tmp_path / "card" / PLAN_FILE).read_bytes() == plan_json


def test_the_plans_last_lines_are_handed_over_before_close(tmp_path: Path) -> None:
    """Near the plan's end the writer hands lines to its disk thread at every commit, not
    only every ``FLUSH_SECONDS``: by the time the run returns, every line is on its way to
    disk, so close leaves the read-back process few to decode. This run is far shorter
    than ``FLUSH_SECONDS``, so without that every line would still wait for close."""
    plan, config = _plan()
    writer = CardWriter.create(tmp_path / "card", config=config, plan=plan, provenance={}, read_back=False)
    began = time.monotonic()
    run_plan(plan, OracleAgent(), writer, OPTIONS)
    assert time.monotonic() - began < FLUSH_SECONDS  # else the timer alone would have handed them over
    episodes = tmp_path / "card" / EPISODES_FILE  # there once the disk thread put the card in place
    deadline = time.monotonic() + 10
    while (not episodes.exists() or episodes.read_bytes().count(b"\n") < len(plan)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert episodes.read_bytes().count(b"\n") == len(plan)
    writer.close("complete")
