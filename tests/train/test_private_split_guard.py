"""The private split's guard (``frostgym.train.session.check_training_split``): every training
helper refuses ``private`` with ``PrivateSplitError`` unless called with ``allow_private=True``,
and accepts it then; adapter rows made with the opt-in carry it, so the trainer's envs play them
and no other private row. ``frostgym eval --split private`` is not training and stays allowed;
an eval that declares its model trained on private (``--trained-on-private``) says so in the
card, and ``summary`` and ``compare`` warn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.core.errors import FrostgymError, PrivateSplitError
from frostgym.train.curriculum import CurriculumConfig, CurriculumSampler
from frostgym.train.session import TaskRow, TrainingEpisode, check_training_split, task_rows

ARITH = "frostgym/Arithmetic-v0"
ROOT = Path(__file__).resolve().parents[2]


def _private_rows(n: int = 2) -> list[TaskRow]:
    return task_rows(ARITH, split="private", n=n, seed=0, allow_private=True)


# -- the rule ------------------------------------------------------------------------------


def test_the_rule_refuses_private_alone_or_among_splits_and_says_why_and_how() -> None:
    for split in ("train", "dev", "test", "train,dev,test"):
        check_training_split(split)
    for split in ("private", "test,private", "train, private"):
        with pytest.raises(PrivateSplitError) as refused:
            check_training_split(split)
        check_training_split(split, allow_private=True)
    message = str(refused.value)
    assert "contamination" in message and "allow_private=True" in message and "--trained-on-private" in message
    assert isinstance(refused.value, FrostgymError) and isinstance(refused.value, ValueError)


# -- every helper: refused by default, accepted with allow_private=True ----------------------


def _task_rows(allow: bool) -> Any:
    rows = task_rows(ARITH, split="private", n=2, seed=0, allow_private=allow)
    assert {row.split for row in rows} == {"private"}


def _episode(allow: bool) -> Any:
    episode = TrainingEpisode(ARITH, "private", allow_private=allow)
    try:
        row = _private_rows(1)[0]
        assert episode.start(row.task_id, row.episode_seed)
    finally:
        episode.close()


def _episode_started_on_private(allow: bool) -> Any:
    episode = TrainingEpisode(ARITH, "train", allow_private=allow)
    try:
        row = _private_rows(1)[0]
        assert episode.start(row.task_id, row.episode_seed, "private")
    finally:
        episode.close()


def _env_dataset(allow: bool) -> Any:
    from frostgym.train.trl import env_dataset

    data = env_dataset(ARITH, split="private", n=2, seed=0, allow_private=allow)
    assert data["split"] == ["private", "private"]


def _rows_dataset(allow: bool) -> Any:
    from frostgym.train.trl import rows_dataset

    assert len(rows_dataset(_private_rows(), allow_private=allow)) == 2


def _curriculum(allow: bool) -> Any:
    from frostgym.train.trl import curriculum_dataset

    sampler = CurriculumSampler(ARITH, CurriculumConfig((1, 2), 1), seed=0, split="private", allow_private=allow)
    try:
        row = next(iter(curriculum_dataset(sampler, batch=1)))
        assert row["split"] == "private"
    finally:
        sampler.close()


def _reward_functions(allow: bool) -> Any:
    from frostgym.train.trl import reward_functions

    row = _private_rows(1)[0]
    score = reward_functions(ARITH, allow_private=allow)[-1]
    kwargs = {"task_id": [row.task_id], "episode_seed": [row.episode_seed], "split": ["private"]}
    assert score(prompts=[[]], completions=["no answer"], **kwargs) == [0.0]


def _environment_factory(allow: bool) -> Any:
    from frostgym.train.trl import environment_factory

    (row,) = task_rows("frostgym/SQL-v0", split="private", n=1, seed=0, allow_private=True)
    env = environment_factory("frostgym/SQL-v0", allow_private=allow)()
    env.reset(task_id=row.task_id, episode_seed=row.episode_seed, split="private")
    assert env.episode is not None and env.episode.env.task.split == "private"


def _vector_env(allow: bool) -> Any:
    from frostgym.train.vector import make_vector_env

    make_vector_env(ARITH, 1, split="private", allow_private=allow).close()


def _group_reset(allow: bool) -> Any:
    from frostgym.train.vector import group_reset, make_vector_env

    envs = make_vector_env(ARITH, 2, split="dev")
    try:
        group = group_reset(envs, seed=0, split="private", allow_private=allow)
        assert group.infos["split"][0] == "private"
    finally:
        envs.close()


def _verifiers(allow: bool) -> Any:
    pytest.importorskip("verifiers", reason="verifiers is not installed (make install installs it)")
    from frostgym.integrations.verifiers import load_environment

    env = load_environment(ARITH, split="private", n=2, seed=0, allow_private=allow)
    infos = [task.data.info for task in env.taskset]
    assert [(i["split"], i["allow_private"]) for i in infos] == [("private", True)] * 2
    env.give_back(env.borrow(infos[0]))  # the env plays the rows it marked


def _skyrl_rows(allow: bool) -> Any:
    pytest.importorskip("skyrl_gym", reason="skyrl-gym is not installed (make install installs it)")
    from frostgym.integrations.skyrl_gym import skyrl_rows

    rows = skyrl_rows(ARITH, split="private", n=2, seed=0, allow_private=allow)
    assert [r["extra_info"]["allow_private"] for r in rows] == [True, True]


def _skyrl_row(allow: bool) -> Any:
    pytest.importorskip("skyrl_gym", reason="skyrl-gym is not installed (make install installs it)")
    from frostgym.integrations.skyrl_gym import skyrl_row

    assert skyrl_row(_private_rows(1)[0], allow_private=allow)["extra_info"]["split"] == "private"


HELPERS: dict[str, Callable[[bool], Any]] = {
    "task_rows": _task_rows,
    "TrainingEpisode": _episode,
    "TrainingEpisode.start": _episode_started_on_private,
    "env_dataset": _env_dataset,
    "rows_dataset": _rows_dataset,
    "curriculum": _curriculum,
    "reward_functions": _reward_functions,
    "environment_factory": _environment_factory,
    "make_vector_env": _vector_env,
    "group_reset": _group_reset,
    "verifiers.load_environment": _verifiers,
    "skyrl_rows": _skyrl_rows,
    "skyrl_row": _skyrl_row,
}


@pytest.mark.parametrize("helper", list(HELPERS))
def test_each_helper_refuses_private_by_default(helper: str) -> None:
    with pytest.raises(PrivateSplitError, match="allow_private=True"):
        HELPERS[helper](False)


@pytest.mark.parametrize("helper", list(HELPERS))
def test_each_helper_takes_private_with_allow_private(helper: str) -> None:
    HELPERS[helper](True)


def test_every_public_training_helper_has_the_keyword() -> None:
    import inspect

    from frostgym.train import trl, vector

    helpers: list[Callable[..., Any]] = [
        task_rows,
        TrainingEpisode,
        CurriculumSampler,
        trl.env_dataset,
        trl.rows_dataset,
        trl.reward_functions,
        trl.environment_factory,
        trl.sql_environment_factory,
        vector.make_vector_env,
        vector.group_reset,
    ]
    for helper in helpers:
        parameter = inspect.signature(helper).parameters.get("allow_private")
        assert parameter is not None and parameter.default is False, helper


# -- what the adapters' envs play: rows say whether they may be private ----------------------


def test_verifiers_env_refuses_a_private_row_it_was_not_told_to_allow() -> None:
    pytest.importorskip("verifiers", reason="verifiers is not installed (make install installs it)")
    from frostgym.integrations.verifiers import load_environment

    env = load_environment(ARITH, split="dev", n=1, seed=0)
    row = _private_rows(1)[0]
    with pytest.raises(PrivateSplitError):
        env.borrow({**row.to_dict(), "env_kwargs": {}})


def test_skyrl_env_and_writer_play_marked_private_rows_only(tmp_path: Path) -> None:
    pytest.importorskip("skyrl_gym", reason="skyrl-gym is not installed (make install installs it)")
    from frostgym.integrations.skyrl_gym import FrozenTextEnv, skyrl_rows, write_skyrl_dataset

    marked = skyrl_rows(ARITH, split="private", n=1, seed=0, allow_private=True)
    env = FrozenTextEnv(extras={"extra_info": marked[0]["extra_info"]}, env_id=ARITH)
    try:
        first, metadata = env.init()
        assert first and metadata["split"] == "private"
    finally:
        env.close()
    write_skyrl_dataset(tmp_path / "ok.jsonl", marked)
    unmarked = [{**r, "extra_info": {k: v for k, v in r["extra_info"].items() if k != "allow_private"}} for r in marked]
    with pytest.raises(PrivateSplitError):
        FrozenTextEnv(extras={"extra_info": unmarked[0]["extra_info"]}, env_id=ARITH)
    with pytest.raises(PrivateSplitError):
        write_skyrl_dataset(tmp_path / "refused.jsonl", unmarked)
    assert not (tmp_path / "refused.jsonl").exists()
    rows = skyrl_rows(ARITH, split="dev", n=1, seed=0)
    assert "allow_private" not in rows[0]["extra_info"]  # rows of the other splits are as before


VERL_SITE = Path(sys.prefix) / "verl-site"
VERL_CHECK = """
import pytest
from frostgym.core.errors import PrivateSplitError
from frostgym.integrations.verl import _task_of, verl_row, verl_rows, write_verl_parquet
from frostgym.train.session import task_rows
import sys
ARITH = "frostgym/Arithmetic-v0"
with pytest.raises(PrivateSplitError):
    verl_rows(ARITH, split="private", n=2, seed=0)
row = task_rows(ARITH, split="private", n=1, seed=0, allow_private=True)[0]
with pytest.raises(PrivateSplitError):
    verl_row(row)
rows = verl_rows(ARITH, split="private", n=2, seed=0, allow_private=True)
assert [r["extra_info"]["allow_private"] for r in rows] == [True, True]
assert verl_row(row, allow_private=True)["extra_info"]["allow_private"] is True
assert _task_of(rows[0])[3] == "private"
unmarked = [{**r, "extra_info": {k: v for k, v in r["extra_info"].items() if k != "allow_private"}} for r in rows]
with pytest.raises(PrivateSplitError):
    _task_of(unmarked[0])
with pytest.raises(PrivateSplitError):
    write_verl_parquet(unmarked, sys.argv[1])
write_verl_parquet(rows, sys.argv[1])
print("verl guard ok")
"""


def test_verl_rows_and_loop_refuse_private_unless_allowed(tmp_path: Path) -> None:
    """verl is not importable in the venv itself (``test_verl_adapter.py`` says why): the check
    runs in a child process with its packages on the path, where they are installed."""
    try:
        import frostgym.integrations.verl  # noqa: F401
    except ImportError:
        if not (VERL_SITE / "verl").is_dir():
            pytest.skip(f"verl is not installed in {VERL_SITE} (make install installs it)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(VERL_SITE), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", VERL_CHECK, str(tmp_path / "rows.parquet")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and "verl guard ok" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]


# -- evaluation is not training; a card can declare a model trained on private ---------------


def test_eval_on_private_stays_allowed_and_a_card_declares_training_on_it(tmp_path: Path) -> None:
    from frostgym.cards.schema import SCHEMAS
    from frostgym.cli import app

    jsonschema = pytest.importorskip("jsonschema")
    base = ["eval", "--env", ARITH, "--split", "private", "--episodes", "2", "--agent", "oracle"]
    plain = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    declared = CliRunner().invoke(app, [*base, "--trained-on-private", "--out", str(tmp_path / "trained")])
    assert declared.exit_code == 0, declared.output
    assert "trained on the private split" in " ".join(declared.output.split())
    assert "trained on the private split" not in " ".join(plain.output.split())

    card = json.loads((tmp_path / "trained" / "card.json").read_text())
    assert card["config"]["identity"]["trained_on_private"] is True
    assert "trained_on_private" not in json.loads((tmp_path / "plain" / "card.json").read_text())["config"]["identity"]
    jsonschema.validate(card, SCHEMAS["card"])

    summary = CliRunner().invoke(app, ["summary", str(tmp_path / "trained")])
    assert summary.exit_code == 0 and "trained on the private split" in " ".join(summary.output.split())
    compared = CliRunner().invoke(app, ["compare", str(tmp_path / "plain"), str(tmp_path / "trained")])
    assert compared.exit_code == 0, compared.output
    said = " ".join(compared.output.split())
    assert "cand: this card's agent was declared trained on the private split" in said
    assert "base: this card" not in said

    resumed = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "trained"), "--resume"])
    assert resumed.exit_code != 0  # the declaration is part of the run's identity: a resume must repeat it
    again = CliRunner().invoke(app, [*base, "--trained-on-private", "--out", str(tmp_path / "trained"), "--resume"])
    assert again.exit_code == 0, again.output
