"""``frostgym eval --backend remote``: the envs live on a ``frostgym serve`` server, the agent
stays in the runner; the card equals the local backend's except timings and hosts, and
``frostgym replay`` passes on it locally. Drops (agent errors, grader bugs, sandbox kills)
cross the wire as themselves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gymnasium
import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'frostgym[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed (pip install 'frostgym[serve]')")
pytest.importorskip("websockets", reason="the serve extra is not installed (pip install 'frostgym[serve]')")

from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.remote_backend import RemoteEnvs
from frostgym.run.runner import RunOptions
from frostgym.serve.config import ServeConfig
from frostgym.serve.server import ServerThread
from tests.card_equality import assert_same_card
from tests.cards.test_rollout_cards import _PartlyBroken
from tests.faulty_env import FAULTY_ID

pytestmark = pytest.mark.slow

PLAN = "frostgym/Arithmetic-v0,frostgym/ToolsHTTP-v0"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    ids = ("frostgym/Arithmetic-v0", "frostgym/ToolsHTTP-v0", "frostgym/SQL-v0", FAULTY_ID)
    with ServerThread(ServeConfig(port=0, allow_oracle=True, env_ids=ids)) as running:
        yield running


@pytest.mark.parametrize("agent", ["oracle", "random"])
def test_cli_remote_card_equals_local_card_and_replays(tmp_path: Path, server: ServerThread, agent: str) -> None:
    common = ["eval", "--env", PLAN, "--agent", agent, "--episodes", "4", "--batch-size", "3", "--workers", "2"]
    runner = CliRunner()
    local = runner.invoke(app, [*common, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    remote = runner.invoke(
        app, [*common, "--out", str(tmp_path / "remote"), "--backend", "remote", "--address", server.url]
    )
    assert remote.exit_code == 0, remote.output
    assert_same_card(tmp_path / "local", tmp_path / "remote")
    card, episodes, _ = load_card(tmp_path / "remote")
    assert card["status"] == "complete" and card["accounting"]["balanced"] and len(episodes) == 8
    if agent == "oracle":
        assert all(e.grade is not None and e.grade["score"] == 1.0 for e in episodes)
    replay = runner.invoke(app, ["replay", str(tmp_path / "remote")])
    assert replay.exit_code == 0, replay.output


def test_env_arguments_and_levels_reach_the_server(tmp_path: Path, server: ServerThread) -> None:
    common = ["eval", "--env", "frostgym/Arithmetic-v0[level=1],frostgym/SQL-v0[max_turns=2]", "--agent", "random"]
    common += ["--episodes", "3", "--split", "test"]
    runner = CliRunner()
    assert runner.invoke(app, [*common, "--out", str(tmp_path / "local")]).exit_code == 0
    remote = runner.invoke(
        app, [*common, "--out", str(tmp_path / "remote"), "--backend", "remote", "--address", server.url]
    )
    assert remote.exit_code == 0, remote.output
    assert_same_card(tmp_path / "local", tmp_path / "remote")


def test_drops_equal_over_the_wire(tmp_path: Path, server: ServerThread) -> None:
    """Agent errors, a failing agent batch, grader bugs and sandbox kills in the server's envs:
    the same drop classes, stages, messages, attempts and order as in process."""
    options = RunOptions(batch_size=6, workers=2, retries=1)
    cfg = card_config(
        env_ids=[FAULTY_ID], agent_spec="test", sampling={}, episodes=14, samples=1, seed=1, options=options
    )
    run_to_card(tmp_path / "local", _PartlyBroken(), cfg, options)
    with RemoteEnvs.connect(server.url, [FAULTY_ID]) as envs:
        run_to_card(tmp_path / "remote", _PartlyBroken(), cfg, options, envs=envs)
    assert_same_card(tmp_path / "local", tmp_path / "remote")
    _, _, drops = load_card(tmp_path / "remote")
    assert {"agent_error", "grader_error", "sandbox_timeout"} <= {d.drop.drop_class for d in drops}
    assert server.server.config.app.app.state.sessions.in_use == 0, "every session the run opened was closed"


def test_remote_backend_refuses_what_cannot_give_the_local_card(tmp_path: Path) -> None:
    runner = CliRunner()
    out = ["--out", str(tmp_path / "c")]
    no_address = runner.invoke(app, ["eval", "--env", "frostgym/Arithmetic-v0", "--backend", "remote", *out])
    assert no_address.exit_code != 0 and "--address" in no_address.output
    with ServerThread(ServeConfig(port=0, env_ids=("frostgym/Arithmetic-v0",))) as guarded:
        hidden = runner.invoke(
            app, ["eval", "--env", "frostgym/Arithmetic-v0", "--backend", "remote", "--address", guarded.url, *out]
        )
        assert hidden.exit_code != 0 and "--allow-oracle" in hidden.output
        with pytest.raises(ValueError, match="does not serve"):
            RemoteEnvs.connect(guarded.url, ["frostgym/SQL-v0"])
    gone = runner.invoke(
        app, ["eval", "--env", "frostgym/Arithmetic-v0", "--backend", "remote", "--address", guarded.url, *out]
    )
    assert gone.exit_code != 0 and "cannot reach" in gone.output
    assert not (tmp_path / "c").exists()


def test_remote_envs_in_a_vector_env_equal_local_ones(server: ServerThread) -> None:
    from frostgym.serve.remote import make
    from frostgym.train.vector import FrozenSyncVectorEnv

    env_id = "frostgym/Arithmetic-v0"
    remote = FrozenSyncVectorEnv([lambda: make(server.url, env_id) for _ in range(3)])
    local = FrozenSyncVectorEnv([lambda: gymnasium.make(env_id) for _ in range(3)])
    try:
        remote_first, local_first = remote.reset(seed=5), local.reset(seed=5)
        assert remote_first[0] == local_first[0]
        assert list(remote_first[1]["episode_id"]) == list(local_first[1]["episode_id"])
        actions = ("<answer>1</answer>", "2", "<answer>-3</answer>")
        remote_step, local_step = remote.step(actions), local.step(actions)
        assert remote_step[0] == local_step[0]
        assert list(remote_step[1]) == list(local_step[1]) and list(remote_step[2]) == list(local_step[2])
    finally:
        remote.close()
        local.close()


def test_a_killed_server_interrupts_the_run_and_resume_finishes_it(tmp_path: Path) -> None:
    """SIGKILL of ``frostgym serve`` during ``frostgym eval --backend remote``: the eval stops
    with one line naming the backend (exit 2), the card is ``interrupted`` with no episode
    charged an ``infra_error``, and ``--resume`` against a restarted server finishes the plan."""
    import json
    import signal
    import subprocess
    import sys

    from tests.cli_process import kill_backend_mid_run
    from tests.serve.test_serve_faults import ROOT, Served

    served = Served("--env", "frostgym/Arithmetic-v0", "--allow-oracle", "--log-level", "warning")
    out = tmp_path / "card"
    command = [sys.executable, "-m", "frostgym.cli", "eval", "--env", "frostgym/Arithmetic-v0", "--agent", "oracle"]
    command += ["--all", "--samples", "15", "--backend", "remote", "--address", served.url, "--out", str(out)]
    try:
        returncode, output, stopped_after = kill_backend_mid_run(
            command, out, lambda: served.process.send_signal(signal.SIGKILL), started_bytes=200_000, timeout=120
        )
    finally:
        served.stop()
    assert returncode == 2, output
    assert "Traceback" not in output, output
    lost = [line for line in output.splitlines() if "unreachable" in line]
    assert len(lost) == 1 and "--backend remote" in lost[0] and "--resume" in lost[0], output
    assert stopped_after < 60, "the run stopped soon after the server was lost"
    card = json.loads((out / "card.json").read_text())
    assert card["status"] == "interrupted", card["status"]
    drops = [json.loads(line) for line in (out / "drops.jsonl").read_text().splitlines() if line.strip()]
    assert not [d for d in drops if d["drop"]["drop_class"] == "infra_error"], drops[:3]

    restarted = Served("--env", "frostgym/Arithmetic-v0", "--allow-oracle", "--log-level", "warning", port=served.port)
    try:
        resumed = subprocess.run([*command, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        restarted.stop()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    card, finished, drops_after = load_card(out)
    assert card["status"] == "complete" and len(finished) == 3000 and not drops_after
