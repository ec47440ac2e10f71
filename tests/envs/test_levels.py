"""Levels (``gym.make(id, level=n)``): every level of every id passes the env contract
(check_env, the oracle scores 1 on its dev tasks, disjoint splits owned by content, a
locked hash, the same episodes in a fresh process), names itself in its task ids, and
leaves the id's default as it was; ids without levels say so."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import warnings
from fractions import Fraction
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env
from typer.testing import CliRunner

import frostgym
from frostgym.core.errors import FixtureMismatchError
from frostgym.core.fixture_lock import read_lock, verified_fixture_sha256
from frostgym.core.splits import Split, split_of
from frostgym.core.tasks import TaskSource
from frostgym.envs.levels import env_levels, task_source_class
from frostgym.envs.math.tasks import math_source
from frostgym.envs.sql.tasks import LEVELS as SQL_LEVELS
from frostgym.envs.sql.tasks import SQLTaskSource, load_handwritten, question_level, sql_source
from frostgym.envs.tools.single_turn import ToolsEnv
from frostgym.envs.tools.tasks import BFCLSource
from tests.conftest import make_env, play
from tests.determinism_probe import in_fresh_process, probe_levels

ROOT = Path(__file__).resolve().parents[2]
LEVELED = [(e.id, level.level) for e in frostgym.ENTRIES for level in env_levels(e.id)]
IDS_WITH_LEVELS = sorted({env_id for env_id, _ in LEVELED})
#: Levels that narrow what ``reset`` draws without changing the tasks (BFCL's categories).
NARROWING = {"frostgym/Tools-v0"}
#: Ids whose test split is a published one (tau2's), kept as published whatever the hash.
PUBLISHED_TEST = {"frostgym/CustomerService-v0"}
BFCL_SAMPLE = 25
EVAL_SPLITS: tuple[Split, ...] = ("dev", "test", "private")


@pytest.fixture(params=LEVELED, ids=[f"{env_id}@L{n}" for env_id, n in LEVELED])
def leveled(request: pytest.FixtureRequest) -> tuple[str, int]:
    env_id, level = request.param
    return str(env_id), int(level)


@pytest.fixture(params=IDS_WITH_LEVELS)
def env_id(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _prefix(source: TaskSource, level: int) -> str:
    return source.name if level == source.default_level or not source.config_type else f"{source.name}~L{level}"


# -- what has levels, and how they are declared -------------------------------------------------


def test_every_family_id_has_levels_and_the_two_fixed_benchmarks_say_why_not() -> None:
    without = [e.id for e in frostgym.ENTRIES if not env_levels(e.id)]
    assert without == ["frostgym/Code-v0", "frostgym/ToolsMultiTurn-v0"]
    for env_id in without:
        note = task_source_class(env_id).levels_note
        assert note
        with pytest.raises(ValueError, match=rf"^{re.escape(env_id)} has no levels: {re.escape(note)}$"):
            gymnasium.make(env_id, level=1)
        make_env(env_id, level=None)  # None is the default, as for every id
    assert {e.id for e in frostgym.ENTRIES if e.family == "math"} <= set(IDS_WITH_LEVELS)


def test_the_registry_names_each_ids_task_source() -> None:
    for entry in frostgym.ENTRIES:
        assert task_source_class(entry.id) is type(make_env(entry.id).source), entry.id


def test_levels_are_numbered_from_one_and_the_default_is_one_of_them_or_none(env_id: str) -> None:
    kind = task_source_class(env_id)
    levels = env_levels(env_id)
    assert [level.level for level in levels] == list(range(1, len(levels) + 1)) and len(levels) >= 3
    assert len({level.summary for level in levels}) == len(levels) and all(level.summary for level in levels)
    assert len({repr(level.config) for level in levels}) == len(levels)
    assert [level.level for level in levels if level.default] == (
        [] if kind.default_level is None else [kind.default_level]
    )
    if kind.default_level is None:  # a list whose levels are parts of it: the default serves them all
        assert kind.levels_note
    else:
        assert kind.config_type is not None and kind.levels[kind.default_level].config == kind.config_type()
    if env_id.startswith("frostgym/") and make_env(env_id).family == "math":
        assert kind.default_level is not None, "a math id's default is one of its levels"


def test_the_default_level_is_the_default_id(env_id: str) -> None:
    default = make_env(env_id).source
    kind = task_source_class(env_id)
    if kind.default_level is None:
        return
    assert make_env(env_id, level=kind.default_level).source is default
    assert default.id_prefix == default.name and default.level == kind.default_level


def test_a_level_it_does_not_have_is_refused_with_the_list(env_id: str) -> None:
    count = len(env_levels(env_id))
    for bad in (0, count + 1):
        with pytest.raises(ValueError, match=rf"^{re.escape(env_id)} has no level .*; its levels are 1 = "):
            gymnasium.make(env_id, level=bad)
    for wrong_type in (True, "2"):  # refused by the one argument check, before the levels are read
        with pytest.raises(ValueError, match=r"argument 'level' must be an integer or null"):
            gymnasium.make(env_id, level=wrong_type)


# -- the contract at every level --------------------------------------------------------------


def test_check_env_passes_at_every_level(leveled: tuple[str, int]) -> None:
    env_id, level = leveled
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make_env(env_id, level=level), skip_render_check=True)


def test_a_level_draws_only_its_tasks_under_ids_that_name_it(leveled: tuple[str, int]) -> None:
    env_id, level = leveled
    env = make_env(env_id, level=level)
    source = env.source
    assert source.level == level and source.id_prefix == _prefix(source, level)
    split = env.split
    for seed in range(20):
        _, info = env.reset(seed=seed)
        task = source.task_by_id(info["task_id"])
        assert info["task_id"].startswith(f"{source.id_prefix}/{split}/") and task.split == split
        if env_id in NARROWING:
            assert task.metadata["category"] in source.levels[level].config
    if env_id not in NARROWING:
        assert all(t.task_id.startswith(f"{source.id_prefix}/dev/") for t in source.tasks("dev"))
        assert source.size("dev"), "every level has dev tasks"


def test_the_oracle_scores_one_on_every_dev_task_at_every_level(leveled: tuple[str, int]) -> None:
    env_id, level = leveled
    env = make_env(env_id, level=level)
    source = env.source
    if env_id in NARROWING:  # one published test split: a sample of the level's part of it
        pool = [t for t in source.tasks("test") if source.drawable(t)]
        tasks = random.Random(level).sample(pool, BFCL_SAMPLE)
    else:
        tasks = list(source.tasks("dev"))
    for task in tasks:
        env.reset(seed=0, options={"task_id": task.task_id})
        reward, info = play(env, env.oracle_action)
        assert reward == 1.0, (task.task_id, task.prompt, task.answer, info["grade"])
    assert tasks


@pytest.mark.slow
def test_every_level_is_locked(leveled: tuple[str, int]) -> None:
    env_id, level = leveled
    env = make_env(env_id, level=level)
    entry = read_lock(env.lock_file)[env.source.id_prefix]
    assert entry == env.source.lock_record() and set(entry["sha256"]) == set(env.source.locked_splits)
    assert env.reset(seed=0)[1]["fixture_sha256"] == verified_fixture_sha256(env.lock_file, env.source)


def test_an_unlocked_level_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FixtureMismatchError, match=r"arithmetic~L1.*--env 'ID\[level=1\]'"):
        verified_fixture_sha256(tmp_path / "lock.json", math_source("arithmetic", level=1))


@pytest.mark.slow
def test_splits_are_disjoint_and_owned_by_content_across_levels(env_id: str) -> None:
    """Within a level, and across them: no level's train or other split holds a task that
    is another split's at any level."""
    if env_id in NARROWING:
        pytest.skip("its levels narrow one published test split")
    sources = [make_env(env_id, level=level.level).source for level in env_levels(env_id)]
    owner: dict[str, str] = {}
    for source in sources:
        prompts = {split: [t.prompt for t in source.tasks(split)] for split in EVAL_SPLITS}
        for split, texts in prompts.items():
            assert len(set(texts)) == len(texts) == source.size(split), f"{source.id_prefix} {split}"
            for text in texts:
                assert owner.setdefault(text, split) == split, f"{text!r} is {split} and {owner[text]}"
                if not (split == "test" and env_id in PUBLISHED_TEST):
                    assert split_of(text, salt=source.name, percent=source.split_percent) == split
    for source in sources:
        if source.size("train") is None:
            rng = random.Random(0)
            train = [source.task("train", rng.randrange(2**62)).prompt for _ in range(100)]
            assert not set(train) & set(owner), f"{source.id_prefix} trains on an eval task"


@pytest.mark.slow
def test_levels_replay_byte_for_byte_in_a_fresh_process() -> None:
    here = probe_levels(8)
    there = in_fresh_process("8", "levels", hash_seed="54321")
    assert hashlib.sha256(there.encode()).hexdigest() == hashlib.sha256(here.encode()).hexdigest()
    assert all(f'"{env_id}"' in here for env_id in IDS_WITH_LEVELS)


# -- a level and a config together ---------------------------------------------------------


def test_a_level_with_task_config_fields_is_tagged_as_the_config_it_makes() -> None:
    level_1 = math_source("arithmetic", level=1)
    assert math_source("arithmetic", {"max_operand": 9, "min_operand": 0}, level=1) is level_1
    assert math_source("arithmetic", level_1.config_record()) is level_1  # a level's config is the level
    changed = math_source("arithmetic", {"max_operand": 5}, level=1)
    assert re.fullmatch(r"arithmetic~[0-9a-f]{8}", changed.id_prefix) and changed.level is None
    assert changed.config.operators == "+-" and changed.config.max_operand == 5
    default = {"min_operands": 3, "max_operands": 5, "max_operand": 99, "min_operand": 2, "operators": "+-*/"}
    assert math_source("arithmetic", {**default, "parentheses": True}, level=5) is math_source("arithmetic")
    assert sql_source({"levels": [1]}, level=2) is sql_source(level=1)
    with pytest.raises(ValueError, match="unknown ArithmeticConfig keys"):
        math_source("arithmetic", {"digits": 3}, level=1)
    with pytest.raises(ValueError, match="takes task_config as a mapping"):
        math_source("arithmetic", math_source("arithmetic").config, level=1)
    with pytest.raises(ValueError, match="a level or categories, not both"):
        ToolsEnv(level=1, categories="simple_python")


def test_configs_that_existed_before_levels_keep_their_ids_and_tasks() -> None:
    """The fields added for levels are left out of a config's record at their default, so
    a card made with an older config replays (tags computed before levels existed)."""
    assert math_source("arithmetic", {"max_operand": 9}).id_prefix == "arithmetic~0846824d"
    assert math_source("arithmetic", {"max_operand": 9}).task("dev", 0).prompt == (
        "Calculate the value of the expression (6 / 2) - (9 - 7). Give the result as your final answer."
    )
    assert math_source("fraction_arithmetic", {"max_denominator": 5}).id_prefix == "fraction_arithmetic~02cac7ee"
    assert math_source("linear_equations", {"max_constant": 7}).id_prefix == "linear_equations~91fccf1d"
    assert math_source("gsm_symbolic", {"templates": [0, 1, 2]}).id_prefix == "gsm_symbolic~71875baf"
    assert sql_source().config_record() == {} and sql_source().id_prefix == "sql"


# -- what each family's levels are -------------------------------------------------------------


def _expression(prompt: str) -> str:
    found = re.fullmatch(r"Calculate the value of the expression (.+)\. Give the result as your final answer\.", prompt)
    assert found, prompt
    return found[1]


def test_arithmetic_levels_grow_from_two_single_digit_operands() -> None:
    l1 = math_source("arithmetic", level=1)
    every = [t for split in EVAL_SPLITS for t in l1.tasks(split)]
    assert all(re.fullmatch(r"\d [+-] \d", _expression(t.prompt)) for t in every)
    assert len(every) == 61  # every one of the 200 that hashes into an eval split
    for level, operands, operators in ((2, {3}, "+-"), (3, {3, 4}, "+-*")):
        for task in math_source("arithmetic", level=level).tasks("dev"):
            expression = _expression(task.prompt)
            assert "(" not in expression and set(re.findall(r"[-+*/]", expression)) <= set(operators)
            assert len(re.findall(r"\d+", expression)) in operands
            assert int(task.answer) == eval(expression)  # flat: Python's precedence is the rule
    assert any("(" in _expression(t.prompt) for t in math_source("arithmetic", level=5).tasks("dev"))


def test_fraction_level_1_shares_one_denominator_and_answers_are_exact() -> None:
    for level in (1, 2, 5):
        for task in itertools.islice(math_source("fraction_arithmetic", level=level).tasks("dev"), 60):
            expression = re.fullmatch(r"Compute (.+), working strictly from left to right\..*", task.prompt)
            assert expression, task.prompt
            terms = re.findall(r"([-+*/]?) ?\((\d+)/(\d+)\)", expression[1])
            value = Fraction(int(terms[0][1]), int(terms[0][2]))
            for op, num, den in terms[1:]:
                term = Fraction(int(num), int(den))
                value = {"+": value + term, "-": value - term, "*": value * term, "/": value / term}[op]
            assert Fraction(task.answer) == value
            if level == 1:
                assert len(terms) == 2 and len({den for _, _, den in terms}) == 1
                assert all(int(num) < int(den) for _, num, den in terms)


def test_linear_level_1_has_the_unknown_once_and_an_integer_solution() -> None:
    for task in math_source("linear_equations", level=1).tasks("dev"):
        found = re.fullmatch(r"Solve for (\w): (-?\d*)\1(?: ([+-]) (\d+))? = (-?\d+)\..*", task.prompt)
        assert found, task.prompt
        _, a, sign, b, d = found.groups()
        a_value = {"": 1, "-": -1}[a] if a in ("", "-") else int(a)
        b_value = int(b or 0) * (-1 if sign == "-" else 1)
        assert a_value * int(task.answer) + b_value == int(d)


def test_gsm_levels_add_templates_by_the_steps_of_their_solution() -> None:
    from frostgym.envs.math.gsm import FOUR_STEPS, THREE_STEPS, TWO_STEPS, GSMSymbolicSource, _templates

    ok, templates = _templates()
    steps: dict[int, set[int]] = {}
    for number in ok:
        for seed in range(3):
            cot = str(templates[number](random.Random(seed), 1.0)["metadata"]["answer_cot"])
            steps.setdefault(number, set()).add(len([line for line in cot.split("####")[0].splitlines() if line]))
    assert all(len(counts) == 1 for counts in steps.values()), "a template's steps vary between draws"
    by_steps = {n: {t for t, counts in steps.items() if counts == {n}} for n in (2, 3, 4)}
    assert (set(TWO_STEPS), set(THREE_STEPS), set(FOUR_STEPS)) == (by_steps[2], by_steps[3], by_steps[4])
    drawn = [set(GSMSymbolicSource.levels[n].config.templates or ok) for n in (1, 2, 3, 4)]
    assert drawn[0] < drawn[1] < drawn[2] < drawn[3] == set(ok)
    for n in (1, 2, 3):
        assert {t.metadata["template"] for t in math_source("gsm_symbolic", level=n).tasks("dev")} <= drawn[n - 1]


def test_sql_levels_are_difficulty_and_schema_size() -> None:
    assert (question_level("easy", "cars"), question_level("easy", "chinook"), question_level("extra", "economy")) == (
        1,
        2,
        5,
    )
    handwritten = load_handwritten()
    for level in SQL_LEVELS:
        source = sql_source(level=level)
        for task in itertools.chain.from_iterable(source.tasks(s) for s in EVAL_SPLITS):
            assert question_level(task.difficulty, task.metadata["database"]) == level
        if source.train is None:
            assert level == 5 and source.size("train") == 0  # no template writes an extra-hard question
            continue
        drawn = [source.task("train", i) for i in range(30)]
        assert {question_level(t.difficulty, t.metadata["database"]) for t in drawn} == {level}
        assert source.train.held_out == {d.prompt for d in handwritten}  # every level's, not only its own
    total = sum(sql_source(level=level).size(split) or 0 for level in SQL_LEVELS for split in ("dev", "test"))
    assert total == sum(SQLTaskSource().size(split) or 0 for split in ("dev", "test"))


@pytest.mark.slow
def test_tools_levels_keep_bfcls_numbering_and_its_one_lock() -> None:
    default = make_env("frostgym/Tools-v0").source
    sizes = []
    for level in env_levels("frostgym/Tools-v0"):
        source = make_env("frostgym/Tools-v0", level=level.level).source
        assert source.id_prefix == "bfcl" and source.lock_record() == default.lock_record()
        assert isinstance(source, BFCLSource) and set(source.categories) == set(level.config)
        sizes.append(source.drawable_size("test"))
    assert sum(s or 0 for s in sizes) < (default.size("test") or 0)  # irrelevance is in no level


# -- listing ------------------------------------------------------------------------------------


def test_list_shows_the_levels_with_their_task_counts() -> None:
    from frostgym.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["list", "--levels"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "two single-digit operands, + and -" in text and "HumanEval publishes no difficulty" in text
    rows = {row["id"]: row for row in json.loads(runner.invoke(app, ["list", "--json"]).output)}
    arithmetic = rows["frostgym/Arithmetic-v0"]
    assert [level["level"] for level in arithmetic["levels"]] == [1, 2, 3, 4, 5]
    assert arithmetic["default_level"] == 4 and arithmetic["levels"][3]["default"]
    assert arithmetic["levels"][0]["tasks"] == {"train": None, "dev": 21, "test": 18}
    assert rows["frostgym/SQL-v0"]["default_level"] is None and rows["frostgym/SQL-v0"]["levels_note"]
    assert rows["frostgym/Code-v0"]["levels"] == [] and rows["frostgym/Code-v0"]["levels_note"]


def test_a_plan_at_a_narrowed_level_holds_only_that_levels_tasks() -> None:
    """Tools-v0's levels narrow what it draws from BFCL's one test split; a plan (eval,
    calibrate) must plan from the same part, and the whole-split plan stays as it was."""
    from frostgym.run.plan import make_plan

    whole = make_plan(["frostgym/Tools-v0"], split="test", episodes=40, samples=1, seed=0)
    assert len({p.tags[2] for p in whole}) > 4  # every category, as before levels
    for level, categories in ((1, {"simple_python", "simple_java", "simple_javascript", "live_simple"}), (4, None)):
        plan = make_plan(
            ["frostgym/Tools-v0"],
            split="test",
            episodes=40,
            samples=1,
            seed=0,
            env_options={"frostgym/Tools-v0": {"level": level}},
        )
        got = {p.tags[2] for p in plan}
        assert got <= (categories or {"parallel_multiple", "live_parallel_multiple"}), got
        assert len({p.task_id for p in plan}) == 40
