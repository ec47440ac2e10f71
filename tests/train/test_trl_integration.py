"""frostgym.train.trl: the dataset and reward functions agree with the envs, and a
tiny random model runs a few GRPO steps on CPU with every reward function logged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra (torch, transformers) is not installed")
trl = pytest.importorskip("trl", reason="trl is not installed")
pytest.importorskip("datasets", reason="datasets is not installed")

import frostgym  # noqa: E402,F401
from frostgym.agents.smollm2 import tiny_random_model  # noqa: E402
from frostgym.cards.card import load_card  # noqa: E402
from frostgym.core.env import FrozenEnv  # noqa: E402
from frostgym.core.errors import MultiTurnNotSupportedError  # noqa: E402
from frostgym.core.seeding import derive_seed  # noqa: E402
from frostgym.train.trl import env_dataset, reward_functions, reward_weights, sql_environment_factory  # noqa: E402

pytestmark = pytest.mark.slow

JUNK = ["", "I have no idea.", "<answer>definitely not this</answer>", "<tool_call>{not json</tool_call>"]


def columns(data: Any) -> dict[str, list[Any]]:
    return {k: data[k] for k in ("task_id", "episode_seed", "split")}


@pytest.mark.parametrize(("env_id", "split"), [("frostgym/Math-v0", "train"), ("frostgym/Tools-v0", "test")])
def test_rewards_match_env_on_oracle_and_junk(env_id: str, split: Any) -> None:
    data = env_dataset(env_id, split=split, n=4, seed=7)
    assert len(set(data["task_id"])) == 4
    assert data.column_names == ["prompt", "task_id", "episode_seed", "split"]
    funcs = reward_functions(env_id)
    names = [f.__name__ for f in funcs]
    assert names[-1] == "frostgym_score" and "frostgym_correctness" in names and len(set(names)) == len(names)
    assert reward_weights(funcs) == [0.0] * (len(funcs) - 1) + [1.0]

    env = gym.make(env_id, split=split)
    prompts, completions, expected = [], [], []
    for row in data:
        observation, info = env.reset(seed=row["episode_seed"], options={"task_id": row["task_id"]})
        assert row["prompt"] == [{"role": m["role"], "content": m["content"]} for m in observation]
        assert info["task_id"] == row["task_id"]
        for reply in [cast(FrozenEnv, env.unwrapped).oracle_action(), *JUNK]:
            env.reset(seed=row["episode_seed"], options={"task_id": row["task_id"]})
            _, reward, terminated, _, step_info = env.step(reply)
            assert terminated
            grade = step_info["grade"]
            prompts.append(row["prompt"])
            completions.append([{"role": "assistant", "content": reply}])
            expected.append([grade["components"][n.removeprefix("frostgym_")] for n in names[:-1]] + [reward])
    rows = {k: [v for v in vs for _ in range(1 + len(JUNK))] for k, vs in columns(data).items()}
    got = [f(prompts=prompts, completions=completions, **rows) for f in funcs]
    assert [list(col) for col in zip(*got, strict=True)] == expected
    assert got[-1][:: 1 + len(JUNK)] == [1.0] * 4  # the oracle passes every task
    assert any(v != 1.0 for v in got[-1])  # and junk does not
    # Text (non-conversational) completions are graded the same way.
    assert funcs[-1](prompts=prompts, completions=[c[0]["content"] for c in completions], **rows) == got[-1]


def test_dataset_seeds_come_from_the_plan_derivation() -> None:
    data = env_dataset("frostgym/Arithmetic-v0", split="dev", n=3, seed=1)
    for row in data:
        assert row["episode_seed"] == derive_seed("episode", 1, "frostgym/Arithmetic-v0", row["task_id"], 0)
    assert env_dataset("frostgym/Arithmetic-v0", split="dev", n=3, seed=1).to_dict() == data.to_dict()


def test_multi_turn_envs_are_refused_except_sql() -> None:
    with pytest.raises(MultiTurnNotSupportedError, match="multi-turn"):
        reward_functions("frostgym/ToolsHTTP-v0")
    with pytest.raises(MultiTurnNotSupportedError):
        sql_environment_factory("frostgym/ToolsHTTP-v0")


def test_sql_tool_env_plays_real_episodes() -> None:
    data = env_dataset("frostgym/SQL-v0", split="dev", n=2, seed=0)
    funcs = reward_functions("frostgym/SQL-v0")
    factory = sql_environment_factory()
    oracle_env = gym.make("frostgym/SQL-v0", split="dev")
    environments, completions = [], []
    for i, row in enumerate(data):
        oracle_env.reset(seed=row["episode_seed"], options={"task_id": row["task_id"]})
        gold = (
            str(cast(FrozenEnv, oracle_env.unwrapped).oracle_action())
            .removeprefix("<answer>")
            .removesuffix("</answer>")
        )
        tool_env = factory()
        tool_env.reset(**row)
        assert "Result of your query" in tool_env.run_sql("SELECT 1")
        if i == 0:
            assert tool_env.submit_sql(gold) == "graded: match"
            completions.append([{"role": "assistant", "content": "done"}])
        else:  # no submit_sql call: the last reply is stepped as text
            completions.append([{"role": "assistant", "content": "<answer>SELECT 1</answer>"}])
        environments.append(tool_env)
    got = [
        f(prompts=data["prompt"], completions=completions, environments=environments, **columns(data)) for f in funcs
    ]
    assert got[-1] == [1.0, 0.0]
    assert "over" in environments[0].run_sql("SELECT 1")


@pytest.fixture(scope="module")
def tiny_model() -> tuple[Any, Any]:
    return tiny_random_model(0, hidden_size=32, layers=1)


def test_grpo_smoke_logs_every_reward_function(tiny_model: tuple[Any, Any], tmp_path: Path) -> None:
    model, tokenizer = tiny_model
    funcs = reward_functions("frostgym/Math-v0")
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        reward_weights=reward_weights(funcs),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    data = env_dataset("frostgym/Math-v0", split="train", n=8, seed=0)
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=funcs, args=args, train_dataset=data, processing_class=tokenizer
    )
    trainer.train()
    assert trainer.state.global_step == 2
    logged = {key for entry in trainer.state.log_history for key in entry}
    for func in funcs:
        assert f"rewards/{func.__name__}/mean" in logged
    language = [e["rewards/frostgym_language/mean"] for e in trainer.state.log_history if "reward" in e]
    assert len(language) == 2 and all(0.0 <= v <= 1.0 for v in language)


def test_the_grpo_example_runs_on_a_curriculum_and_logs_every_step(tmp_path: Path) -> None:
    """``examples/grpo_math.py --tiny``: cards before and after on the same plan, one
    ``steps.jsonl`` line per step with the levels it trained on, and a summary."""
    out = tmp_path / "run"
    command = [
        sys.executable, "examples/grpo_math.py", "--tiny", "--steps", "2", "--batch", "4", "--eval-episodes", "2",
        "--env", "frostgym/Arithmetic-v0", "--curriculum", "1,2", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True, timeout=600)
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert all({"reward", "reward_std", "completions/mean_length", "levels"} <= s.keys() for s in steps)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["curriculum"] and summary["env"] == "frostgym/Arithmetic-v0"
    before, _, _ = load_card(out / "before")
    after, _, _ = load_card(out / "after")
    assert before["plan"]["sha256"] == after["plan"]["sha256"]
