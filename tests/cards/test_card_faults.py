"""Rollout cards under the faults an outside campaign found (issue 14): content no card
could hold, edited or deleted files under ``--resume``, a kill while the card is being
created, a full disk, garbage lines, and a 50 MB reply. Each test failed before its fix."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from frostgym.agents import AgentReply, AgentRequest, OracleAgent
from frostgym.cards.card import CardWriter, load_card, read_card_json
from frostgym.cards.store import DiskThread, JsonlAppender, chain_checkpoints, dumps_line, read_jsonl
from frostgym.core.episode import STORED_ACTION_PREFIX, EpisodeRecord, RecordHead, RecordKind, head_from_line
from frostgym.core.errors import CardCorruptError
from frostgym.evaluate.replay import regrade_card, replay_card
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.plan import make_plan
from frostgym.run.runner import RunOptions
from tests.card_run_script import OPTIONS, SlowOracle, config
from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[2]
MATH = "frostgym/Arithmetic-v0"


class FixedReply:
    """An agent that sends one fixed reply (and trace) to every request: how a hostile or
    degenerate policy looks to the runner."""

    name = "fixed"

    def __init__(self, action: Any, extra: dict[str, Any] | None = None, every: int = 1) -> None:
        self.action = action
        self.extra = extra or {}
        self.every = every  # only every n-th request gets the fixed reply; the others the oracle's

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        oracle = OracleAgent().act(requests)
        return [
            AgentReply(action=self.action, extra=dict(self.extra)) if int(r.episode_id, 16) % self.every == 0 else o
            for r, o in zip(requests, oracle, strict=True)
        ]

    def describe(self) -> dict[str, Any]:
        return {"spec": "fixed"}


def _run(
    out: Path, agent: Any, env_ids: Sequence[str] = (MATH,), episodes: int = 6, split: str = "dev", **kw: Any
) -> dict[str, Any]:
    options = RunOptions(split=split, batch_size=4)  # type: ignore[arg-type]
    cfg = card_config(
        env_ids=list(env_ids), agent_spec="test", sampling={}, episodes=episodes, samples=1, seed=3, options=options
    )
    return run_to_card(out, agent, cfg, options, **kw)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=timeout, env={**os.environ, "COLUMNS": "200"})


# -- 1. one episode's content never kills the run ---------------------------------------------


def test_a_lone_surrogate_in_an_action_is_written_not_fatal(tmp_path: Path) -> None:
    card = _run(tmp_path / "c", FixedReply("<answer>\ud800 18</answer>", every=2))
    assert card["status"] == "complete" and card["accounting"]["completed"] == 6
    _, episodes, _ = load_card(tmp_path / "c")
    actions = [s.action for e in episodes for s in e.steps]
    assert "<answer>\ufffd 18</answer>" in actions  # stored as the env read it


def test_python_syntax_surrogate_escape_on_a_tool_env_is_scored_and_resumable(tmp_path: Path) -> None:
    # ASCII text whose parsed call holds a lone surrogate: the campaign's one-line reply.
    card = _run(tmp_path / "c", FixedReply("[f(a='\\ud800')]"), env_ids=["frostgym/Tools-v0"], episodes=3, split="test")
    assert card["status"] == "complete" and card["accounting"]["completed"] == 3
    _, episodes, _ = load_card(tmp_path / "c")
    assert all(e.grade is not None and e.grade["score"] == 0.0 for e in episodes)
    assert replay_card(tmp_path / "c").ok


def test_content_no_json_can_hold_becomes_a_drop_with_its_reason(tmp_path: Path) -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle  # an agent trace nobody can serialize
    card = _run(tmp_path / "c", FixedReply("<answer>1</answer>", extra={"logits": cycle}, every=2))
    assert card["status"] == "complete" and card["accounting"]["balanced"]
    _, episodes, drops = load_card(tmp_path / "c")
    assert drops and len(episodes) + len(drops) == 6
    assert {(d.drop.drop_class, d.drop.stage) for d in drops} == {("infra_error", "runner")}
    assert all("could not be written" in d.drop.error for d in drops)


# -- 4. resume verifies what is on disk ---------------------------------------------------------


def _edit_line(path: Path, number: int, old: bytes, new: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new, 1)
    path.write_bytes(b"".join(lines))


def _resume(out: Path) -> dict[str, Any]:
    options = RunOptions(batch_size=4)
    cfg = card_config(env_ids=[MATH], agent_spec="test", sampling={}, episodes=6, samples=1, seed=3, options=options)
    return run_to_card(out, OracleAgent(), cfg, options, resume=True)


def test_resume_refuses_an_edited_complete_card_naming_the_line(tmp_path: Path) -> None:
    out = tmp_path / "c"
    _run(out, FixedReply("<answer>-1</answer>", every=2))
    before = (out / "card.json").read_bytes()
    _edit_line(out / "episodes.jsonl", 2, b'"reward":', b'"reward":1.0,"x":')
    with pytest.raises(CardCorruptError, match=r"episodes\.jsonl line 2 differs"):
        _resume(out)
    assert (out / "card.json").read_bytes() == before  # nothing re-blessed


def test_resume_refuses_removed_lines_and_a_deleted_file(tmp_path: Path) -> None:
    out = tmp_path / "c"
    _run(out, OracleAgent())
    lines = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    (out / "episodes.jsonl").write_bytes(b"".join(lines[:-2]))
    with pytest.raises(CardCorruptError, match=r"has 4 lines; the card recorded 6"):
        _resume(out)
    (out / "episodes.jsonl").write_bytes(b"".join(lines))
    assert _resume(out)["status"] == "complete"  # restored: a no-op resume
    (out / "episodes.jsonl").unlink()
    with pytest.raises(CardCorruptError, match=r"episodes\.jsonl is missing; the card recorded 6 lines"):
        _resume(out)


def test_resume_mends_only_a_torn_last_line(tmp_path: Path) -> None:
    out = tmp_path / "c"
    _run(out, OracleAgent())
    with (out / "drops.jsonl").open("ab") as f:
        f.write(b'{"plan_id": "frostgym/Ari')
    card = _resume(out)
    assert card["status"] == "complete" and card["accounting"]["completed"] == 6
    load_card(out)  # checksums hold again


@pytest.mark.slow
def test_a_resumed_session_killed_mid_run_is_checked_against_its_checkpoint(tmp_path: Path) -> None:
    """Session 1 is interrupted (closed), session 2 resumes and is killed: the lines of
    session 1 are still covered by a checksum, so an edit to them is refused."""
    out = tmp_path / "c"

    class StopAfter(SlowOracle):
        calls = 0

        def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
            self.calls += 1
            if self.calls == 4:
                raise KeyboardInterrupt
            return super().act(requests)

    with pytest.raises(KeyboardInterrupt):
        run_to_card(out, StopAfter(), config(), OPTIONS)
    first = json.loads((out / "card.json").read_text())
    assert first["status"] == "interrupted"
    closed_lines = first["files"]["episodes.jsonl"]["lines"]
    child = subprocess.Popen([sys.executable, "-m", "tests.card_run_script", str(out), "--resume"], cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (out / "episodes.jsonl").read_bytes().count(b"\n") < closed_lines + 8:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    card = json.loads((out / "card.json").read_text())
    assert card["status"] == "running" and card["checkpoint"]["episodes.jsonl"]["lines"] == closed_lines
    _edit_line(out / "episodes.jsonl", 1, b'"reward":', b'"reward":0.5,"x":')
    with pytest.raises(CardCorruptError, match=r"episodes\.jsonl line 1 differs"):
        run_to_card(out, SlowOracle(), config(), OPTIONS, resume=True)


# -- 5. creating a card is atomic ---------------------------------------------------------------


def test_a_failed_creation_leaves_no_card_directory(tmp_path: Path) -> None:
    out = tmp_path / "c"
    cycle: list[Any] = []
    cycle.append(cycle)
    options = RunOptions()
    cfg = card_config(env_ids=[MATH], agent_spec="t", sampling={}, episodes=2, samples=1, seed=0, options=options)
    plan = make_plan([MATH], split="dev", episodes=2, samples=1, seed=0, env_kwargs={})
    with pytest.raises(TypeError):  # the manifest cannot be written: as if killed mid-creation
        CardWriter.create(out, config=cfg, plan=plan, provenance={"broken": cycle})
    assert not out.exists()
    assert not list(tmp_path.iterdir())  # no staging directory left either
    assert _run(out, OracleAgent())["status"] == "complete"


@pytest.mark.slow
def test_kill_9_during_creation_leaves_nothing_or_a_whole_card(tmp_path: Path) -> None:
    """A plan of 20 000 episodes (200 tasks x 100 samples) makes creation take a while; kill just after its first
    directory appears, at several delays. Every outcome is usable: no card directory (a
    plain run starts it) or a card with its whole plan (--resume finishes it)."""
    script = (
        "import sys; from pathlib import Path; from frostgym.agents import OracleAgent;"
        "from frostgym.evaluate.run_to_card import card_config, run_to_card;"
        "from frostgym.run.runner import RunOptions;"
        "o = RunOptions(batch_size=64);"
        "c = card_config(env_ids=['frostgym/Arithmetic-v0'], agent_spec='oracle', sampling={}, episodes=200,"
        " samples=100, seed=0, options=o);"
        "run_to_card(Path(sys.argv[1]), OracleAgent(), c, o)"
    )
    outcomes = []
    for attempt, delay in enumerate((0.0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08)):
        out = tmp_path / f"c{attempt}"
        child = subprocess.Popen([sys.executable, "-c", script, str(out)], cwd=ROOT)
        deadline = time.monotonic() + 120
        while not (out.exists() or list(tmp_path.glob(f".c{attempt}.creating-*"))):
            assert child.poll() is None and time.monotonic() < deadline, "the run ended before creating its card"
            time.sleep(0.0005)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        if out.exists():
            card = read_card_json(out)  # whole, with its plan (plan.json, checked against its sha256)
            assert card["plan"]["count"] == len(card["plan"]["episodes"]) == 20000
            outcomes.append("card")
        else:
            outcomes.append("nothing")
    assert len(outcomes) == 7
    # A killed creation's staging directory is removed by the next run there once its lock is
    # free; one killed before it even took its lock is left until it is a minute old.
    leftovers = [p for p in tmp_path.glob(".c0.creating-*") if (p / ".lock").exists()]
    shutil.rmtree(tmp_path / "c0", ignore_errors=True)
    _run(tmp_path / "c0", OracleAgent())
    assert not [p for p in leftovers if p.exists()]


# -- 10. errors a user can act on, in one line ----------------------------------------------------


def _no_traceback(result: subprocess.CompletedProcess[str]) -> str:
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "KeyError" not in output and "TypeError" not in output, output
    return output


@pytest.mark.slow
@pytest.mark.parametrize("line", [b'{"a": 1}\n', b"[1, 2, 3]\n", b'{"plan_id": 7}\n'])
def test_a_garbage_line_is_named_by_replay_resume_and_summary(tmp_path: Path, line: bytes) -> None:
    out = tmp_path / "c"
    _run(out, OracleAgent())
    with (out / "episodes.jsonl").open("ab") as f:
        f.write(line)
    for args in (["replay", str(out)], ["summary", str(out)]):
        result = _cli(*args)
        assert result.returncode == 2
        assert "episodes.jsonl line 7" in _no_traceback(result)
    with pytest.raises(CardCorruptError, match=r"episodes\.jsonl line 7: not an episode record"):
        _resume(out)


@pytest.mark.slow
def test_summary_of_a_killed_card_prints_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "c"
    child = subprocess.Popen([sys.executable, "-m", "tests.card_run_script", str(out)], cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (out / "episodes.jsonl").exists() and (out / "episodes.jsonl").read_bytes().count(b"\n") >= 5:
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    result = _cli("summary", str(out))
    output = _no_traceback(result)
    assert result.returncode == 0, output
    assert "its run was killed" in output and "--resume" in output and "pending" in output


def _mount_point_or_skip(tmp_path: Path) -> Path:
    """An empty directory to mount a small tmpfs on (a real full disk), in a private mount
    namespace (``_in_mount_namespace``); skips where that cannot be done."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and util-linux unshare to mount a small tmpfs")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")
    mount = tmp_path / "disk"
    mount.mkdir()
    return mount


def _in_mount_namespace(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``sh -c script args`` in a private mount namespace, from the repository root."""
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.slow
def test_a_full_disk_is_named_and_the_card_resumes(tmp_path: Path) -> None:
    """A real full disk: a 512 KiB tmpfs in a private mount namespace, grown once the run
    has failed; the same command plus --resume then finishes the card."""
    mount = _mount_point_or_skip(tmp_path)
    frostgym = [sys.executable, "-c", "from frostgym.cli import main; main()"]
    args = ["eval", "--env", MATH, "--agent", "oracle", "--episodes", "100", "--samples", "4", "--seed", "0"]
    script = (
        f"mount -t tmpfs -o size=512k tmpfs {mount} && "
        f'{" ".join(frostgym[:2])} "$0" {" ".join(args)} --out {mount}/card; echo rc=$?; '
        f"mount -o remount,size=64m {mount} && "
        f'{" ".join(frostgym[:2])} "$0" {" ".join(args)} --out {mount}/card --resume; '
        f"echo rc=$?"
    )
    result = _in_mount_namespace(script, frostgym[2])
    output = _no_traceback(result)
    assert "No space left on device" in output, output
    assert "interrupted write" not in output and "cut short" not in output
    assert result.stdout.count("rc=") == 2 and "rc=2" in output and result.stdout.rstrip().endswith("rc=0"), output
    assert "No space left on device" in result.stderr  # the error line goes to stderr


def test_a_card_that_cannot_be_put_in_place_is_named_and_leaves_nothing(tmp_path: Path) -> None:
    """``create`` returns before its card is on disk: the writer's disk thread writes
    ``card.json`` and renames the card into place (``CardWriter._publish``). On a real full
    disk (a 64 KiB tmpfs, too small for the 2,000-entry plan) that fails there: the run
    stops with the error in one line, and neither a card nor its staging directory is left."""
    mount = _mount_point_or_skip(tmp_path)
    args = ["eval", "--env", MATH, "--agent", "oracle", "--episodes", "200", "--samples", "10", "--seed", "0"]
    script = (
        f"mount -t tmpfs -o size=64k tmpfs {mount} && "
        f'{sys.executable} -c "from frostgym.cli import main; main()" {" ".join(args)} --out {mount}/card; '
        f"echo rc=$?; ls -A {mount}; echo listed"
    )
    result = _in_mount_namespace(script)
    output = _no_traceback(result)
    assert "No space left on device" in result.stderr, output
    assert result.stdout.rstrip().endswith("rc=2\nlisted"), output  # nothing in the mount


# -- 11. a huge reply is stored as a bounded prefix ------------------------------------------------


def test_a_huge_reply_is_stored_as_prefix_length_and_hash(tmp_path: Path) -> None:
    huge = "<answer>" + "7" * 5_000_000 + "</answer>"
    out = tmp_path / "c"
    card = _run(out, FixedReply(huge, every=2))
    assert card["status"] == "complete"
    assert (out / "episodes.jsonl").stat().st_size < 1_000_000
    _, episodes, _ = load_card(out)
    long_steps = [s for e in episodes for s in e.steps if s.action_stored is not None]
    assert long_steps and all(s.grade is not None and s.grade["label"] == "too_long" for s in long_steps)
    for step in long_steps:
        assert step.action == huge[:STORED_ACTION_PREFIX] and not step.action_is_whole
        assert step.action_stored is not None and step.action_stored["chars"] == len(huge)
        assert step.action_stored["sha256"] == hashlib.sha256(huge.encode()).hexdigest()
    report = replay_card(out)
    assert report.ok and sum(e.not_replayable is not None for e in report.episodes) == len(long_steps)
    regraded = regrade_card(out, tmp_path / "regraded")
    assert regraded["compared"] == 6 - len(long_steps)


def test_record_problem_names_every_broken_shape(tmp_path: Path) -> None:
    """A real record passes; each breakage is named, a missing field before a mistyped one."""
    from frostgym.core.episode import record_problem

    _run(tmp_path / "c", OracleAgent(), episodes=1)
    good = orjson.loads((tmp_path / "c" / "episodes.jsonl").read_bytes().splitlines()[0])
    assert record_problem(good, "episode") is None
    broken: list[tuple[Any, str]] = [
        ([1, 2], "JSON array"),
        ({k: v for k, v in good.items() if k != "plan_id"}, "no 'plan_id'"),
        ({**good, "task_id": 7}, "'task_id' is a JSON number"),
        ({**good, "steps": {}}, "'steps' is a JSON object"),
        ({**good, "steps": [1]}, "step 0 is a JSON number"),
        ({**good, "steps": [{k: v for k, v in good["steps"][0].items() if k != "action"}]}, "step 0 has no 'action'"),
        ({**good, "steps": [{**good["steps"][0], "info": []}]}, "step 0 'info' is a JSON array"),
        ({**good, "steps": [{**good["steps"][0], "grade": "1"}]}, "step 0 grade is a JSON string"),
        ({**good, "grade": {**good["grade"], "components": []}}, "grade 'components' is a JSON array"),
        ({**good, "grade": {"score": 1}}, "grade has no"),
    ]
    for data, expected in broken:
        problem = record_problem(data, "episode")
        assert problem is not None and expected in problem, (expected, problem)
    assert "unknown drop class" in (
        record_problem({**good, "drop_class": "x", "counted_as": "failure", "stage": "step", "error": ""}, "drop") or ""
    )


# -- what the campaign's rerun found -------------------------------------------------------------


def test_cards_with_sanitized_actions_replay_identically(tmp_path: Path) -> None:
    _run(tmp_path / "m", FixedReply("<answer>\ud800 18</answer>", every=2))
    assert replay_card(tmp_path / "m").ok
    surrogate_call = {"tool_calls": [{"name": "run_sql", "arguments": {"query": "SELECT '\ud800'"}}]}
    _run(tmp_path / "s", FixedReply(surrogate_call), env_ids=["frostgym/SQL-v0"], episodes=2)
    _, episodes, _ = load_card(tmp_path / "s")
    assert all(e.steps[0].action_stored == {"kind": "structured", "sanitized": True} for e in episodes)
    assert replay_card(tmp_path / "s").ok


def test_a_huge_sql_answer_is_not_stored_whole_in_its_tool_calls(tmp_path: Path) -> None:
    huge = "<answer>SELECT " + "1 + " * 1_250_000 + "1</answer>"
    out = tmp_path / "c"
    _run(out, FixedReply(huge), env_ids=["frostgym/SQL-v0"], episodes=2)
    assert (out / "episodes.jsonl").stat().st_size < 500_000


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda card: card["files"]["episodes.jsonl"].pop("sha256"), "lacks its checksums"),
        (lambda card: card.pop("config"), "no config.identity"),
        (lambda card: card.clear(), "schema is None"),
    ],
)
def test_an_edited_manifest_is_named_in_one_line(tmp_path: Path, edit: Any, expected: str) -> None:
    out = tmp_path / "c"
    _run(out, OracleAgent())
    card = json.loads((out / "card.json").read_text())
    edit(card)
    (out / "card.json").write_text(json.dumps(card))
    for args in (["replay", str(out)], ["summary", str(out)]):
        result = _cli(*args)
        assert result.returncode == 2 and expected in _no_traceback(result)
    with pytest.raises(CardCorruptError, match=expected):
        _resume(out)


def _edit_plan_entry(out: Path) -> None:
    entries = orjson.loads((out / "plan.json").read_bytes())
    entries[0]["seed"] += 1
    (out / "plan.json").write_bytes(orjson.dumps(entries))


def _plan_hashed_in_card(out: Path, data: bytes) -> None:
    """``plan.json`` replaced, and ``card.json``'s plan hash edited to match it."""
    (out / "plan.json").write_bytes(data)
    card = json.loads((out / "card.json").read_text())
    card["plan"]["sha256"] = hashlib.sha256(data).hexdigest()
    (out / "card.json").write_text(json.dumps(card))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_edit_plan_entry, "does not match the plan's sha256"),
        (lambda out: (out / "plan.json").unlink(), "plan.json is missing"),
        (lambda out: (out / "plan.json").write_bytes(b"[]"), "does not match the plan's sha256"),
        (lambda out: _plan_hashed_in_card(out, b"[1, 2"), "plan.json is not JSON"),
        (lambda out: _plan_hashed_in_card(out, b"[]"), "does not hold the 6 entries card.json counts"),
    ],
)
def test_an_edited_or_missing_plan_file_is_named_in_one_line(tmp_path: Path, edit: Any, expected: str) -> None:
    """``plan.json`` is checked against the sha256 ``card.json`` recorded for it wherever a
    card is read: an edited plan would replay, resume and compare other episodes than the
    card's records were played from."""
    out = tmp_path / "c"
    _run(out, OracleAgent())
    edit(out)
    before = (out / "card.json").read_bytes()
    for args in (["replay", str(out)], ["summary", str(out)]):
        result = _cli(*args)
        assert result.returncode == 2 and expected in _no_traceback(result)
    with pytest.raises(CardCorruptError, match=expected):
        _resume(out)
    assert (out / "card.json").read_bytes() == before  # nothing re-blessed


def _as_card_3(out: Path) -> None:
    """Rewrite a card as ``frostgym.card/3`` writers left it: its plan entries inside
    ``card.json``, no ``plan.json``, no plan count."""
    card = json.loads((out / "card.json").read_text())
    card["schema"] = "frostgym.card/3"
    card["plan"] = {"sha256": card["plan"]["sha256"], "episodes": json.loads((out / "plan.json").read_text())}
    (out / "card.json").write_text(json.dumps(card, indent=2))
    (out / "plan.json").unlink()


@pytest.mark.parametrize("status", ["complete", "interrupted"])
def test_a_card_3_reads_the_same_and_resumes_as_card_4(tmp_path: Path, status: str) -> None:
    """Cards written before the plan had a file of its own read back with the same plan, and
    a resume finishes them as ``frostgym.card/4``: ``plan.json`` written from the plan (its
    sha256 the one the card recorded), the entries gone from ``card.json``."""
    out = tmp_path / "c"
    if status == "complete":
        _run(out, OracleAgent())
    else:
        with pytest.raises(KeyboardInterrupt):
            _run(out, OracleAgent(), on_outcome=_interrupt_after(2))
    current, episodes, drops = load_card(out)
    plan_bytes = (out / "plan.json").read_bytes()
    _as_card_3(out)
    old, old_episodes, old_drops = load_card(out)
    assert old["plan"]["episodes"] == current["plan"]["episodes"] and old["plan"]["count"] == 6
    assert (old_episodes, old_drops) == (episodes, drops)
    resumed = _resume(out)
    assert resumed["schema"] == "frostgym.card/4" and resumed["status"] == "complete"
    assert (out / "plan.json").read_bytes() == plan_bytes
    assert resumed == json.loads((out / "card.json").read_text())
    assert resumed["plan"] == {"sha256": current["plan"]["sha256"], "count": 6}
    assert read_card_json(out)["plan"]["episodes"] == current["plan"]["episodes"]


def _interrupt_after(outcomes: int) -> Any:
    seen: list[object] = []

    def count(outcome: object) -> None:
        seen.append(outcome)
        if len(seen) == outcomes:
            raise KeyboardInterrupt

    return count


def test_replay_refuses_a_duplicated_line(tmp_path: Path) -> None:
    out = tmp_path / "c"
    _run(out, OracleAgent())
    card = json.loads((out / "card.json").read_text())
    del card["files"]  # as a killed card has no checksums yet
    (out / "card.json").write_text(json.dumps(card))
    first = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)[0]
    with (out / "episodes.jsonl").open("ab") as f:
        f.write(first)
    with pytest.raises(CardCorruptError, match="recorded twice"):
        replay_card(out)


def test_options_an_env_does_not_take_are_a_usage_error(tmp_path: Path) -> None:
    args = ["eval", "--env", "frostgym/Tools-v0", "--split", "test", "--max-turns", "2", "--episodes", "1"]
    result = _cli(*args, "--out", str(tmp_path / "c"))
    assert result.returncode == 2 and "does not take" in _no_traceback(result)


@pytest.mark.slow
@pytest.mark.parametrize("read_back", [False, True])
def test_a_first_session_killed_mid_run_is_checked_against_its_journal(tmp_path: Path, read_back: bool) -> None:
    """Every fsync appends the files' checksums to the card's journal, so what a killed
    first session had synced is covered too: an edit or a removed line is refused. With a
    read-back process the journal leaves out each line's CRC, which that process keeps in
    the file's sidecar: the edited line is still named, and only a range of lines when the
    sidecar is gone too (the journal's sha256 refuses the edit either way)."""
    out = tmp_path / "c"
    script = (
        "import sys, time; from pathlib import Path; from frostgym.evaluate.run_to_card import run_to_card;"
        "import frostgym.cards.card as card_module;"
        "from tests.card_run_script import OPTIONS, SlowOracle, config\n"
        f"card_module.READBACK_MIN_EPISODES = {0 if read_back else 10**9}\n"
        "class Slower(SlowOracle):\n"
        "    def act(self, requests):\n"
        "        time.sleep(0.2)\n"
        "        return super().act(requests)\n"
        "run_to_card(Path(sys.argv[1]), Slower(), config(), OPTIONS)"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(out)], cwd=ROOT)
    journal = out / ".checkpoints.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (journal.exists() and journal.read_bytes().count(b"\n") >= 2):
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    _wait_for_read_back_to_end(out)  # it exits once its writer is gone; an edit before would be read as written
    entry = json.loads(journal.read_bytes().splitlines()[1])["episodes.jsonl"]
    synced = entry["lines"]
    assert synced >= 1 and (entry["line_crc32"] is None) == read_back
    sidecar = out / ".episodes.jsonl.crc32"
    assert sidecar.exists() == read_back
    pristine = (out / "episodes.jsonl").read_bytes()
    _edit_line(out / "episodes.jsonl", synced, b'"reward":', b'"reward":0.5,"x":')
    with pytest.raises(CardCorruptError, match=rf"episodes\.jsonl line {synced} differs"):
        run_to_card(out, SlowOracle(), config(), OPTIONS, resume=True)
    if read_back:
        sidecar.unlink()
        with pytest.raises(
            CardCorruptError, match=r"episodes\.jsonl differs from what the card recorded in a line from 1 to"
        ):
            run_to_card(out, SlowOracle(), config(), OPTIONS, resume=True)
    (out / "episodes.jsonl").write_bytes(b"".join(pristine.splitlines(keepends=True)[: synced - 1]))
    with pytest.raises(CardCorruptError, match="lines were removed"):
        run_to_card(out, SlowOracle(), config(), OPTIONS, resume=True)
    (out / "episodes.jsonl").write_bytes(pristine)
    card = run_to_card(out, SlowOracle(), config(), OPTIONS, resume=True)
    assert card["status"] == "complete" and not journal.exists() and not sidecar.exists()


def _wait_for_read_back_to_end(out: Path) -> None:
    """Wait until no read-back process of the card at ``out`` runs (their command lines name its card.json)."""
    marker = str(out / "card.json").encode()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = False
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                running |= proc.name.isdigit() and marker in (proc / "cmdline").read_bytes()
        if not running:
            return
        time.sleep(0.02)
    raise AssertionError("the read-back process outlived its writer")


# -- reading records back ------------------------------------------------------------------------


def test_records_read_back_typed_and_heads_from_the_first_fields(tmp_path: Path) -> None:
    """load_card's typed records write back to the very lines on disk; each line's head
    decodes from its first fields alone, and a line laid out otherwise (keys sorted, or a
    nested ``episode_id`` key before the top-level one) gives the same head, read whole."""
    out = tmp_path / "c"
    _run(out, FixedReply({"not": "text"}, every=3))  # some episodes drop (an unusable action)
    _, episodes, drops = load_card(out)
    assert episodes and drops
    files = {"episode": out / "episodes.jsonl", "drop": out / "drops.jsonl"}
    written = {kind: path.read_bytes().splitlines() for kind, path in files.items()}
    for record, line in [*zip(episodes, written["episode"], strict=True), *zip(drops, written["drop"], strict=True)]:
        kind: RecordKind = "episode" if isinstance(record, EpisodeRecord) else "drop"
        encoded = record.encode(dumps_line) if isinstance(record, EpisodeRecord) else dumps_line(record.to_json())
        assert encoded == line + b"\n"  # decoding lost nothing, and kept the field order
        if isinstance(record, EpisodeRecord):  # the final grade is stored once, and read back on the step too
            assert orjson.loads(line)["steps"][-1]["grade"] is None
            assert record.steps[-1].grade is record.grade is not None
        head = record.head()
        assert head_from_line(line, kind) == head
        prefix = orjson.loads(line[: line.find(b',"episode_id":')] + b"}")  # the fast path's cut
        assert RecordHead.from_json(prefix, kind) == head
        assert head_from_line(orjson.dumps(orjson.loads(line), option=orjson.OPT_SORT_KEYS), kind) == head
    first = orjson.loads(written["episode"][0])
    first["grade"]["details"] = {"episode_id": "nested", **first["grade"]["details"]}
    line = orjson.dumps(first)
    assert line.find(b',"episode_id":') < line.find(b'"observation"')  # the first match is nested
    assert head_from_line(line, "episode") == RecordHead.from_json(first, "episode")
    assert {d.drop.drop_class for d in drops} == {"agent_error"} and all(d.counted_as == "failure" for d in drops)


def test_the_final_grade_is_stored_once_and_card_2_and_echo_lines_read_the_same(
    tmp_path: Path,
) -> None:
    """frostgym.card/3 keeps an episode's final grade in its head only (the step that ended
    it holds null); a /2 line, with it stored twice, and a line whose delta says ``echo``
    instead of repeating the action as the assistant's message (as earlier /3 writers
    wrote) read back to the same record, and encoding leaves the record as it was, even
    when the encoder raises."""
    out = tmp_path / "c"
    _run(out, FixedReply({"not": "text"}, every=3))
    line = (out / "episodes.jsonl").read_bytes().splitlines()[0]
    data = orjson.loads(line)
    ending = data["steps"][-1]
    assert data["grade"] is not None and ending["grade"] is None
    assert ending["observation"]["new"][0] == {"role": "assistant", "content": ending["action"]}
    as_card_2 = orjson.loads(line)
    as_card_2["steps"][-1]["grade"] = as_card_2["grade"]
    echoed = orjson.loads(line)
    delta = echoed["steps"][-1]["observation"]
    delta["echo"] = delta["new"].pop(0)["role"]
    record = EpisodeRecord.from_json(data)
    assert EpisodeRecord.from_json(as_card_2) == record == EpisodeRecord.from_json(echoed)
    assert record.steps[-1].grade == data["grade"]
    assert record.encode(dumps_line) == line + b"\n"
    assert len(record.encode(dumps_line)) < len(dumps_line(record)) == len(dumps_line(as_card_2))

    def refuse(value: object) -> bytes:
        raise TypeError("no")

    before = dumps_line(record)
    with pytest.raises(TypeError):
        record.encode(refuse)
    assert record.steps[-1].grade is record.grade and dumps_line(record) == before


@pytest.mark.parametrize("line_crcs", [True, False])
def test_the_appender_writes_lines_of_any_size_through_its_reused_buffers(tmp_path: Path, line_crcs: bool) -> None:
    """Lines are copied into a buffer that is written whole and then reused: lines larger
    than the buffer, batches that fill it, and buffers handed back by the disk thread must
    all reach the file as appended, with the running checksums of what is there (and each
    line's CRC, unless a read-back process takes them: then the checkpoint says null)."""
    path = tmp_path / "x.jsonl"
    path.touch()
    disk = DiskThread()
    appender = JsonlAppender(path, disk=disk, line_crcs=line_crcs, buffer_bytes=1000)
    lines = [dumps_line({"n": n, "pad": "é" * (n * 37 % 1500)}) for n in range(200)]
    for start in range(0, len(lines), 7):
        for line in lines[start : start + 7]:
            appender.append_line(line)
        assert appender.pending_lines == len(lines[start : start + 7])
        appender.flush()
        assert appender.pending_lines == appender.pending_bytes == 0
    disk.submit(appender.sync)
    disk.wait()
    checkpoint = appender.checkpoint()
    disk.close()
    appender.close()
    data = path.read_bytes()
    assert data == b"".join(lines)
    assert appender.wrote() == {"bytes": len(data), "lines": len(lines), "sha256": hashlib.sha256(data).hexdigest()}
    crcs = read_jsonl(path).line_crc32
    assert checkpoint["line_crc32"] == (crcs if line_crcs else None)


def test_a_journal_entry_without_crcs_stands_for_its_lines_and_an_edited_one_is_refused() -> None:
    """A checkpoint written while a read-back process took the CRCs (``line_crc32`` null)
    counts its new lines as unknown, one placeholder each, so the lines after it keep their
    numbers; one whose line count is not a count past the last is refused, not a crash."""
    start = {"sha256": "a", "bytes": 0, "lines": 1, "line_crc32": "0000002a"}
    entries = [
        {"sha256": "b", "bytes": 10, "lines": 3, "line_crc32": None},
        {"sha256": "c", "bytes": 15, "lines": 4, "line_crc32": "0000002b"},
    ]
    chained = chain_checkpoints(start, entries, Path("j"))
    assert chained["line_crc32"] == "0000002a" + "?" * 16 + "0000002b" and chained["lines"] == 4
    for lines in ("3", 0, None, 2.5):
        with pytest.raises(CardCorruptError, match="entry 1 is not a checkpoint"):
            chain_checkpoints(start, [{**entries[0], "lines": lines}], Path("j"))
