"""The Ray backend gives the local backend's card: same plan, same episodes in the same
order, same grades, drops, accounting and views; only timings and host fields differ.

And it leaves the machine as it found it, and stops cleanly: the local Ray it starts stays
on 127.0.0.1 and writes no token into the user's home (where a later ``ray start`` would
pick it up and refuse every driver without it), a cluster that refuses the driver's token
says so in one line naming the token sent, and a cluster lost mid-run interrupts the run
(resumable) instead of dropping the rest of the plan. Those tests run a real
``ray start --head`` cluster on loopback, a subprocess in its own session with its own
temporary directory, killed with its whole process group."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions
from tests.card_equality import assert_same_card
from tests.cards.test_rollout_cards import _PartlyBroken
from tests.cli_process import kill_backend_mid_run
from tests.faulty_env import FAULTY_ID

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'frostgym[ray]')")
from frostgym.run.ray_backend import LocalRay, RayEnvs  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")  # the venv's ray command, beside its python
LOOPBACK = "127.0.0.1"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """One local Ray (2 CPUs, loopback only, its own token) for the module; its workers can
    import ``tests``."""
    local = LocalRay(num_cpus=2, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        local.start()
    except Exception as error:  # no shared memory, no sockets...
        pytest.skip(f"a local Ray could not start: {type(error).__name__}: {error}")
    try:
        yield
    finally:
        local.stop()


@pytest.fixture
def ray_envs(ray_cluster: None) -> Iterator[RayEnvs]:
    """Two env worker actors (one per CPU), which also know the faulty test env."""
    with RayEnvs.start(imports=["tests.faulty_env"]) as envs:
        yield envs


@pytest.mark.parametrize("agent", ["oracle", "random"])
def test_cli_ray_card_equals_local_card(tmp_path: Path, ray_cluster: None, agent: str) -> None:
    # The CLI joins the Ray the fixture started (ray.init is already done in this process).
    common = ["eval", "--env", "frostgym/Math-v0,frostgym/SQL-v0", "--agent", agent]
    common += ["--episodes", "6", "--samples", "2", "--batch-size", "5", "--workers", "2"]
    runner = CliRunner()
    local = runner.invoke(app, [*common, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    remote = runner.invoke(app, [*common, "--out", str(tmp_path / "ray"), "--backend", "ray"])
    assert remote.exit_code == 0, remote.output
    assert_same_card(tmp_path / "local", tmp_path / "ray")
    card, episodes, _ = load_card(tmp_path / "ray")
    assert card["status"] == "complete" and card["accounting"]["balanced"] and len(episodes) == 24
    if agent == "oracle":
        assert all(e.grade is not None and e.grade["score"] == 1.0 for e in episodes)


@pytest.mark.parametrize(
    "options", [{"workers": 2, "retries": 1}, {"retries": 0}, {"max_drops": 3}], ids=["retry", "no-retry", "cancel"]
)
def test_drops_retries_and_cancels_equal_over_ray(tmp_path: Path, ray_envs: RayEnvs, options: dict[str, Any]) -> None:
    """Agent errors, a failing agent batch, grader bugs and sandbox kills inside the actors:
    the same drop classes, stages, attempts and order as in process."""
    run_options = RunOptions(batch_size=6, **options)
    cfg = card_config(
        env_ids=[FAULTY_ID], agent_spec="test", sampling={}, episodes=21, samples=1, seed=1, options=run_options
    )
    run_to_card(tmp_path / "local", _PartlyBroken(), cfg, run_options)
    run_to_card(tmp_path / "ray", _PartlyBroken(), cfg, run_options, envs=ray_envs)
    assert_same_card(tmp_path / "local", tmp_path / "ray")
    _, _, drops = load_card(tmp_path / "ray")
    classes = {d.drop.drop_class for d in drops}
    assert {"agent_error", "grader_error", "sandbox_timeout"} <= classes
    remote_env_drops = [d for d in drops if d.drop.stage == "step"]
    assert remote_env_drops and all("ray env worker" in (d.traceback or "") for d in remote_env_drops)


def test_episodes_go_to_actors_round_robin(ray_envs: RayEnvs) -> None:
    made = [ray_envs.make_env("frostgym/Math-v0", "dev", {}) for _ in range(2 * len(ray_envs.actors))]
    try:
        slots = [env.slot for env in made]
        assert [ray_envs.actors.index(env.actor) for env in made] == [s % len(ray_envs.actors) for s in slots]
        observation, info = made[0].reset(seed=3, options={"task_id": None})
        assert observation and made[0].turn == 0 and info["turn"] == 0
    finally:
        for env in made:
            env.close()


# -- the local Ray, a separately started cluster, a refused token, a lost cluster --------------


def test_the_local_ray_is_on_loopback_with_a_token_outside_home(ray_cluster: None) -> None:
    gcs = ray.get_runtime_context().gcs_address
    nodes = [node["NodeManagerAddress"] for node in ray.nodes()]
    assert gcs.rpartition(":")[0] == LOOPBACK and nodes == [LOOPBACK], (gcs, nodes)
    assert os.environ["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" not in os.environ
    token = Path(os.environ["RAY_AUTH_TOKEN_PATH"])
    assert token.is_file() and Path.home() not in token.parents, token
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and stat.S_IMODE(token.parent.stat().st_mode) == 0o700


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _environment(home: Path, **settings: str) -> dict[str, str]:
    """This process's environment without its Ray settings (the module's local Ray set some),
    with ``home`` as HOME, Ray's one-machine switch at 0 (Ray then keeps 127.0.0.1 as the
    node's address, instead of the machine's interface address) and ``settings``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_")}
    return {**env, "HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **settings}


class RayHead:
    """``ray start --head --block`` on 127.0.0.1 (a free port, 2 CPUs, a temporary directory,
    no dashboard) in its own session; ``stop`` kills the session's process group, so every
    Ray process of it (GCS, raylet, workers) dies at once, as in a crash of the machine."""

    def __init__(self, home: Path, **settings: str) -> None:
        if not RAY.exists():
            pytest.skip(f"no ray command at {RAY}")
        self.port = _free_port()
        self.address = f"{LOOPBACK}:{self.port}"
        self.env = _environment(home, **settings)
        self.temp = Path(tempfile.mkdtemp(prefix="fg-ray-"))  # short: Ray's socket paths must stay < 108 bytes
        command = [str(RAY), "start", "--head", "--block", "--port", str(self.port), "--node-ip-address", LOOPBACK]
        command += ["--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats"]
        command += ["--temp-dir", str(self.temp)]
        self.log = self.temp / "ray-start.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ray start did not come up:\n{self.log.read_text(errors='replace')}")
            time.sleep(0.2)

    def addresses(self) -> dict[str, Any]:
        """What a driver with the same settings sees: the GCS address, every node's address,
        its own node address."""
        script = (
            "import json, sys, ray; ray.init(address=sys.argv[1], log_to_driver=False); "
            "print(json.dumps({'gcs': ray.get_runtime_context().gcs_address, "
            "'nodes': [n['NodeManagerAddress'] for n in ray.nodes()], 'driver': ray.util.get_node_ip_address()}))"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, self.address], env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)
        subprocess.run(["rm", "-rf", str(self.temp)], check=False)


def _eval(out: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "frostgym.cli", "eval", "--env", "frostgym/Arithmetic-v0", "--out", str(out)]
    return subprocess.run([*command, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_local_ray_run_leaves_no_token_so_a_cluster_started_later_accepts_the_driver(tmp_path: Path) -> None:
    """The README's one-machine recipe after a local-Ray eval: ``ray start --head`` turns
    token authentication on when it finds ``~/.ray/auth_token``, and then refuses a driver
    that joins by address without that token; so the local Ray must not write one."""
    home = tmp_path / "home"
    home.mkdir()
    local = _eval(tmp_path / "local", _environment(home), "--episodes", "4", "--backend", "ray")
    assert local.returncode == 0, local.stdout + local.stderr
    assert not (home / ".ray").exists(), sorted(str(p) for p in home.rglob("*"))
    head = RayHead(home)
    try:
        seen = head.addresses()
        assert seen == {"gcs": head.address, "nodes": [LOOPBACK], "driver": LOOPBACK}, seen
        joined = _eval(tmp_path / "joined", head.env, "--episodes", "4", "--backend", "ray", "--address", head.address)
    finally:
        head.stop()
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert "InvalidAuthToken" not in joined.stdout + joined.stderr
    card, episodes, _ = load_card(tmp_path / "joined")
    assert card["status"] == "complete" and len(episodes) == 4
    assert not (home / ".ray").exists()


def test_a_refused_ray_token_is_one_line_naming_the_token_sent(tmp_path: Path) -> None:
    """A cluster with token authentication and a driver without its token: one line naming
    what the driver sent (never a token) and where the cluster's token goes, exit 2, at
    once (Ray's own join retries for 20 s, then says only "Failed to connect"); with the
    token the line points to, the same command runs."""
    home = tmp_path / "home"
    home.mkdir()
    cluster_token, wrong_token = "c" * 64, "w" * 64
    head = RayHead(home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=cluster_token)
    wrong, right = tmp_path / "wrong_token", tmp_path / "cluster_token"
    wrong.write_text(wrong_token)
    right.write_text(cluster_token)
    join = ["--episodes", "2", "--backend", "ray", "--address", head.address]
    try:
        none_sent = _eval(tmp_path / "a", _environment(home), *join)
        wrong_sent = _eval(
            tmp_path / "b", _environment(home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(wrong)), *join
        )
        right_sent = _eval(
            tmp_path / "c", _environment(home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(right)), *join
        )
    finally:
        head.stop()
    for refused, names in ((none_sent, "RAY_AUTH_MODE is unset"), (wrong_sent, f"the token in {wrong}")):
        output = refused.stdout + refused.stderr
        assert refused.returncode == 2, output
        lines = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "Traceback" not in output, output
        assert f"the Ray cluster at {head.address} refused this driver's token" in lines[0], lines[0]
        assert names in lines[0] and "RAY_AUTH_TOKEN_PATH" in lines[0] and "--backend ray" in lines[0], lines[0]
        assert cluster_token not in output and wrong_token not in output
        assert output.count("InvalidAuthToken") <= 2, output  # one probe, not Ray's 20 retries
        assert "Failed to connect" not in output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert right_sent.returncode == 0, right_sent.stdout + right_sent.stderr
    assert load_card(tmp_path / "c")[0]["status"] == "complete"


def test_a_lost_ray_cluster_interrupts_the_run_and_resume_finishes_it(tmp_path: Path) -> None:
    """Every process of the cluster killed mid-run: the eval stops with one line naming the
    backend and --resume (exit 2), the card is ``interrupted`` with no episode charged an
    ``infra_error``, and ``--resume`` against a fresh cluster finishes the plan."""
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "card"
    plan = ["--agent", "oracle", "--all", "--samples", "10", "--backend", "ray"]  # 2000 episodes
    head = RayHead(home)
    command = [sys.executable, "-m", "frostgym.cli", "eval", "--env", "frostgym/Arithmetic-v0", "--out", str(out)]
    try:
        returncode, output, stopped_after = kill_backend_mid_run(
            [*command, *plan, "--address", head.address], out, head.stop, env=head.env
        )
    finally:
        head.stop()
    assert returncode == 2, output
    assert "Traceback" not in output, output
    lost = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lost) == 1 and "--backend ray" in lost[0] and "--resume" in lost[0], output
    assert f"the Ray cluster at {head.address}" in lost[0] and "is lost" in lost[0], lost[0]
    assert stopped_after < 120, stopped_after  # about 11 s here; Ray ends a driver 60 s after its GCS went
    card = json.loads((out / "card.json").read_text())
    assert card["status"] == "interrupted", card["status"]
    _, played, drops = load_card(out)
    assert not drops, drops[:3]
    assert 0 < len(played) < 2000

    again = RayHead(home)
    try:
        resumed = subprocess.run(
            [*command, *plan, "--address", again.address, "--resume"],
            cwd=ROOT,
            env=again.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        again.stop()
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    card, finished, drops_after = load_card(out)
    assert card["status"] == "complete" and len(finished) == 2000 and not drops_after


def test_one_dead_actor_is_an_episode_error_and_every_actor_dead_a_lost_cluster(ray_cluster: None) -> None:
    """A dead actor while others live is that episode's problem (a Ray error the runner files
    as ``infra_error``); once every actor is dead, nothing can run: ``BackendLostError``, for
    that call and every later one, and the envs' close sends nothing more."""
    from frostgym.core.errors import BackendLostError

    envs = RayEnvs.start(actors=2)
    try:
        first, second = envs.make_env("frostgym/Math-v0", "dev", {}), envs.make_env("frostgym/Math-v0", "dev", {})
        assert first.actor is not second.actor
        ray.kill(first.actor, no_restart=True)
        with pytest.raises(ray.exceptions.RayActorError):
            first.reset(seed=1, options={"task_id": None})
        assert envs.lost is None
        second.reset(seed=2, options={"task_id": None})
        ray.kill(second.actor, no_restart=True)
        with pytest.raises(
            BackendLostError, match=r"\(--backend ray\) is lost: all 2 of its env worker actors are dead"
        ):
            second.step("<answer>1</answer>")
        with pytest.raises(BackendLostError):
            envs.make_env("frostgym/Math-v0", "dev", {})
        second.close()
    finally:
        envs.close()
    assert ray.is_initialized()  # the module's Ray is not this backend's to stop
