"""The Ray backend gives the local backend's card: same plan, same episodes in the same
order, same grades, drops, accounting and views; only timings and host fields differ."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.cards.card import load_card
from frostgym.cards.run import card_config, run_to_card
from frostgym.cli import app
from frostgym.runner import RunOptions
from tests.card_equality import assert_same_card
from tests.faulty_env import FAULTY_ID
from tests.test_rollout_cards import _PartlyBroken

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'frostgym[ray]')")
from frostgym.integrations.ray_backend import RayEnvs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """One local Ray (2 CPUs) for the module; its workers can import ``tests``."""
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
        )
    except Exception as error:  # no shared memory, no sockets...
        pytest.skip(f"a local Ray could not start: {type(error).__name__}: {error}")
    try:
        yield
    finally:
        ray.shutdown()


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
