"""ToolsMultiTurn: BFCL multi-turn episodes on BFCL's real tool classes, real data, no mocks."""

from __future__ import annotations

import ast
import json
import random
import time
import uuid
import warnings
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env

from frostgym.core.errors import InvalidActionError, UnknownTaskError
from frostgym.core.grade import Grade
from frostgym.core.hashing import canonical_json
from frostgym.envs.tools.multi_turn import MAX_CALLS_PER_REPLY, MultiTurnToolsEnv
from frostgym.graders.adversarial import AdversarialCase, run_suite
from frostgym.graders.tool_state import GRADER
from frostgym.tools.bfcl_multi_turn import (
    CATEGORIES,
    ToolWorld,
    entry_by_id,
    gold_trace,
    load_entries,
    public_state,
    snapshot,
    task_id_of,
)
from frostgym.tools.calls import ToolCall


@pytest.fixture(scope="module")
def env() -> MultiTurnToolsEnv:
    return MultiTurnToolsEnv()


def _play(env: MultiTurnToolsEnv, task_id: str, script: list[Any], seed: int = 0) -> tuple[list[Any], dict[str, Any]]:
    """Play a scripted episode: '@oracle' is the oracle's reply, {"step", "times"} a repeated
    reply; once the script runs out, the oracle plays on."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    replies = [r for item in script for r in ([item["step"]] * item["times"] if isinstance(item, dict) else [item])]
    trace: list[Any] = [obs, info]
    done = False
    while not done:
        reply = replies.pop(0) if replies else "@oracle"
        action = env.oracle_action() if reply == "@oracle" else reply
        obs, reward, done, truncated, info = env.step(action)
        assert not truncated
        trace.append([action, obs, reward, info])
    return trace, info


def _oracle(env: MultiTurnToolsEnv, task_id: str) -> dict[str, Any]:
    _, info = _play(env, task_id, [])
    return info


# -- (1) every gold sequence ---------------------------------------------------------------


@pytest.mark.slow
def test_every_gold_sequence_reproduces_the_gold_state_and_scores_one(env: MultiTurnToolsEnv) -> None:
    """All 800 entries of the four categories (about 5 s)."""
    played = 0
    for category in CATEGORIES:
        for entry in load_entries(category):
            info = _oracle(env, task_id_of(entry))
            grade = info["grade"]
            assert grade["score"] == 1.0 and grade["label"] is None, (entry.bfcl_id, grade["details"])
            assert grade["details"]["turns_passed"] == len(entry.turns)
            assert env.world.snapshot() == gold_trace(entry.bfcl_id)[-1].state, entry.bfcl_id
            played += 1
    assert played == 800


def test_env_passes_gymnasium_check_and_reports_turns(env: MultiTurnToolsEnv) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(MultiTurnToolsEnv(), skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert [m["role"] for m in obs] == ["system", "user"]
    assert env.tools and all(t["type"] == "function" for t in env.tools)
    assert all(t["function"]["name"] in obs[0]["content"] for t in env.tools)
    obs, reward, done, _, info = env.step(env.oracle_action())
    assert not done and reward == 0.0 and obs[-1]["role"] == "user" and "<tool_response>" in obs[-1]["content"]
    assert info["tool_calls"] and len(info["tool_calls"]) == len(info["tool_results"])
    json.dumps(info)


def test_miss_func_adds_the_held_out_functions_at_their_turn(env: MultiTurnToolsEnv) -> None:
    entry = entry_by_id("multi_turn_miss_func_0")
    ((turn, names),) = entry.missed_functions.items()
    env.reset(seed=0, options={"task_id": task_id_of(entry)})
    assert not set(names) & {t["function"]["name"] for t in env.tools}
    info: dict[str, Any] = {"user_turn": 0}
    while info["user_turn"] < turn:
        obs, _, done, _, info = env.step(env.oracle_action())
        assert not done
    assert "turn_grade" in info and info["turn_grade"]["score"] == 1.0
    assert set(names) <= {t["function"]["name"] for t in env.tools}
    assert "I have updated some more functions" in obs[-1]["content"] and names[0] in obs[-1]["content"]


def test_task_ids_and_splits() -> None:
    env = MultiTurnToolsEnv(categories=("long_context",))
    _, info = env.reset(seed=1)
    assert info["task_id"].startswith("bfcl_mt/long_context/test/") and info["split"] == "test"
    with pytest.raises(UnknownTaskError, match="split"):
        env.reset(seed=1, options={"split": "dev"})
    with pytest.raises(UnknownTaskError, match="outside split"):
        env.reset(seed=1, options={"task_id": "bfcl_mt/base/test/999"})
    _, info = env.reset(seed=0, options={"task_id": "bfcl_mt/test/0"})
    assert info["task_id"] == "bfcl_mt/base/test/0"
    with pytest.raises(ValueError, match="categories"):
        MultiTurnToolsEnv(categories=("nope",))
    with pytest.raises(ValueError, match="max_steps_per_turn"):
        MultiTurnToolsEnv(max_steps_per_turn=1)


# -- (2) determinism -------------------------------------------------------------------------


def _episodes(seeds: range) -> str:
    env = MultiTurnToolsEnv()
    out = []
    for seed in seeds:
        _, info = env.reset(seed=seed)
        out.append(_play(env, info["task_id"], [], seed=seed))
        out.append(_play(env, info["task_id"], ["[ls(a=True)]", "pwd()", "no idea"], seed=seed))
    return canonical_json(out)


def test_same_seed_same_episode_byte_for_byte() -> None:
    random.seed(1)
    first = _episodes(range(12))
    random.seed(2)  # the global RNG must not matter: the tool classes draw from their own
    assert _episodes(range(12)) == first


def test_random_ids_and_clock_are_per_episode_and_frozen() -> None:
    """Booking ids come from the scenario's seed, ages from the frozen clock."""
    entry = entry_by_id("multi_turn_base_199")
    call = gold_trace(entry.bfcl_id)[0].calls[-1]
    random.seed(7)
    first = ToolWorld(entry).execute(call).text
    random.seed(8)
    assert ToolWorld(entry).execute(call).text == first and "booking_id" in first
    travel = ToolWorld(entry_by_id("multi_turn_base_150"))
    verify = ToolCall(
        "verify_traveler_information",
        {"first_name": "x", "last_name": "y", "date_of_birth": "2006-09-02", "passport_number": "US1"},
    )
    travel.instances["TravelAPI"].user_first_name, travel.instances["TravelAPI"].user_last_name = "x", "y"
    assert "at least 18" in travel.execute(verify).text  # one day short of 18 on 2024-09-01


# -- (3) adversarial suite ------------------------------------------------------------------


def test_adversarial_suite(env: MultiTurnToolsEnv, record_property: Any) -> None:
    def grade(case: AdversarialCase) -> Grade:
        _, info = _play(env, case.gold, list(case.context["replies"]))
        return Grade.from_dict(info["grade"])

    report = run_suite("tools_multi_turn", grade, GRADER)
    record_property("adversarial_report", report.render())
    assert report.passed, report.render()
    assert report.label_coverage == 1.0, report.render()


# -- (4) bad input ------------------------------------------------------------------------------


def _fresh(env: MultiTurnToolsEnv) -> None:
    env.reset(seed=0, options={"task_id": "bfcl_mt/base/test/0"})


def test_garbage_and_malformed_calls_get_error_observations(env: MultiTurnToolsEnv) -> None:
    for reply in [
        "<tool_call>{not json</tool_call>",
        '<tool_call>{"name": "cd", "arguments": "{bad"}</tool_call>',
        "<tool_call>" + "[" * 5000 + "</tool_call>",
        "cd(folder=__import__('os').getcwd())",
        '<tool_call>{"name": "cd"',
    ]:
        _fresh(env)
        obs, reward, done, _, info = env.step(reply)
        assert not done and reward == 0.0
        assert "Error" in obs[-1]["content"], reply[:40]
        json.dumps(info)


def test_bad_calls_become_error_results(env: MultiTurnToolsEnv) -> None:
    _fresh(env)
    replies = [
        '<tool_call>{"name": "rm_everything", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "cd", "arguments": {"folder": "document", "x": 1}}</tool_call>',
        '<tool_call>{"name": "mkdir", "arguments": {}}</tool_call>',
        "cd(folder={1, 2}, extra=b'x', z=1j)",
        '<tool_call>{"name": "_load_scenario", "arguments": {"scenario": {}}}</tool_call>',
    ]
    for reply in replies:
        obs, _, done, _, info = env.step(reply)
        assert not done and "Error" in obs[-1]["content"], reply
        json.dumps(info)  # non-JSON literals in arguments are recorded as plain data
        assert all(not r["ok"] for r in info.get("tool_results", []))


def test_math_arguments_that_would_run_for_minutes_are_refused() -> None:
    world = ToolWorld(entry_by_id(next(e.bfcl_id for e in load_entries("base") if "MathAPI" in e.involved_classes)))
    started = time.perf_counter()
    for call in [
        ToolCall("power", {"base": 9, "exponent": 10**12}),
        ToolCall("logarithm", {"value": 2.0, "base": 3.0, "precision": 10**9}),
        ToolCall("square_root", {"number": 2.0, "precision": 10**9}),
    ]:
        assert not world.execute(call).ok
    assert world.execute(ToolCall("logarithm", {"value": 100.0, "base": 10.0, "precision": 5})).ok
    assert time.perf_counter() - started < 2.0


def test_huge_replies_and_many_calls_are_bounded(env: MultiTurnToolsEnv) -> None:
    _fresh(env)
    started = time.perf_counter()
    obs, _, done, _, info = env.step("x" * 10_000_000)
    assert done and info["grade"]["label"] == "too_long" and time.perf_counter() - started < 5.0
    assert len(obs[-1]["content"]) < 30_000
    _fresh(env)
    many = "\n".join(['<tool_call>{"name": "pwd", "arguments": {}}</tool_call>'] * (MAX_CALLS_PER_REPLY + 1))
    obs, _, done, _, info = env.step(many)
    assert not done and "none ran" in obs[-1]["content"] and "tool_calls" not in info
    parallel = "\n".join(['<tool_call>{"name": "pwd", "arguments": {}}</tool_call>'] * MAX_CALLS_PER_REPLY)
    _, _, _, _, info = env.step(parallel)
    assert len(info["tool_results"]) == MAX_CALLS_PER_REPLY  # parallel calls are never truncated


def test_non_text_actions_and_structured_calls(env: MultiTurnToolsEnv) -> None:
    _fresh(env)
    with pytest.raises(InvalidActionError):
        env.step(42)  # type: ignore[arg-type]
    action = {"content": "", "tool_calls": [{"function": {"name": "cd", "arguments": '{"folder": "document"}'}}]}
    obs, _, _, _, info = env.step(action)
    assert info["tool_calls"] == [{"name": "cd", "arguments": {"folder": "document"}}]
    assert '"current_working_directory": "document"' in obs[-1]["content"]


def test_step_cap_ends_the_episode_with_a_grade() -> None:
    env = MultiTurnToolsEnv(max_turns=3)
    _, info = _play(env, "bfcl_mt/base/test/0", [])
    assert info["grade"]["score"] == 0.0 and info["grade"]["label"] == "turn_limit"


# -- (5) cross-check against BFCL's own execution --------------------------------------------------


def test_states_and_results_match_bfcls_own_executor() -> None:
    utils = pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    rng = random.Random(0)
    sample = [e for c in CATEGORIES for e in rng.sample(load_entries(c), 12)]
    for entry in sample:
        model = f"frostgym_xcheck_{uuid.uuid4().hex}"
        ours = gold_trace(entry.bfcl_id)
        for turn, calls in enumerate(entry.gold):
            results, instances = utils.execute_multi_turn_func_call(
                list(calls),
                json.loads(json.dumps(entry.initial_config)),
                list(entry.involved_classes),
                model,
                entry.bfcl_id,
                long_context=entry.long_context,
            )
            assert snapshot(instances) == ours[turn].state, (entry.bfcl_id, turn)
            assert [_loaded(r) for r in results] == [_loaded(r) for r in ours[turn].results], (entry.bfcl_id, turn)


def _loaded(text: str) -> Any:
    """A result as data: ours are JSON, BFCL's are JSON for dicts and ``str()`` otherwise."""
    # BFCL's long-context watch list holds an Ellipsis: str() shows it bare, public_state() as its repr.
    for read in (json.loads, lambda t: ast.literal_eval(t.replace(", Ellipsis", ", 'Ellipsis'"))):
        try:
            return public_state(read(text))
        except (ValueError, SyntaxError):
            continue
    return text
