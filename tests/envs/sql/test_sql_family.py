"""The SQL family: databases, tasks, grader, env, all on the real fixture databases."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from frostgym.core.errors import InvalidActionError
from frostgym.core.grade import Grade
from frostgym.envs.sql import sql_source
from frostgym.envs.sql.tasks import FEATURES, load_handwritten
from frostgym.graders.adversarial import AdversarialCase, run_suite
from frostgym.graders.sql_execution import GRADER, compare_results, grade_sql
from frostgym.sql.connections import shared_database
from frostgym.sql.databases import (
    DATABASES,
    build_database,
    content_sha256,
    database_path,
    file_sha256,
    read_db_lock,
)
from frostgym.sql.executor import QueryResult, SafeDatabase
from frostgym.sql.statements import orders_rows
from tests.conftest import make_env


@pytest.fixture(scope="module")
def reversed_dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SafeDatabase]:
    """Same content, rows stored in reverse: exposes results that depend on storage order."""
    folder = tmp_path_factory.mktemp("reversed")
    return {n: SafeDatabase(build_database(s, folder / f"{n}.sqlite", reverse_rows=True)) for n, s in DATABASES.items()}


@pytest.mark.slow
def test_builds_are_byte_for_byte_reproducible_and_locked(tmp_path: Path) -> None:
    lock = read_db_lock()
    for name, spec in DATABASES.items():
        a = build_database(spec, tmp_path / f"{name}-a.sqlite")
        b = build_database(spec, tmp_path / f"{name}-b.sqlite")
        assert file_sha256(a) == file_sha256(b)
        assert content_sha256(a) == lock[name]["content_sha256"]
        if lock[name]["sqlite_version"] == sqlite3.sqlite_version:
            assert file_sha256(a) == lock[name]["file_sha256"]


def test_at_least_300_handwritten_tasks_with_coverage() -> None:
    drafts = load_handwritten()
    assert len(drafts) >= 300
    by_db = Counter(d.metadata["database"] for d in drafts)
    assert set(by_db) == set(DATABASES) and min(by_db.values()) >= 50
    assert {d.difficulty for d in drafts} == {"easy", "medium", "hard", "extra"}
    features = Counter(f for d in drafts for f in d.metadata["features"])
    assert set(features) == FEATURES, FEATURES - set(features)
    assert min(features.values()) >= 8, features


def _reverse_scan(name: str) -> Callable[[str], QueryResult]:
    """Run queries with SQLite scanning unordered selects backwards: for rowid tables,
    storage order ignores insertion order, so only this exposes missing tie-breakers."""
    conn = sqlite3.connect(f"file:{database_path(name)}?mode=ro", uri=True)
    conn.execute("PRAGMA reverse_unordered_selects = ON")

    def run(sql: str) -> QueryResult:
        cursor = conn.execute(sql)
        return QueryResult("ok", tuple(d[0] for d in cursor.description), tuple(cursor.fetchall()))

    return run


@pytest.mark.slow
def test_every_gold_query_is_non_empty_and_deterministic(reversed_dbs: dict[str, SafeDatabase]) -> None:
    reverse_scans = {name: _reverse_scan(name) for name in DATABASES}
    for draft in load_handwritten():
        name = draft.metadata["database"]
        gold = shared_database(name).run(draft.answer)
        assert gold.ok and gold.rows, (draft.metadata["id"], gold.error)
        ordered = orders_rows(draft.answer)
        for again in (reversed_dbs[name].run(draft.answer), reverse_scans[name](draft.answer)):
            assert compare_results(gold, again, ordered=ordered, digits=9) is None, draft.metadata["id"]


def test_oracle_scores_one_on_every_handwritten_task() -> None:
    env = make_env("frostgym/SQL-v0")
    source = sql_source()
    total = 0
    for split in ("dev", "test", "private"):
        for task in source.tasks(split):
            env.reset(seed=0, options={"task_id": task.task_id})
            _, reward, terminated, _, info = env.step(env.oracle_action())
            assert terminated and reward == 1.0, (task.metadata["id"], info["grade"])
            total += 1
    assert total == len(load_handwritten())


def test_train_templates_are_unbounded_disjoint_and_solvable() -> None:
    env = make_env("frostgym/SQL-v0", split="train")
    handwritten = {d.prompt for d in load_handwritten()}
    questions = set()
    for seed in range(60):
        env.reset(seed=seed)
        assert env.task.prompt not in handwritten
        questions.add(env.task.prompt)
        _, reward, _, _, _ = env.step(env.oracle_action())
        assert reward == 1.0, env.task.answer
    assert len(questions) > 40


def test_adversarial_suite(record_property: Callable[[str, object], None]) -> None:
    def grade(case: AdversarialCase) -> Grade:
        gold = None if case.context.get("destructive") else case.gold
        db = shared_database(case.context["database"])
        return grade_sql(case.reply, gold, db, explored=case.context.get("explored", ()))

    report = run_suite("sql", grade, GRADER)
    record_property("adversarial_report", report.render())
    assert report.passed, report.render()
    assert report.label_coverage == 1.0


def test_multi_turn_exploration_then_answer() -> None:
    env = make_env("frostgym/SQL-v0", max_turns=3)
    obs, _ = env.reset(seed=4)
    assert "CREATE TABLE" in obs[1]["content"] and "Question:" in obs[1]["content"]
    obs, reward, terminated, _, info = env.step("<think>look</think><sql>SELECT 1 AS one</sql>")
    assert not terminated and reward == 0.0 and "grade" not in info
    assert obs[-1]["role"] == "user" and "one" in obs[-1]["content"] and "2 turn(s) left" in obs[-1]["content"]
    obs, _, terminated, _, _ = env.step("let me think")
    assert not terminated and "no <sql>" in obs[-1]["content"]
    _, reward, terminated, _, info = env.step("<sql>SELECT 2</sql>")  # the last turn without an answer
    assert terminated and reward == 0.0 and info["grade"]["label"] == "no_answer"


def test_tool_call_actions() -> None:
    env = make_env("frostgym/SQL-v0")
    env.reset(seed=2)
    gold = env.task.answer
    obs, _, terminated, _, _ = env.step(
        {"tool_calls": [{"name": "run_sql", "arguments": json.dumps({"query": "SELECT 7"})}]}
    )
    assert not terminated and "7" in obs[-1]["content"]
    for bad in (
        {"tool_calls": []},
        {"tool_calls": [{"name": "drop_db", "arguments": {}}]},
        {"tool_calls": [{"name": "run_sql", "arguments": "{not json"}]},
        {"tool_calls": [{"name": "run_sql", "arguments": {"query": "SELECT 1"}}] * 2},
        {"tool_calls": [{"name": "run_sql", "arguments": {"query": 1}}]},
        {"tool_calls": ["run_sql"]},
    ):
        with pytest.raises(InvalidActionError):
            env.step(bad)
    # OpenAI's wrapping reads the same as in every tool env (one reader: tools.calls).
    wrapped = {"type": "function", "function": {"name": "run_sql", "arguments": json.dumps({"query": "SELECT 8"})}}
    obs, _, terminated, _, _ = env.step({"tool_calls": [wrapped]})
    assert not terminated and "8" in obs[-1]["content"]
    _, reward, terminated, _, _ = env.step({"tool_calls": [{"name": "submit_sql", "arguments": {"query": gold}}]})
    assert terminated and reward == 1.0


def test_exploration_of_a_runaway_query_comes_back_as_an_error_message() -> None:
    env = make_env("frostgym/SQL-v0")
    env.reset(seed=0)
    obs, _, terminated, _, _ = env.step("<sql>SELECT * FROM sqlite_master a, sqlite_master b, sqlite_master c</sql>")
    assert not terminated and "showing the first 20" in obs[-1]["content"]
    obs, _, _, _, _ = env.step("<sql>DROP TABLE track</sql>")
    assert "Error (not_select)" in obs[-1]["content"]


@pytest.mark.slow
def test_a_tampered_cached_database_is_refused(tmp_path: Path) -> None:
    """The cache is outside the package; start-up must notice if a file there changed."""
    import os
    import subprocess
    import sys

    name = "cars"
    expected = read_db_lock()[name]["content_sha256"]
    path = build_database(DATABASES[name], tmp_path / "sql" / f"{name}-{expected[:16]}.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE car SET mpg = mpg + 1 WHERE id = 1")
    conn.close()
    probe = "from frostgym.sql.databases import database_path; database_path('cars')"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "FROSTGYM_CACHE": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "FixtureMismatchError" in result.stderr and "content hash" in result.stderr
