"""``frostgym eval --exclude FILE``: the excluded tasks are taken out before the plan is
drawn, and the card declares them (identity, with reasons and the file's hash) and counts
them (accounting); a resume with another exclusion list is refused; the card still
validates against its schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from frostgym.cards.card import read_card_json
from frostgym.cards.schema import SCHEMAS
from frostgym.cli import app
from frostgym.contamination.check import check_training
from frostgym.contamination.evalset import eval_tasks
from frostgym.contamination.reading import TrainingSource
from frostgym.core.errors import ExclusionError
from frostgym.envs.specs import EnvSpec
from frostgym.evaluate.exclusions import read_exclusions, resolve
from frostgym.run.plan import make_plan

ARITHMETIC = "frostgym/Arithmetic-v0"
SQL = "frostgym/SQL-v0"


def eval_args(out: Path, exclude: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "--env",
        ARITHMETIC,
        "--split",
        "test",
        "--episodes",
        "12",
        "--out",
        str(out),
        "--exclude",
        str(exclude),
        *extra,
    ]


def test_an_excluded_task_is_never_planned_and_the_card_declares_it(tmp_path: Path) -> None:
    before = [p.task_id for p in make_plan([ARITHMETIC], split="test", episodes=12, samples=1, seed=0)]
    left_out = before[:3]
    exclude = tmp_path / "exclude.txt"
    exclude.write_text(
        f"# found in our crawl\n{left_out[0]}  # crawl 2024-05\n{ARITHMETIC} {left_out[1]}\n\n"
        f"{left_out[2]}\n{SQL} sql/test/0\nmath_gsm/test/3\n"
    )
    result = CliRunner().invoke(app, eval_args(tmp_path / "card", exclude))
    assert result.exit_code == 0, result.output
    assert "3 tasks left out of the plan (2 entries name other envs or splits)" in result.output
    card = read_card_json(tmp_path / "card")  # its plan entries from plan.json
    planned = [p["task_id"] for p in card["plan"]["episodes"]]
    assert len(planned) == 12 and not set(planned) & set(left_out)
    assert planned[:9] == before[3:]  # the seeded order passes over the excluded tasks
    excluded = card["config"]["identity"]["excluded"]
    assert excluded["tasks"] == [
        {"env": ARITHMETIC, "task_id": left_out[0], "reason": "crawl 2024-05"},
        {"env": ARITHMETIC, "task_id": left_out[1], "reason": "listed in exclude.txt"},
        {"env": ARITHMETIC, "task_id": left_out[2], "reason": "listed in exclude.txt"},
    ]
    assert len(excluded["sha256"]) == 64
    accounting = card["accounting"]
    assert accounting["excluded"] == 3 and accounting["planned"] == 12 and accounting["balanced"]
    jsonschema.validate(json.loads((tmp_path / "card" / "card.json").read_text()), SCHEMAS["card"])
    assert "excluded tasks" in CliRunner().invoke(app, ["summary", str(tmp_path / "card")]).output

    again = CliRunner().invoke(app, [*eval_args(tmp_path / "card", exclude), "--resume"])
    assert again.exit_code == 0, again.output
    other = tmp_path / "other.txt"
    other.write_text(f"{left_out[0]}\n")
    refused = CliRunner().invoke(app, [*eval_args(tmp_path / "card", other), "--resume"])
    assert refused.exit_code == 2 and "planned with different options" in refused.output
    plain = eval_args(tmp_path / "plain", exclude)[:-2]
    assert CliRunner().invoke(app, plain).exit_code == 0
    compared = CliRunner().invoke(app, ["compare", str(tmp_path / "plain"), str(tmp_path / "card")])
    assert compared.exit_code == 2 and "excluded tasks none vs 3" in compared.output


def test_a_card_without_exclusions_is_as_before(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["eval", "--env", ARITHMETIC, "--episodes", "3", "--agent", "oracle", "--out", str(tmp_path / "card")]
    )
    assert result.exit_code == 0, result.output
    card = json.loads((tmp_path / "card" / "card.json").read_text())
    assert "excluded" not in card["config"]["identity"] and "excluded" not in card["accounting"]


def test_a_contamination_report_excludes_its_contaminated_tasks(tmp_path: Path) -> None:
    tasks = eval_tasks([EnvSpec(ARITHMETIC)], ("test",))
    leaked = tasks[5]
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"text": "unrelated"}) + "\n" + json.dumps({"text": leaked.text}) + "\n")
    report = tmp_path / "report.json"
    check_training(TrainingSource(train), tasks).write(report)
    listed = read_exclusions(report)
    assert [(e.env, e.task_id) for e in listed.entries] == [(ARITHMETIC, leaked.task_id)]
    assert listed.entries[0].reason == "contaminated: n-gram overlap 1.00, MinHash 1.00, training line 2"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--env",
            ARITHMETIC,
            "--split",
            "test",
            "--all",
            "--out",
            str(tmp_path / "card"),
            "--exclude",
            str(report),
        ],
    )
    assert result.exit_code == 0, result.output
    card = read_card_json(tmp_path / "card")
    assert len(card["plan"]["episodes"]) == len(tasks) - 1
    assert leaked.task_id not in {p["task_id"] for p in card["plan"]["episodes"]}


def test_a_bad_exclusion_file_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("one two three\n")
    with pytest.raises(ExclusionError, match="line 1"):
        read_exclusions(bad)
    typo = tmp_path / "typo.txt"
    typo.write_text(f"{ARITHMETIC} arithmetic/test/99999\n")
    with pytest.raises(ExclusionError, match="arithmetic/test/99999"):
        resolve(read_exclusions(typo), [ARITHMETIC], "test", lambda _: {})
    result = CliRunner().invoke(app, eval_args(tmp_path / "card", typo))
    assert result.exit_code == 2 and "arithmetic/test/99999" in result.output
    not_report = tmp_path / "not_report.json"
    not_report.write_text('{"tasks": []}')
    with pytest.raises(ExclusionError, match="not a contamination report"):
        read_exclusions(not_report)
    with pytest.raises(ExclusionError, match="cannot read"):
        read_exclusions(tmp_path / "missing.txt")


def test_a_task_id_alone_that_names_no_task_of_the_run_is_refused_unless_warned(tmp_path: Path) -> None:
    """A task id alone whose source is the run's env but which is no task of it (a typo, an
    index past a finite split, another config's id) is refused with every such entry listed;
    ``--exclude-unknown=warn`` says them in one line and goes on. Every index of an unbounded
    split (a generator's train) is a task, so an id there is never unknown."""
    real = make_plan([ARITHMETIC], split="test", episodes=1, samples=1, seed=0)[0].task_id
    exclude = tmp_path / "exclude.txt"
    unknown = ["arithmetic/test/99999", "arithmetic/dev/99999", "arithmetic/tset/1", "arithmetic~L2/test/1"]
    exclude.write_text("\n".join([real, *unknown, "math_gsm/test/3", "arithmetic/train/123456789"]) + "\n")

    refused = CliRunner().invoke(app, eval_args(tmp_path / "card", exclude))
    assert refused.exit_code == 2, refused.output
    flat = " ".join(refused.output.replace("│", " ").split())
    assert "4 tasks no env of the run has" in flat and "--exclude-unknown=warn" in flat
    assert all(repr(task_id) in flat for task_id in unknown) and "Traceback" not in refused.output
    assert not (tmp_path / "card").exists()

    warned = CliRunner().invoke(app, [*eval_args(tmp_path / "card", exclude), "--exclude-unknown", "warn"])
    assert warned.exit_code == 0, warned.output
    lines = [line for line in warned.output.splitlines() if "going on without" in line]
    assert len(lines) == 1 and all(repr(task_id) in lines[0] for task_id in unknown)
    assert "1 tasks left out of the plan (2 entries name other envs or splits)" in warned.output
    card = read_card_json(tmp_path / "card")
    assert [t["task_id"] for t in card["config"]["identity"]["excluded"]["tasks"]] == [real]

    resolved = resolve(read_exclusions(exclude), [ARITHMETIC], "test", lambda _: {}, unknown="warn")
    assert [e.task_id for e in resolved.unknown] == unknown
    assert [e.task_id for e in resolved.applied] == [real]
    with pytest.raises(ExclusionError, match="4 tasks no env of the run has"):
        resolve(read_exclusions(exclude), [ARITHMETIC], "test", lambda _: {})
    bad_policy = CliRunner().invoke(app, [*eval_args(tmp_path / "other", exclude), "--exclude-unknown", "ignore"])
    assert bad_policy.exit_code == 2 and not (tmp_path / "other").exists()
