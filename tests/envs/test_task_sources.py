"""Task sources of both kinds, their configs and their locks, on the shipped families."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import gymnasium
import pytest
from typer.testing import CliRunner

import frostgym
from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.core.errors import FixtureMismatchError, UnknownTaskError
from frostgym.core.fixture_lock import merge_lock, package_lock_file, read_lock, verified_fixture_sha256
from frostgym.core.splits import Split, split_of
from frostgym.core.tasks import Draft, ProceduralSource, TaskListSource
from frostgym.envs.math.arithmetic import ArithmeticConfig
from frostgym.envs.math.gsm import GSMConfig, _templates
from frostgym.envs.math.tasks import math_source
from frostgym.evaluate.replay import replay_card
from frostgym.run.plan import make_plan
from tests.conftest import make_env

ARITHMETIC = "frostgym/Arithmetic-v0"
SMALL = {"max_operand": 9}


def test_every_source_is_one_kind_and_no_fixed_list_fakes_a_generator() -> None:
    for entry in frostgym.ENTRIES:
        source = make_env(entry.id).source
        assert isinstance(source, ProceduralSource) != isinstance(source, TaskListSource), entry.id
        if isinstance(source, TaskListSource):
            assert not hasattr(source, "generate"), entry.id
            assert source.locked_splits == tuple(s for s in ("train", "dev", "test", "private") if source.size(s))


def test_the_default_config_changes_nothing() -> None:
    default = math_source("arithmetic")
    assert math_source("arithmetic", {}) is default is math_source("arithmetic", ArithmeticConfig())
    assert default.id_prefix == "arithmetic" and default.task("dev", 3).task_id == "arithmetic/dev/3"
    entry = read_lock(package_lock_file("math"))["arithmetic"]
    assert entry["config"] == {"min_operands": 3, "max_operands": 5, "max_operand": 99}
    assert make_env(ARITHMETIC).fixture_sha256 == entry["sha256"]["dev"]


def test_a_config_reaches_the_generator_and_tags_every_id() -> None:
    env = make_env(ARITHMETIC, task_config=SMALL)
    source = env.source
    assert re.fullmatch(r"arithmetic~[0-9a-f]{8}", source.id_prefix)
    assert source is math_source("arithmetic", ArithmeticConfig(max_operand=9))
    for task in [*source.tasks("dev"), source.task("train", 12345)]:
        assert task.task_id.startswith(f"{source.id_prefix}/") and task.source == "arithmetic"
        assert max(int(n) for n in re.findall(r"\d+", task.prompt)) <= 9
        if task.split != "train":  # split membership is by content, salted with the name alone
            assert split_of(task.prompt, salt="arithmetic", percent=source.split_percent) == task.split
    _, info = env.reset(seed=0)
    assert info["task_id"].startswith(source.id_prefix)
    with pytest.raises(UnknownTaskError, match="not from source"):  # a default id is not this config's
        env.reset(seed=0, options={"task_id": "arithmetic/dev/0"})


def test_the_config_is_part_of_every_seed() -> None:
    """A GSM config naming every vetted template, in order, draws like the default one;
    its tasks differ only because the config is hashed into their seeds."""
    every = GSMConfig(templates=_templates()[0])
    default, same_rules = math_source("gsm_symbolic"), math_source("gsm_symbolic", every)
    assert same_rules.id_prefix != default.id_prefix
    assert [t.prompt for t in same_rules.tasks("dev")][:20] != [t.prompt for t in default.tasks("dev")][:20]
    narrowed = math_source("gsm_symbolic", {"templates": [0, 1, 2]})  # JSON lists are fine
    assert {t.metadata["template"] for t in narrowed.tasks("dev")} <= {0, 1, 2}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max_operands2": 9}, r"unknown ArithmeticConfig keys \['max_operands2'\]; accepted: min_operands, "),
        ({"max_operand": "9"}, "max_operand must be an integer"),
        ({"min_operands": 4, "max_operands": 3}, "max_operands must be an integer in"),
        ([1, 2], "a mapping of its fields"),
    ],
)
def test_a_bad_config_is_refused_by_name(config: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gymnasium.make(ARITHMETIC, task_config=config)


def test_an_unlocked_config_is_hashed_and_a_locked_one_checked(tmp_path: Path) -> None:
    source = math_source("fraction_arithmetic", {"max_denominator": 5})
    lock = tmp_path / "lock.json"
    hashed = verified_fixture_sha256(lock, source)  # no lock at all: trusted, hashed once
    assert hashed == source.fingerprint(("dev",)) == verified_fixture_sha256(lock, source)
    merge_lock(lock, source)
    merge_lock(lock, math_source("fraction_arithmetic"))
    entries = read_lock(lock)
    assert set(entries) == {"fraction_arithmetic", source.id_prefix}
    assert entries[source.id_prefix]["config"]["max_denominator"] == 5
    entries[source.id_prefix]["sha256"]["dev"] = "0" * 64
    drifted = tmp_path / "drifted.json"
    drifted.write_text(json.dumps(entries))
    with pytest.raises(FixtureMismatchError, match="does not match its lock"):
        verified_fixture_sha256(drifted, source)
    with pytest.raises(FixtureMismatchError, match="no locked hash"):  # the default must be locked
        verified_fixture_sha256(tmp_path / "none.json", math_source("fraction_arithmetic"))


def test_a_plan_and_a_card_record_the_config(tmp_path: Path) -> None:
    plan = make_plan([ARITHMETIC], split="dev", episodes=4, samples=1, seed=0, env_kwargs={"task_config": SMALL})
    prefix = math_source("arithmetic", SMALL).id_prefix
    assert {p.task_id.split("/")[0] for p in plan} == {prefix}
    out = tmp_path / "card"
    args = ["eval", "--env", ARITHMETIC, "--episodes", "4", "--out", str(out), "--task-config", json.dumps(SMALL)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    card, episodes, _ = load_card(out)
    assert card["config"]["identity"]["env_kwargs"] == {"task_config": SMALL}
    assert {e.task_id.split("/")[0] for e in episodes} == {prefix}
    assert {e.fixture_sha256 for e in episodes} == {math_source("arithmetic", SMALL).fingerprint(("dev",))}
    assert replay_card(out).ok


@pytest.mark.parametrize(
    ("env_id", "config", "message"),
    [
        (ARITHMETIC, "{max_operand: 9}", "--task-config is not JSON"),
        (ARITHMETIC, "[9]", "must be a JSON object"),
        (ARITHMETIC, '{"digits": 9}', "unknown ArithmeticConfig keys"),
        ("frostgym/Code-v0", "{}", "does not take these options"),
    ],
)
def test_the_cli_refuses_a_bad_task_config(tmp_path: Path, env_id: str, config: str, message: str) -> None:
    result = CliRunner().invoke(
        app, ["eval", "--env", env_id, "--episodes", "1", "--out", str(tmp_path / "x"), "--task-config", config]
    )
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output


def test_list_shows_each_default_config() -> None:
    result = CliRunner().invoke(app, ["list", "--json"])
    rows = {row["id"]: row for row in json.loads(result.output)}
    assert rows[ARITHMETIC]["task_config"] == {"min_operands": 3, "max_operands": 5, "max_operand": 99}
    assert rows["frostgym/SQL-v0"]["task_config"] == {}  # a config whose fields were all added at their default
    assert rows["frostgym/Code-v0"]["task_config"] is None


# -- a fixed list with a generated train, from scratch -------------------------------------------


class _Numbers(ProceduralSource):
    name = "numbers"
    version = "1"
    difficulty = "easy"
    sizes = MappingProxyType({"train": None, "dev": 0, "test": 0, "private": 0})
    split_percent = MappingProxyType({"train": 100, "dev": 0, "test": 0, "private": 0})

    def generate(self, rng: random.Random) -> Draft:
        n = rng.randrange(40)
        return Draft(prompt=f"q{n}", answer=str(n))


class _Listed(TaskListSource):
    name = "numbers"
    version = "1"
    difficulty = "easy"
    split_percent = MappingProxyType({"train": 0, "dev": 50, "test": 50, "private": 0})

    def load(self) -> Mapping[Split, Sequence[Draft]]:
        return self.deal_by_content(Draft(prompt=f"q{n}", answer=str(n)) for n in range(0, 40, 2))

    def train_generator(self) -> ProceduralSource:
        return _Numbers()


def test_a_generated_train_never_serves_a_listed_task() -> None:
    source = _Listed()
    listed = {t.prompt for split in ("dev", "test") for t in source.tasks(split)}
    assert len(listed) == 20 and source.size("train") is None and source.locked_splits == ("dev", "test")
    train = [source.task("train", i) for i in range(200)]
    assert not {t.prompt for t in train} & listed and {t.prompt for t in train} <= {f"q{n}" for n in range(1, 40, 2)}
    assert source.task_by_id("numbers/train/7") == train[7]


def test_a_list_that_repeats_a_prompt_is_refused() -> None:
    class Twice(_Listed):
        def load(self) -> Mapping[Split, Sequence[Draft]]:
            return self.deal_by_content([Draft("same", "1"), Draft("same", "2")])

    with pytest.raises(ValueError, match="share a prompt"):
        Twice()
