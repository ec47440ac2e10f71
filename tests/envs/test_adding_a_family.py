"""A family kept outside the package, added the way README's "Adding a family" says
(``tests/family_example``: a tasks module with a procedural and a fixed-list source, an
env, registry entries, a lock its env names), locked with ``frostgym lock`` and then put
through every contract check the shipped ids get, and a runner evaluation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import pytest
from typer.testing import CliRunner

import tests.family_example as family
from frostgym.agents.oracle import OracleAgent
from frostgym.cli import app
from frostgym.core.errors import FixtureMismatchError
from frostgym.run.runner import RunOptions, evaluate
from tests.conftest import make_env

# The shipped ids' contract checks, collected here again: this module's ``env_id`` gives
# them the example family's ids.
from tests.envs.test_env_contract import (  # noqa: F401
    test_bad_reset_options_raise_clearly,
    test_check_env_passes,
    test_info_keys_and_grade,
    test_make_wraps_and_steps,
    test_reset_split_option,
    test_reset_task_id_option_gives_the_group_the_same_task,
    test_same_seed_same_episode_and_nearby_seeds_differ,
)
from tests.envs.test_oracle_and_splits import (  # noqa: F401
    test_locked_hashes_match,
    test_oracle_scores_one_on_every_dev_task,
    test_splits_are_disjoint_and_owned_by_content,
)
from tests.family_example import env as family_env

IDS = [e.id for e in family.ENTRIES]
DIGITS, ROMAN = IDS


@pytest.fixture(scope="module", autouse=True)
def lock_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The family's lock, written by ``frostgym lock --write --env`` into a temporary folder."""
    path = tmp_path_factory.mktemp("digits") / "lock.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(family_env, "LOCK_FILE", path)
        for env_id in IDS:
            result = CliRunner().invoke(app, ["lock", "--write", "--env", env_id])
            assert result.exit_code == 0, result.output
        yield path


@pytest.fixture(params=IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_lock_names_the_splits_it_hashes(lock_file: Path) -> None:
    lock = json.loads(lock_file.read_text())
    assert set(lock) == {"digit_sum", "roman"}
    assert set(lock["digit_sum"]["sha256"]) == {"dev"}  # a generator locks its dev split
    assert set(lock["roman"]["sha256"]) == {"train", "dev", "test", "private"}  # a list, every split
    assert lock["digit_sum"]["config"] == {"min_digits": 3, "max_digits": 9} and lock["roman"]["config"] == {}
    for env_id in IDS:
        result = CliRunner().invoke(app, ["lock", "--env", env_id])
        assert result.exit_code == 0 and ": ok" in result.output, result.output


def test_an_unlocked_or_drifted_family_is_refused(
    lock_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(family_env, "LOCK_FILE", tmp_path / "missing.json")
    with pytest.raises(FixtureMismatchError, match="no locked hash"):
        make_env(ROMAN).reset(seed=0)
    drifted = json.loads(lock_file.read_text())
    drifted["roman"]["sha256"]["test"] = "0" * 64
    (tmp_path / "drifted.json").write_text(json.dumps(drifted))
    monkeypatch.setattr(family_env, "LOCK_FILE", tmp_path / "drifted.json")
    with pytest.raises(FixtureMismatchError, match="does not match its lock"):
        make_env(ROMAN).reset(seed=0)


def test_the_oracle_scores_one_through_the_runner_and_runs_repeat() -> None:
    runs = [evaluate(IDS, OracleAgent(), episodes=12, samples=2, seed=7) for _ in range(2)]
    first, again = ([(e.task_id, e.seed, e.episode_id, e.task_sha256, e.reward) for e in r.episodes] for r in runs)
    assert first == again and len(first) == 48 and not runs[0].drops
    assert all(reward == 1.0 for *_, reward in first)
    fixture = {e.env_id: e.fixture_sha256 for e in runs[0].episodes}
    assert fixture == {env_id: make_env(env_id).fixture_sha256 for env_id in IDS}


def test_a_task_config_is_frozen_under_tagged_ids(lock_file: Path) -> None:
    config = {"min_digits": 12, "max_digits": 12}
    env = make_env(DIGITS, task_config=config)
    _, info = env.reset(seed=0)
    assert re.fullmatch(r"digit_sum~[0-9a-f]{8}/dev/\d+", info["task_id"])
    assert all(len(re.findall(r"\d{12}", t.prompt)) == 1 for t in env.source.tasks("dev"))
    # Not locked: hashed once in this process, and that is what the records carry.
    assert info["fixture_sha256"] == env.source.fingerprint(("dev",)) != make_env(DIGITS).fixture_sha256
    runner = CliRunner()
    result = runner.invoke(app, ["lock", "--write", "--env", DIGITS, "--task-config", json.dumps(config)])
    assert result.exit_code == 0, result.output
    entry = json.loads(lock_file.read_text())[env.source.id_prefix]
    assert entry["config"] == config and entry == env.source.lock_record()
    result = runner.invoke(app, ["lock", "--env", DIGITS])  # the default and every locked config
    assert result.exit_code == 0 and result.output.count(": ok") == 2, result.output
    sink = evaluate([DIGITS], OracleAgent(), episodes=5, options=RunOptions(env_kwargs={"task_config": config}))
    assert {e.task_id.split("/")[0] for e in sink.episodes} == {env.source.id_prefix}
    assert all(e.reward == 1.0 for e in sink.episodes)
    with pytest.raises(ValueError, match="takes no config"):
        gymnasium.make(ROMAN, task_config=config)
