"""Rollout cards end to end: accounting under real failures, kill -9 and resume, replay,
regrade, and the CLI around them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.agents import AgentReply, AgentRequest, OracleAgent, RandomAgent
from frostgym.cards.card import load_card
from frostgym.cards.store import dumps_line, read_jsonl
from frostgym.cli import app
from frostgym.core.episode import DROP_CLASSES
from frostgym.core.errors import CardCorruptError, CardMismatchError
from frostgym.evaluate.replay import replay_card
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions
from tests.card_run_script import OPTIONS, SlowOracle, config
from tests.faulty_env import FAULTY_ID, kind_of

ROOT = Path(__file__).resolve().parents[2]


class _PartlyBroken:
    """The oracle, except that it returns an error for every third episode (by id) and
    raises outright on its fifth call, as a flaky model server would."""

    name = "partly-broken"

    def __init__(self) -> None:
        self.calls = 0

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        self.calls += 1
        if self.calls == 5:
            raise ConnectionError("model server went away")
        replies = OracleAgent().act(requests)
        return [
            AgentReply.failed("CUDA error: device-side assert") if int(r.episode_id, 16) % 3 == 0 else reply
            for r, reply in zip(requests, replies, strict=True)
        ]

    def describe(self) -> dict[str, Any]:
        return {"spec": "partly-broken"}


def _card(out: Path, agent: Any, env_ids: list[str], episodes: int, **kw: Any) -> dict[str, Any]:
    options = RunOptions(**{"batch_size": 8, **kw.pop("options", {})})
    kw.setdefault("samples", 1)
    cfg = card_config(env_ids=env_ids, agent_spec="test", sampling={}, episodes=episodes, seed=1, options=options, **kw)
    return run_to_card(out, agent, cfg, options)


@pytest.mark.slow
def test_accounting_balances_with_agent_grader_and_sandbox_failures(tmp_path: Path) -> None:
    card = _card(tmp_path / "c", _PartlyBroken(), [FAULTY_ID], 42, options={"workers": 4, "retries": 0}, samples=1)
    _, episodes, drops = load_card(tmp_path / "c")
    a = card["accounting"]
    assert a["planned"] == 42 == a["completed"] + a["dropped"] == len(episodes) + len(drops)
    assert a["planned"] == a["succeeded"] + a["failed"] + a["errored"] + a["skipped"]
    assert a["pending"] == 0 and a["balanced"] and card["status"] == "complete"
    classes = a["dropped_by_class"]
    assert {"agent_error", "grader_error", "sandbox_timeout", "sandbox_oom"} <= set(classes)
    assert set(classes) <= set(DROP_CLASSES)
    for record in drops:
        drop = record.drop
        assert record.counted_as == "failure" and drop.error
        if drop.drop_class == "agent_error":
            assert drop.stage == "agent"
        else:  # a real env failure: the kind its task was built to have
            assert drop.drop_class == kind_of(record.task_id) and record.traceback
            assert drop.stage == ("grade" if drop.drop_class == "grader_error" else "step")
            assert record.episode_id and record.observation  # what is known of the episode is kept
    assert all(kind_of(e.task_id) == "ok" and e.reward == 1.0 for e in episodes)
    # Both reporting rules, computed from the files: errors are failures, or left out.
    overall = card["views"]["overall"]
    assert overall["errors_as_failures"]["episodes"] == 42
    assert overall["errors_excluded"]["episodes"] == len(episodes)
    assert overall["errors_excluded"]["pass@k"]["1"]["value"] == 1.0
    assert overall["errors_as_failures"]["pass@k"]["1"]["value"] == pytest.approx(len(episodes) / 42)


@pytest.mark.slow
def test_retries_and_max_drops_cancel_the_rest(tmp_path: Path) -> None:
    card = _card(tmp_path / "c", _PartlyBroken(), [FAULTY_ID], 42, options={"max_drops": 3}, samples=1)
    a = card["accounting"]
    assert a["dropped_by_class"]["cancelled"] > 0 and a["balanced"]
    assert a["planned"] == a["completed"] + a["dropped"]
    _, _, drops = load_card(tmp_path / "c")
    cancelled = [d for d in drops if d.drop.drop_class == "cancelled"]
    assert all(d.counted_as == "excluded" and "max_drops=3" in d.drop.error for d in cancelled)
    retried = [d for d in drops if d.drop.drop_class == "agent_error"]
    assert all(d.attempts == 2 and len(d.earlier_errors) == 1 for d in retried)


def _outcome_keys(directory: Path) -> tuple[set[tuple[str, str, float]], int]:
    _, episodes, drops = load_card(directory)
    return {(e.plan_id, e.episode_id, e.reward) for e in episodes}, len(drops)


@pytest.mark.slow
def test_kill_9_then_resume_gives_the_uninterrupted_episode_set(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    run_to_card(reference, SlowOracle(), config(), OPTIONS)
    crashed = tmp_path / "crashed"
    child = subprocess.Popen([sys.executable, "-m", "tests.card_run_script", str(crashed)], cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        episodes = crashed / "episodes.jsonl"
        if episodes.exists() and episodes.read_bytes().count(b"\n") >= 20:
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert json.loads((crashed / "card.json").read_text())["status"] == "running"
    written = read_jsonl(crashed / "episodes.jsonl", torn="repair").records
    assert 20 <= len(written) < 120
    with (crashed / "episodes.jsonl").open("ab") as f:  # a torn last write, as a crash mid-line leaves
        f.write(b'{"plan_id": "frostgym/Arith')
    with pytest.raises(CardMismatchError, match="seed"):
        run_to_card(
            crashed, SlowOracle(), {**config(), "identity": {**config()["identity"], "seed": 6}}, OPTIONS, resume=True
        )
    card = run_to_card(crashed, SlowOracle(), config(), OPTIONS, resume=True)
    assert card["status"] == "complete" and card["accounting"]["balanced"]
    assert len(card["sessions"]) == 2 and card["sessions"][1]["resumed"]
    assert _outcome_keys(crashed) == _outcome_keys(reference)
    assert card["views"] == json.loads((reference / "card.json").read_text())["views"]


def test_replay_of_a_100_episode_math_card_passes_and_alterations_are_caught(tmp_path: Path) -> None:
    out = tmp_path / "card"
    _card(out, RandomAgent(seed=2), ["frostgym/Math-v0", "frostgym/Arithmetic-v0"], 25, samples=2)
    report = replay_card(out)
    assert report.ok and len(report.episodes) == 100
    lines = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    episode = json.loads(lines[7])

    # An edited action: the checksum and the replayed grade both give it away.
    edited = json.loads(lines[7])
    edited["steps"][0]["action"] = "<answer>" + edited["grade"]["details"]["gold"] + "</answer>"
    (out / "episodes.jsonl").write_bytes(b"".join([*lines[:7], json.dumps(edited).encode() + b"\n", *lines[8:]]))
    with pytest.raises(CardCorruptError, match="checksum"):  # refused before any episode is replayed
        replay_card(out)
    report = replay_card(out, verify=False)  # replayed anyway: the divergence names the edited episode
    assert not report.ok and report.integrity_error and "checksum" in report.integrity_error
    bad = [e for e in report.episodes if e.divergence]
    assert [e.plan_id for e in bad] == [episode["plan_id"]]
    assert bad[0].divergence is not None and bad[0].divergence.startswith("step 0.grade")

    # An edited grade with the manifest fixed up to match: replay still catches it.
    edited = dict(episode)
    edited["grade"]["components"]["format"] = 0.5  # the final grade: the step that ended the episode reads it
    (out / "episodes.jsonl").write_bytes(b"".join([*lines[:7], json.dumps(edited).encode() + b"\n", *lines[8:]]))
    card = json.loads((out / "card.json").read_text())
    card["files"]["episodes.jsonl"] = read_jsonl(out / "episodes.jsonl").manifest()
    (out / "card.json").write_text(json.dumps(card))
    report = replay_card(out)
    assert report.integrity_error is None and not report.ok
    divergence = next(e.divergence for e in report.episodes if e.divergence)
    assert divergence == "step 0.grade.components.format: recorded 0.5, now 0.0"

    result = CliRunner().invoke(app, ["replay", str(out)])
    assert result.exit_code == 1 and "step 0.grade.components.format" in result.output


@pytest.mark.slow
def test_regrade_records_versions_diffs_grades_and_skips_drops(tmp_path: Path) -> None:
    source = tmp_path / "source"
    _card(source, _PartlyBroken(), [FAULTY_ID], 21, options={"retries": 0})
    _, episodes, drops = load_card(source)
    # Pretend the card was graded by an older, more lenient grader: rewrite its grades.
    lines = []
    for e in episodes:
        for grade in (e.grade, e.steps[-1].grade):
            assert grade is not None
            grade["grader_version"], grade["score"] = "0.9.0", 0.5
        lines.append(dumps_line(e))
    (source / "episodes.jsonl").write_bytes(b"".join(lines))
    card = json.loads((source / "card.json").read_text())
    card["files"]["episodes.jsonl"] = read_jsonl(source / "episodes.jsonl").manifest()
    (source / "card.json").write_text(json.dumps(card))

    result = CliRunner().invoke(app, ["regrade", str(source), "--out", str(tmp_path / "new")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "new" / "regrade.json").read_text())
    assert report["compared"] == report["changed"] == len(episodes)
    change = report["changes"][0]
    assert change["before"]["score"] == 0.5 and change["after"]["score"] == 1.0
    assert change["after"]["grader_version"] != "0.9.0"
    new_card, new_episodes, new_drops = load_card(tmp_path / "new")
    assert new_card["regraded_from"]["path"] == str(source)
    assert new_card["config"]["identity"]["agent"] == f"replay:{source}"
    assert {d.drop.drop_class for d in new_drops} == {"skipped"} and len(new_drops) == len(drops)
    assert new_card["accounting"]["balanced"] and new_card["accounting"]["skipped"] == len(drops)
    assert [s.action for e in new_episodes for s in e.steps] == [s.action for e in episodes for s in e.steps]
    assert replay_card(tmp_path / "new").ok


def test_card_files_are_checked_against_the_manifest(tmp_path: Path) -> None:
    out = tmp_path / "card"
    _card(out, OracleAgent(), ["frostgym/Arithmetic-v0"], 5)
    first = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)[0]
    with (out / "episodes.jsonl").open("ab") as f:
        f.write(first)
    with pytest.raises(CardCorruptError, match=r"appended after the card was closed.*checksum"):
        load_card(out)


def test_cli_resume_refuses_other_options_and_summary_prints(tmp_path: Path) -> None:
    out = tmp_path / "card"
    args = ["eval", "--env", "frostgym/Arithmetic-v0", "--episodes", "4", "--samples", "3", "--out", str(out)]
    assert CliRunner().invoke(app, args).exit_code == 0
    result = CliRunner().invoke(app, [*args[:-2], "--agent", "random", "--out", str(out), "--resume"])
    assert result.exit_code == 2 and "agent" in result.output
    result = CliRunner().invoke(app, [*args, "--resume", "--k", "2"])
    assert result.exit_code == 0, result.output  # nothing left to run; views recomputed with k=2
    assert json.loads((out / "card.json").read_text())["views"]["ks"] == [1, 2, 3]
    summary = CliRunner().invoke(app, ["summary", str(out)])
    assert summary.exit_code == 0 and "pass@3" in summary.output and "planned" in summary.output
