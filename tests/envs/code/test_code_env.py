"""Code-v0 end to end: real HumanEval from the installed package, real sandboxes."""

from __future__ import annotations

from pathlib import Path

import gymnasium
import pytest

import frostgym  # noqa: F401 - registers the ids
from frostgym.agents.oracle import OracleAgent
from frostgym.code.examples import visible_examples
from frostgym.code.extraction import assemble_program, extract_code
from frostgym.core.errors import UnknownTaskError
from frostgym.envs.code import CodeEnv
from frostgym.envs.code.tasks import humaneval_source
from frostgym.evaluate.replay import replay_card
from frostgym.run.runner import RunOptions
from frostgym.sandbox.backends import unavailable_reason
from tests.cards.test_card_schema import run

WRONG_ADD = "```python\ndef add(x: int, y: int) -> int:\n    return x - y\n```"
RIGHT_ADD = "```python\ndef add(x: int, y: int) -> int:\n    return x + y\n```"


def make(**kwargs: object) -> CodeEnv:
    env = gymnasium.make("frostgym/Code-v0", **kwargs).unwrapped
    assert isinstance(env, CodeEnv)
    return env


def test_humaneval_is_read_from_the_package_and_locked() -> None:
    source = humaneval_source()
    tasks = list(source.tasks("test"))
    assert len(tasks) == 164
    assert tasks[53].metadata["humaneval_id"] == "HumanEval/53" and tasks[53].task_id == "humaneval/test/53"
    assert source.size("dev") == 0
    with pytest.raises(UnknownTaskError, match="no task to draw in split 'dev'; its tasks are in 'test'"):
        source.task("dev", 0)
    env = make()
    assert len(env.fixture_sha256) == 64  # checked against fixtures/code/lock.json


def test_same_seed_same_episode() -> None:
    a, b = make(), make()
    obs_a, info_a = a.reset(seed=11)
    obs_b, info_b = b.reset(seed=11)
    assert obs_a == obs_b and info_a == info_b
    assert "```python" in obs_a[-1]["content"] and info_a["split"] == "test"
    _, info_c = a.reset(seed=12)
    assert info_c["episode_id"] != info_a["episode_id"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jail", "docker"])
def test_all_164_canonical_solutions_score_one(backend: str) -> None:
    reason = unavailable_reason(backend)  # type: ignore[arg-type]
    if reason is not None:
        pytest.skip(f"sandbox backend {backend!r} cannot run here: {reason}")
    env = make(sandbox=backend)
    failures = []
    for task in humaneval_source().tasks("test"):
        env.reset(seed=0, options={"task_id": task.task_id})
        _, reward, done, _, info = env.step(env.oracle_action())
        if reward != 1.0 or not done:
            failures.append((task.task_id, info["grade"]["details"]))
    assert not failures, failures[:3]


def test_grade_reports_status_components_and_hidden_test_fraction() -> None:
    env = make()
    env.reset(seed=0, options={"task_id": "humaneval/test/53"})
    _, reward, _, _, info = env.step(WRONG_ADD)
    grade = info["grade"]
    assert reward == 0.0 and grade["label"] == "failed" and grade["details"]["status"] == "failed"
    assert set(grade["components"]) == {"correctness", "tests_passed", "format"}
    assert grade["details"]["tests_total"] == 6 and 0 <= grade["components"]["tests_passed"] < 1
    partial = make(partial_credit=True)
    partial.reset(seed=0, options={"task_id": "humaneval/test/53"})
    _, reward, _, _, _ = partial.step("```python\ndef add(x, y):\n    return x + y if x < 500 else 0\n```")
    assert 0.0 < reward < 1.0


def test_run_tests_tool_shows_visible_examples_only() -> None:
    env = make(max_turns=3)
    obs, _ = env.reset(seed=0, options={"task_id": "humaneval/test/53"})
    assert "<run_tests>" in obs[0]["content"]
    obs, reward, done, _, info = env.step("<run_tests>\n" + WRONG_ADD)
    assert not done and reward == 0.0
    assert info["tool_calls"][0]["name"] == "run_tests"
    feedback = obs[-1]["content"]
    assert "0/2 examples passed" in feedback and "assert candidate(2, 3) == 5" in feedback
    assert "random" not in feedback  # nothing of the hidden tests
    _, reward, done, _, _ = env.step({"tool_calls": [{"name": "submit", "arguments": {"code": RIGHT_ADD[10:-4]}}]})
    assert done and reward == 1.0


def test_extraction_rules() -> None:
    prompt = humaneval_source().task("test", 53).prompt
    fenced = extract_code(
        "text\n```py\ndef add(x, y):\n    return 1\n```\nmore\n```python\ndef add(x, y):\n    return 2\n```", "add"
    )
    assert fenced.where == "fenced" and "return 2" in fenced.code and fenced.defines_entry_point
    body = extract_code("    return x + y\n", "add")
    assert body.where == "raw" and not body.defines_entry_point
    assert assemble_program(prompt, body).endswith('"""\n    return x + y\n\n')
    assert extract_code("<think>```python\ndef add(): pass\n```</think>", "add").where == "empty"
    assert visible_examples(prompt, "add") == [("add(2, 3)", "5"), ("add(5, 7)", "12")]


def test_code_card_replays_identically(tmp_path: Path) -> None:
    out = tmp_path / "card"
    card = run(out, OracleAgent(), ["frostgym/Code-v0"], episodes=6, options=RunOptions(split="test", batch_size=4))
    assert card["accounting"]["succeeded"] == 6
    report = replay_card(out)
    assert report.ok, report
