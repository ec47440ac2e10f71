"""Perturbed twins (memorisation checks): every eval task of a procedural id (Math, Arithmetic,
Fractions, LinearEquations, at every level) and every HumanEval problem has a twin that
passes the env contract: the oracle scores 1 on it, it is the same in a fresh process,
its content hash and question are none of any split's originals, and it keeps its
original's structure. ``eval --twins`` plays each task with its twin and the card's views
report the gap, with an interval checked against scipy's bootstrap."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import random
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

import frostgym
from frostgym.cards.schema import SCHEMAS
from frostgym.cards.twin_gap import twin_gaps
from frostgym.cli import app
from frostgym.code.examples import visible_examples
from frostgym.code.twins import twin_problem
from frostgym.core.errors import FixtureMismatchError, UnknownTaskError
from frostgym.core.fixture_lock import merge_lock, read_lock, verified_twins
from frostgym.core.hashing import canonical_json
from frostgym.core.splits import split_of
from frostgym.core.task_ids import is_twin_id, parse_task_id
from frostgym.core.tasks import Draft, Task, TaskSource
from frostgym.envs.code.tasks import humaneval_source
from frostgym.envs.levels import env_levels
from frostgym.envs.math.arithmetic import ArithmeticSource
from frostgym.run.plan import make_plan
from frostgym.sandbox.backends import unavailable_reason
from tests.conftest import make_env, play
from tests.stats_reference import RESAMPLES, assert_matches, mean_gap, scipy_interval

ROOT = Path(__file__).resolve().parents[2]
PROCEDURAL = ("frostgym/Math-v0", "frostgym/Arithmetic-v0", "frostgym/Fractions-v0", "frostgym/LinearEquations-v0")
#: Every level of every procedural id (the default is one of them).
LEVELED = [(env_id, level.level) for env_id in PROCEDURAL for level in env_levels(env_id)]
CODE = "frostgym/Code-v0"


@pytest.fixture(params=LEVELED, ids=[f"{env_id}@L{n}" for env_id, n in LEVELED])
def leveled(request: pytest.FixtureRequest) -> tuple[str, int]:
    env_id, level = request.param
    return str(env_id), int(level)


def _twins(source: TaskSource, *splits: str) -> list[Task]:
    return [source.twin(task) for split in splits for task in source.tasks(split)]  # type: ignore[arg-type]


# -- the env contract ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_oracle_scores_one_on_every_dev_twin_at_every_level(leveled: tuple[str, int]) -> None:
    env_id, level = leveled
    env = make_env(env_id, level=level)
    for task in env.source.tasks("dev"):
        _, info = env.reset(seed=0, options={"task_id": task.task_id + "~twin"})
        assert info["task_id"] == task.task_id + "~twin" and info["split"] == "dev"
        reward, step_info = play(env, env.oracle_action)
        assert reward == 1.0, (env.task.prompt, env.task.answer, step_info["grade"])


@pytest.mark.slow
def test_twins_are_no_original_of_any_split(leveled: tuple[str, int]) -> None:
    """By content hash and by question, over the whole dev, test and private splits; and a
    twin's question hashes into its original's split (so train never serves it) unless that
    split holds every task of the structure (the smallest levels), then into train."""
    env_id, level = leveled
    source = make_env(env_id, level=level).source
    originals = [task for split in ("dev", "test", "private") for task in source.tasks(split)]  # type: ignore[arg-type]
    twins = _twins(source, "dev", "test")
    assert {t.sha256 for t in twins}.isdisjoint(t.sha256 for t in originals)
    assert {t.prompt for t in twins}.isdisjoint(t.prompt for t in originals)
    owners = [split_of(t.prompt, salt=source.name, percent=source.split_percent) for t in twins]
    assert all(owner in (twin.split, "train") for owner, twin in zip(owners, twins, strict=True))
    if type(source).levels[level].sizes is None:  # a level with room: every twin stays in its split
        assert "train" not in owners


@pytest.mark.slow
def test_code_twins_pass_the_oracle_and_are_no_original() -> None:
    """All 164: the renamed canonical solution passes the renamed hidden tests."""
    reason = unavailable_reason("jail")
    if reason is not None:
        pytest.skip(f"the jail sandbox cannot run here: {reason}")
    env = make_env(CODE, sandbox="jail")
    originals = list(humaneval_source().tasks("test"))
    failures = []
    for task in originals:
        env.reset(seed=0, options={"task_id": task.task_id + "~twin"})
        reward, info = play(env, env.oracle_action)
        if reward != 1.0:
            failures.append((task.task_id, info["grade"]["details"]))
    assert not failures, failures[:3]
    twins = _twins(humaneval_source(), "test")
    assert {t.sha256 for t in twins}.isdisjoint(t.sha256 for t in originals)
    assert {t.prompt for t in twins}.isdisjoint(t.prompt for t in originals)


def test_a_memorised_answer_fails_on_the_twin() -> None:
    """What a twin is for: the original's gold, replayed, does not pass its twin."""
    env = make_env("frostgym/Arithmetic-v0", split="test")
    original = env.source.task("test", 3)
    env.reset(seed=0, options={"task_id": original.task_id + "~twin"})
    assert env.task.answer != original.answer
    assert play(env, lambda: f"<answer>{original.answer}</answer>")[0] == 0.0
    code = make_env(CODE, sandbox="jail" if unavailable_reason("jail") is None else "insecure", allow_insecure=True)
    task = humaneval_source().task("test", 0)
    code.reset(seed=0, options={"task_id": task.task_id + "~twin"})
    reply = f"```python\n{task.prompt}{task.solution}\n```"  # the original, under its own names
    assert play(code, lambda: reply)[0] == 0.0


def _probe() -> str:
    """What playing a few twins shows, as canonical JSON (for the fresh-process test)."""
    out = []
    for env_id in (*PROCEDURAL, CODE):
        env = make_env(env_id)
        split = "test" if env_id == CODE else "dev"
        for index in (0, 7):
            task_id = env.source.task(split, index).task_id + "~twin"
            obs, info = env.reset(seed=index, options={"task_id": task_id})
            out.append([env_id, obs, info, env.oracle_action(), env.task.record()])
    return canonical_json(out)


@pytest.mark.slow
def test_twins_are_the_same_in_a_fresh_process() -> None:
    there = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from tests.contamination.test_twins import _probe; sys.stdout.write(_probe())",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "4242"},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert there == _probe()


# -- ids ---------------------------------------------------------------------------------------


def test_twin_ids_read_unambiguously_beside_level_tags() -> None:
    """The level tag is in the first part of an id, the twin tag after the index."""
    env = make_env("frostgym/Arithmetic-v0", level=1, split="test")
    original = env.source.task("test", 5)
    assert original.task_id == "arithmetic~L1/test/5"
    _, info = env.reset(seed=0, options={"task_id": "arithmetic~L1/test/5~twin"})
    twin = env.task
    assert info["task_id"] == twin.task_id == "arithmetic~L1/test/5~twin" and is_twin_id(twin.task_id)
    assert (twin.split, twin.index, twin.metadata["twin_of"]) == ("test", 5, original.task_id)
    assert twin.metadata["twin_rule"] == ArithmeticSource.twin_rule
    assert env.source.task_by_id("arithmetic~L1/test/5~twin") is twin  # made once, then kept
    with pytest.raises(UnknownTaskError):
        parse_task_id("arithmetic~L1/test/5~twin")  # the plain parser reads originals only
    for bad in ("arithmetic~L1/test/5~twin~twin", "arithmetic~L1/test/5~twins", "arithmetic/test/5~twin"):
        with pytest.raises(UnknownTaskError):
            env.reset(seed=0, options={"task_id": bad})
    with pytest.raises(UnknownTaskError, match="is in split 'test', not 'dev'"):
        env.reset(seed=0, options={"task_id": "arithmetic~L1/test/5~twin", "split": "dev"})
    train = env.source.task("train", 3)
    with pytest.raises(UnknownTaskError, match="train task"):
        env.source.twin(train)
    sql = make_env("frostgym/SQL-v0")
    with pytest.raises(UnknownTaskError, match="no twins"):
        sql.reset(seed=0, options={"task_id": sql.source.task("dev", 0).task_id + "~twin"})


# -- structure ---------------------------------------------------------------------------------


def _expression(prompt: str) -> str:
    found = re.search(r"expression (.*)\. Give", prompt)
    assert found is not None
    return found.group(1)


def test_a_twin_keeps_its_originals_structure() -> None:
    for level in (1, 3, 4, 5):
        source = make_env("frostgym/Arithmetic-v0", level=level).source
        for task in list(source.tasks("dev"))[:40]:
            before, after = _expression(task.prompt), _expression(source.twin(task).prompt)
            assert re.sub(r"\d+", "N", before) == re.sub(r"\d+", "N", after)  # operators and parentheses
            assert re.findall(r"\d+", before) != re.findall(r"\d+", after)
            assert (Fraction(task.answer) < 0) == (Fraction(source.twin(task).answer) < 0)  # the same sign
    fractions = make_env("frostgym/Fractions-v0", level=1).source
    for task in fractions.tasks("dev"):
        twin = fractions.twin(task)
        assert re.findall(r"\) (\S) \(", twin.prompt) == re.findall(r"\) (\S) \(", task.prompt)
        assert len(set(re.findall(r"/(\d+)\)", twin.prompt))) == 1  # one shared denominator, as at level 1
    linear = make_env("frostgym/LinearEquations-v0").source
    for task in list(linear.tasks("dev"))[:40]:
        twin = linear.twin(task)
        assert twin.prompt[:12] == task.prompt[:12]  # "Solve for x:"
        assert (Fraction(task.answer) < 0) == (Fraction(twin.answer) < 0)
    gsm = make_env("frostgym/Math-v0").source
    for task in list(gsm.tasks("dev"))[:40]:
        assert gsm.twin(task).metadata["template"] == task.metadata["template"]


def test_a_code_twin_is_renamed_by_its_syntax_tree() -> None:
    problem = {
        "task_id": "Example/0",
        "prompt": (
            'def count_up(n: int, step_size: int = 1) -> list:\n    """Count from 0 below n by step_size; '
            "it's a list.\n    count_up(3) is [0, 1, 2]; 'n' is named, 'a n b' is a value.\n"
            "    >>> count_up(3)\n    [0, 1, 2]\n    >>> count_up(n=4, step_size=2)\n    [0, 2]\n"
            '    >>> count_up(0)\n    []\n    """\n'
        ),
        "canonical_solution": (
            "    values = [n for n in range(0, n, step_size)]  # the comprehension's n is its own\n"
            "    helper = lambda step_size: step_size * 2\n"
            "    return values if n >= 0 else count_up(-n, step_size=helper(1))\n"
        ),
        "test": "def check(candidate):\n    assert candidate(3) == [0, 1, 2]\n    assert count_up(2) == [0, 1]\n",
        "entry_point": "count_up",
    }
    twin = twin_problem(problem, random.Random(3))
    new, program = twin["entry_point"], twin["prompt"] + twin["canonical_solution"]
    ast.parse(program)
    function = next(n for n in ast.parse(program).body if isinstance(n, ast.FunctionDef))
    n, step = (a.arg for a in function.args.args)
    assert function.name == new != "count_up" and len(n) == 1 and n != "n" and step != "step_size"
    assert f"[n for n in range(0, {n}, {step})]" in program  # the comprehension keeps its own n
    assert "lambda step_size: step_size * 2" in program  # so does the lambda
    assert f"{new}(-{n}, {step}=helper(1))" in program  # the recursive call and its keyword
    assert f"below {n} by {step};" in program and "it's a list" in program  # prose: identifiers only
    assert f"{new}(3) is [0, 1, 2]; '{n}' is named, 'a n b' is a value" in program  # quoted values are kept
    assert f">>> {new}({n}=4, {step}=2)" in program
    assert f"assert {new}(2) == [0, 1]" in twin["test"] and "candidate(3)" in twin["test"]
    examples = visible_examples(twin["prompt"], new)
    assert [want for _, want in examples] != ["[0, 1, 2]", "[0, 2]", "[]"]  # reordered
    assert sorted(want for _, want in examples) == sorted(["[0, 1, 2]", "[0, 2]", "[]"])
    assert twin_problem(problem, random.Random(3)) == twin  # a function of the RNG


def test_every_humaneval_twin_renames_its_entry_point_and_parameters() -> None:
    for task in humaneval_source().tasks("test"):
        twin = humaneval_source().twin(task)
        old, new = task.metadata["entry_point"], twin.metadata["entry_point"]
        assert new != old and not re.search(rf"\b{re.escape(old)}\b", twin.metadata["test"])
        assert twin.difficulty == task.difficulty and twin.metadata["humaneval_id"] == task.metadata["humaneval_id"]
        before = next(n for n in ast.parse(task.prompt).body if isinstance(n, ast.FunctionDef) and n.name == old)
        after = next(n for n in ast.parse(twin.prompt).body if isinstance(n, ast.FunctionDef) and n.name == new)
        kept = [a.arg for a in before.args.args if a.arg in ("a", "A", "I")]
        assert [a.arg for a in after.args.args if a.arg in kept] == kept
        assert not {a.arg for a in after.args.args} & ({a.arg for a in before.args.args} - set(kept))


# -- the lock ----------------------------------------------------------------------------------


class _DriftedTwins(ArithmeticSource):
    """Same name and twin rule version, other twins: an unversioned change to the rule."""

    def twin_draft(self, original: Task, rng: random.Random) -> Draft:
        draft = super().twin_draft(original, rng)
        return dataclasses.replace(draft, prompt=draft.prompt + " ")


@pytest.mark.slow
def test_twins_are_locked_and_a_changed_rule_is_refused(tmp_path: Path) -> None:
    for env_id in (*PROCEDURAL, CODE):
        env = make_env(env_id)
        entry = read_lock(env.lock_file)[env.source.id_prefix]
        assert entry["twins"] == {"rule": env.source.twin_rule, "sha256": entry["twins"]["sha256"]}
    lock = tmp_path / "lock.json"
    merge_lock(lock, ArithmeticSource())
    verified_twins(lock, ArithmeticSource())
    with pytest.raises(FixtureMismatchError, match="twins of task source 'arithmetic'"):
        verified_twins(lock, _DriftedTwins())


# -- plans, cards and the gap ------------------------------------------------------------------


def test_a_plan_with_twins_pairs_every_task_with_its_twin() -> None:
    plain = make_plan(["frostgym/Arithmetic-v0"], split="test", episodes=3, samples=2, seed=5)
    paired = make_plan(["frostgym/Arithmetic-v0"], split="test", episodes=3, samples=2, seed=5, twins=True)
    assert [p for p in paired if not is_twin_id(p.task_id)] == plain
    assert [p.task_id for p in paired[2:4]] == [plain[0].task_id + "~twin"] * 2
    assert all(p.seed_derivation == ("episode", 5, p.env_id, p.task_id, p.sample) for p in paired)
    with pytest.raises(ValueError, match="SQL-v0 cannot play twins"):
        make_plan(["frostgym/SQL-v0"], split="dev", episodes=2, samples=1, seed=0, twins=True)


def test_eval_with_twins_reports_the_gap_in_the_views_and_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "card"
    args = ["eval", "--env", "frostgym/Arithmetic-v0[level=1]", "--split", "test", "--episodes", "5", "--twins"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "twin gap" in result.output
    card = json.loads((out / "card.json").read_text())
    jsonschema.validate(card, SCHEMAS["card"])
    assert card["config"]["identity"]["twins"] is True and card["accounting"]["planned"] == 10
    gap = card["views"]["twin_gap"]["frostgym/Arithmetic-v0"]["errors_as_failures"]
    assert gap == {"pairs": 5, "originals": 1.0, "twins": 1.0, "gap": 0.0, "ci_low": 0.0, "ci_high": 0.0}
    assert "twin_gap" in card["views"]["definitions"]
    again = CliRunner().invoke(app, [*args, "--out", str(out), "--resume"])  # the same plan: nothing left to play
    assert again.exit_code == 0, again.output
    replayed = CliRunner().invoke(app, ["replay", str(out)])
    assert replayed.exit_code == 0 and "replay identical: 10 episodes" in replayed.output
    summary = CliRunner().invoke(app, ["summary", str(out)])
    assert "twin gap" in summary.output and "+0.000" in summary.output
    refused = CliRunner().invoke(app, ["eval", "--env", "frostgym/SQL-v0", "--twins", "--out", str(tmp_path / "s")])
    assert refused.exit_code != 0 and "cannot play twins" in refused.output


def _pass_at_1(originals: np.ndarray, twins: np.ndarray) -> dict[str, dict[tuple[str, str], float]]:
    values = {}
    for i, (o, t) in enumerate(zip(originals.tolist(), twins.tolist(), strict=True)):
        values[("env", f"x/test/{i}")] = o
        values[("env", f"x/test/{i}~twin")] = t
    return {"errors_as_failures": values}


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [30, 164])
def test_the_gap_interval_matches_scipys_paired_bootstrap(tasks: int) -> None:
    data = np.random.default_rng(tasks)
    originals = data.binomial(4, 0.6, tasks) / 4
    twins = np.clip(originals - data.binomial(1, 0.3, tasks) * 0.5, 0, 1)
    gap = twin_gaps(_pass_at_1(originals, twins), resamples=RESAMPLES)["env"]["errors_as_failures"]
    reference = scipy_interval((twins, originals), mean_gap, seed=11, paired=True)
    assert gap["pairs"] == tasks and gap["gap"] == pytest.approx(originals.mean() - twins.mean())
    assert_matches(gap["ci_low"], gap["ci_high"], reference)
    assert twin_gaps(_pass_at_1(originals, twins)) == twin_gaps(_pass_at_1(originals, twins))  # seeded


def test_the_gap_counts_only_tasks_with_both_sides() -> None:
    values = _pass_at_1(np.array([1.0, 1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0, 1.0]))["errors_as_failures"]
    del values[("env", "x/test/3~twin")]  # a twin all of whose samples dropped under this rule
    values[("other", "y/test/0")] = 1.0  # an env played without twins
    gaps = twin_gaps({"errors_excluded": values})
    assert set(gaps) == {"env"}
    gap = gaps["env"]["errors_excluded"]
    assert (gap["pairs"], gap["originals"], gap["twins"]) == (3, pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert twin_gaps({"errors_excluded": {("e", "x/test/0~twin"): 1.0}})["e"]["errors_excluded"]["pairs"] == 0


@pytest.mark.slow
def test_every_registered_procedural_and_code_id_has_twins() -> None:
    with_twins = {e.id for e in frostgym.ENTRIES if make_env(e.id).source.twin_rule}
    assert with_twins == {*PROCEDURAL, CODE}
