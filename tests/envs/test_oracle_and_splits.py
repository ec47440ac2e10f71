"""Oracle ceiling on every dev task; splits disjoint by construction; locked data."""

from __future__ import annotations

import itertools
import random

import pytest

from frostgym.core.errors import FixtureMismatchError
from frostgym.core.fixture_lock import package_lock_file, read_lock, verified_fixture_sha256
from frostgym.core.splits import ALL_SPLITS, split_of
from frostgym.core.tasks import Draft
from frostgym.envs.math.arithmetic import ArithmeticSource
from tests.conftest import make_env, play


def test_oracle_scores_one_on_every_dev_task(env_id: str) -> None:
    env = make_env(env_id)
    source = env.source
    if source.size("dev") == 0:
        pytest.skip(f"{env_id} serves one fixed benchmark split; its own tests grade every gold answer")
    scores = []
    for task in source.tasks("dev"):
        env.reset(seed=0, options={"task_id": task.task_id})
        reward, info = play(env, env.oracle_action)
        scores.append(reward)
        assert reward == 1.0, (task.task_id, task.prompt, task.answer, info["grade"])
    assert len(scores) == source.size("dev") and len(scores) >= 20


def test_splits_are_disjoint_and_owned_by_content(env_id: str) -> None:
    source = make_env(env_id).source
    if source.size("dev") == 0:
        pytest.skip(f"{env_id} serves one fixed benchmark split; its own tests grade every gold answer")
    prompts = {split: {t.prompt for t in source.tasks(split)} for split in ("dev", "test", "private")}
    for split, texts in prompts.items():
        assert len(texts) == source.size(split), f"duplicates inside {split}"
    for a, b in itertools.combinations(prompts, 2):
        assert not prompts[a] & prompts[b], f"{a} and {b} share tasks"
    rng = random.Random(0)
    if source.size("train") is None:  # unbounded: a sample of it
        train = [source.task("train", rng.randrange(2**62)) for _ in range(300)]
    else:  # a fixed list, or none (a task set recorded once)
        train = list(source.tasks("train"))
    eval_prompts = set().union(*prompts.values())
    assert not {t.prompt for t in train} & eval_prompts
    for task in itertools.chain(train, source.tasks("dev")):
        if task.split != "train":  # train may be owned by another rule (e.g. SQL templates)
            assert split_of(task.prompt, salt=source.name, percent=source.split_percent) == task.split


def test_private_split_is_not_listed() -> None:
    from typer.testing import CliRunner

    from frostgym.cli import app

    result = CliRunner().invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    assert "private" not in result.output
    assert "dev" in result.output
    assert set(ALL_SPLITS) - {"private"} == {"train", "dev", "test"}


def test_locked_hashes_match(env_id: str) -> None:
    env = make_env(env_id)
    entry = read_lock(env.lock_file)[env.source.id_prefix]
    assert entry == env.source.lock_record()
    # The entry says which splits it hashes: every one the source locks, none other.
    assert set(entry["sha256"]) == set(env.source.locked_splits) != set()
    assert all(env.source.size(split) for split in entry["sha256"])


class _DriftedArithmetic(ArithmeticSource):
    """Same name, different content: what an upgraded dependency would look like."""

    def generate(self, rng: random.Random) -> Draft:
        draft = super().generate(rng)
        return Draft(prompt=draft.prompt + " (v2)", answer=draft.answer, solution=draft.solution)


def test_drifted_task_data_is_refused() -> None:
    with pytest.raises(FixtureMismatchError, match="does not match its lock"):
        verified_fixture_sha256(package_lock_file("math"), _DriftedArithmetic())
