"""frostgym.train.trl: the dataset and reward functions agree with the envs on every id,
the ``environment_factory`` objects play real episodes with the env's tool schemas, and
tiny random models run a few GRPO steps on CPU (with every reward function logged; through
TRL's tool loop on ToolsHTTP-v0)."""

from __future__ import annotations

import asyncio
import inspect
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
from frostgym.agents.smollm2 import ensure_converted, tiny_random_model  # noqa: E402
from frostgym.cards.card import load_card  # noqa: E402
from frostgym.core.env import FrozenEnv  # noqa: E402
from frostgym.core.messages import Action  # noqa: E402
from frostgym.core.seeding import derive_seed  # noqa: E402
from frostgym.envs.registry import ENTRIES  # noqa: E402
from frostgym.tools.calls import parse_reply  # noqa: E402
from frostgym.train.session import TaskRow  # noqa: E402
from frostgym.train.trl import (  # noqa: E402
    CUSTOMER_ID,
    FINISH_TURN,
    HTTP_ID,
    MESSAGE_CUSTOMER,
    MULTI_TURN_ID,
    PER_TASK_TOOLS,
    TOOL_ENVS,
    CodeToolEnv,
    SQLToolEnv,
    ToolEnv,
    env_dataset,
    environment_factory,
    reward_functions,
    reward_weights,
    sql_environment_factory,
    tool_env_class,
)
from tests.integrations.reference import JUNK as JUNK_REPLY  # noqa: E402
from tests.integrations.reference import junk_actions, oracle_actions, split_of  # noqa: E402

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


def test_environment_factory_serves_every_multi_turn_id_and_routes_every_row() -> None:
    assert isinstance(environment_factory("frostgym/SQL-v0")(), SQLToolEnv)
    assert isinstance(environment_factory("frostgym/Code-v0")(), CodeToolEnv)
    assert isinstance(sql_environment_factory()(), SQLToolEnv)
    for env_id in PER_TASK_TOOLS:
        factories = environment_factory(env_id)
        assert isinstance(factories, dict) and len(factories) > 1
        data = env_dataset(env_id, split="test", n=20, seed=0)
        assert data.column_names == ["prompt", "task_id", "episode_seed", "split", "environment"]
        for row in data:  # every row's tool set has its class, whose tools are the env's
            env = factories[row["environment"]]()
            env.reset(**{k: v for k, v in row.items() if k != "environment"})
            assert env.episode is not None
            offered = {t["function"]["name"] for t in env.episode.tools}
            assert offered <= set(env.tool_names)  # ToolsMultiTurn-v0: later turns may add more
            extra = {MULTI_TURN_ID: {FINISH_TURN}, CUSTOMER_ID: {MESSAGE_CUSTOMER}}.get(env_id, set())
            assert set(tool_methods(env)) == set(env.tool_names) | extra
        other = next(k for k in factories if k != data[0]["environment"])
        with pytest.raises(ValueError, match="route rows"):
            factories[other]().reset(**{k: v for k, v in data[0].items() if k != "environment"})
    with pytest.raises(ValueError, match="reward_functions alone"):
        environment_factory("frostgym/Math-v0")
    with pytest.raises(ValueError, match="use environment_factory"):
        sql_environment_factory("frostgym/ToolsHTTP-v0")


def tool_methods(env: ToolEnv) -> dict[str, Any]:
    """The tools TRL finds on an environment object (as ``GRPOTrainer`` lists them)."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


def test_a_replys_calls_are_one_env_step_and_finish_turn_the_next() -> None:
    """Calls gathered together (TRL gathers one reply's async tools) are one env action: the
    first gets the env's message, the rest ""; ``finish_turn`` in the same reply is the
    next reply, whose result is the next user request."""
    data = env_dataset(MULTI_TURN_ID, split="test", n=40, seed=0)
    factories = environment_factory(MULTI_TURN_ID)
    for dataset_row in data:
        row = TaskRow(MULTI_TURN_ID, "test", dataset_row["task_id"], dataset_row["episode_seed"])
        actions = oracle_actions(row)
        if len(tool_calls_of(actions[0])) > 1 and len(actions) > 2:
            break
    else:
        raise AssertionError("no entry whose first gold turn has several calls")
    reference = gym.make(MULTI_TURN_ID, split="test")
    reference.reset(seed=row.episode_seed, options={"task_id": row.task_id})
    first, _, _, _, _ = reference.step(actions[0])
    after_close, _, _, _, _ = reference.step(actions[1])
    reference.close()
    env = factories[dataset_row["environment"]]()
    env.reset(**{k: v for k, v in dataset_row.items() if k != "environment"})

    async def reply() -> list[str]:
        calls = [getattr(env, name)(**args) for name, args in tool_calls_of(actions[0])]
        return list(await asyncio.gather(*calls, getattr(env, FINISH_TURN)()))

    results = asyncio.run(reply())
    assert len(env.steps) == 2
    assert results[0] == first[-1]["content"]
    assert results[1:-1] == [""] * (len(results) - 2)
    assert results[-1] == after_close[-1]["content"]


#: What transformers' ``get_json_schema`` cannot say of an env's schema (the guide lists them).
LOSSY = ("default", "minimum", "maximum", "additionalProperties")


def comparable(schema: dict[str, Any]) -> dict[str, Any]:
    """A function schema without what ``get_json_schema`` loses: bounds, defaults, closed
    objects, a nested object's own properties, an empty ``required``, the order of
    ``required``, runs of whitespace in descriptions, and the return type."""

    def prop(node: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in node.items() if k not in LOSSY and k != "properties"}
        if "description" in out:
            out["description"] = " ".join(out["description"].split())
        if isinstance(out.get("items"), dict):
            out["items"] = prop(out["items"])
        return out

    function = schema["function"]
    parameters = function.get("parameters") or {}
    return {
        "name": function["name"],
        "description": " ".join(function["description"].split()),
        "properties": {k: prop(v) for k, v in (parameters.get("properties") or {}).items()},
        "required": sorted(parameters.get("required") or ()),
    }


def test_tool_methods_render_the_env_schemas() -> None:
    """What TRL renders for each tool method (transformers' ``get_json_schema``) is the
    env's own schema, up to ``comparable``'s documented losses; for a few it is exact."""
    from transformers.utils import get_json_schema

    from frostgym.envs.code.env import TOOLS as CODE_TOOLS
    from frostgym.envs.sql.env import TOOLS as SQL_TOOLS
    from frostgym.tools.bfcl_multi_turn import _doc_index, tools_for
    from frostgym.tools.http.clients import tool_schemas

    for cls, schemas in ((SQLToolEnv, SQL_TOOLS), (CodeToolEnv, CODE_TOOLS)):
        for schema in schemas:
            rendered = get_json_schema(getattr(cls, schema["function"]["name"]))
            assert rendered["function"].pop("return") == {"type": "string"}  # from ``-> str``; templates show it
            assert rendered == schema
    checked = 0
    for env_id, schemas in ((HTTP_ID, tool_schemas()), (MULTI_TURN_ID, tools_for(list(_doc_index())))):
        cls = tool_env_class(env_id, schemas)
        for schema in schemas:
            rendered = get_json_schema(getattr(cls, schema["function"]["name"]))
            assert comparable(rendered) == comparable(schema), schema["function"]["name"]
            checked += 1
    assert checked == len(tool_schemas()) + len(_doc_index())
    exact = tool_env_class(HTTP_ID, tool_schemas(["get_current_weather", "search_flights", "convert_units"]))
    for schema in tool_schemas(["get_current_weather", "search_flights", "convert_units"]):
        assert get_json_schema(getattr(exact, schema["function"]["name"])) == {
            **schema,
            "function": {**schema["function"], "parameters": {
                k: v for k, v in schema["function"]["parameters"].items() if k != "additionalProperties"
            }},
        }  # fmt: skip
    finish = get_json_schema(tool_env_class(MULTI_TURN_ID, tools_for(["cat"])).finish_turn)
    assert finish["function"]["parameters"] == {"type": "object", "properties": {}}


def tool_calls_of(action: Action) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(action, dict):
        return [(c["name"], dict(c["arguments"])) for c in action.get("tool_calls") or []]
    return [(c.name, dict(c.arguments)) for c in parse_reply(str(action)).calls]


def play_through_factory(row: TaskRow, dataset_row: dict[str, Any], actions: list[Action]) -> tuple[ToolEnv, str]:
    """Every action but the last through the tool methods (a reply's calls gathered, a
    reply without calls on ToolsMultiTurn-v0 as ``finish_turn``), as TRL's loop would; the
    last reply's text is what the reward functions then grade."""
    factory = environment_factory(row.env_id)
    env = (factory[dataset_row["environment"]] if isinstance(factory, dict) else factory)()
    env.reset(**{k: v for k, v in dataset_row.items() if k != "environment"})

    async def reply(calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
        return list(await asyncio.gather(*(getattr(env, name)(**args) for name, args in calls)))

    for action in actions[:-1]:
        calls = tool_calls_of(action)
        if calls:
            asyncio.run(reply(calls))
        elif row.env_id == MULTI_TURN_ID:
            asyncio.run(getattr(env, FINISH_TURN)())
        else:  # a reply without calls ends TRL's conversation: the rest must repeat it
            assert all(a == action for a in actions[actions.index(action) :])
            return env, str(action)
    return env, str(actions[-1])


@pytest.mark.parametrize("env_id", [e.id for e in ENTRIES])
def test_reward_functions_on_every_id_equal_the_env_grade_on_oracle_and_junk(env_id: str) -> None:
    split = split_of(env_id)
    data = env_dataset(env_id, split=split, n=2, seed=0)
    funcs = reward_functions(env_id)
    names = [f.__name__.removeprefix("frostgym_") for f in funcs]
    for dataset_row in data:
        row = TaskRow(env_id, split, dataset_row["task_id"], dataset_row["episode_seed"])
        cols = {k: [dataset_row[k]] for k in ("task_id", "episode_seed", "split")}
        for actions in (oracle_actions(row), junk_actions(row)):
            expected = gym_grade(row, actions)
            want = [expected["components"][n] for n in names[:-1]] + [expected["score"]]
            if env_id in TOOL_ENVS:
                env, last = play_through_factory(row, dataset_row, actions)
                completions = [[{"role": "assistant", "content": last}]]
                got = [
                    f(prompts=[dataset_row["prompt"]], completions=completions, environments=[env], **cols)[0]
                    for f in funcs
                ]
                assert got == want, (row.task_id, actions)
                assert env.episode is not None and env.episode.grade == expected
            else:
                (text,) = actions
                completions = [[{"role": "assistant", "content": str(text)}]]
                got = [f(prompts=[dataset_row["prompt"]], completions=completions, **cols)[0] for f in funcs]
                assert got == want, (row.task_id, actions)
        # Without environments, a completion is the reply to every turn: junk's episode.
        junk = [[{"role": "assistant", "content": JUNK_REPLY}]]
        expected = gym_grade(row, junk_actions(row))
        assert funcs[-1](prompts=[dataset_row["prompt"]], completions=junk, **cols) == [expected["score"]]


def gym_grade(row: TaskRow, actions: list[Action]) -> dict[str, Any]:
    """The grade of ``actions`` played through ``gym.make``."""
    env = gym.make(row.env_id, split=row.split)
    try:
        env.reset(seed=row.episode_seed, options={"task_id": row.task_id})
        for action in actions:
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                return dict(info["grade"])
        raise AssertionError("the episode did not end")
    finally:
        env.close()


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


def tiny_qwen2_tool_model(seed: int = 0) -> tuple[Any, Any]:
    """A random 2-layer Qwen2 (hidden 64) with SmolLM2's tokenizer (offline, the same as
    ``tiny_random_model``'s: ChatML's ``<|im_start|>``/``<|im_end|>`` are its special
    tokens) and TRL's copy of Qwen2.5's chat template, which renders tool calls, so TRL
    recognises it and parses the model's ``<tool_call>`` blocks."""
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = transformers.AutoTokenizer.from_pretrained(ensure_converted(), local_files_only=True)
    tokenizer.chat_template = qwen2_5_chat_template
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.Qwen2ForCausalLM(config)
    return model, tokenizer


class ScriptedReplies(transformers.LogitsProcessor):
    """Makes generation write ``replies[k]`` (then end of turn) as the k-th assistant reply of
    a conversation: a random model never writes a tool call, so this stands in for a policy
    that does. The logprobs GRPO trains on are still the model's own."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.header = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
        self.replies = [[*tokenizer.encode(r, add_special_tokens=False), tokenizer.eos_token_id] for r in replies]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        width = len(self.header)
        for b, row in enumerate(input_ids.tolist()):
            starts = [i for i, t in enumerate(row) if t == self.header[0] and row[i : i + width] == self.header]
            reply = self.replies[min(len(starts), len(self.replies)) - 1]
            written = len(row) - starts[-1] - width
            scores[b, :] = -float("inf")
            scores[b, reply[min(written, len(reply) - 1)]] = 0.0
        return scores


def test_grpo_steps_through_the_environment_factory_on_tools_http(tmp_path: Path) -> None:
    """Two GRPO steps on ToolsHTTP-v0 through TRL's tool loop: the scripted policy calls the
    task's endpoint (parsed by TRL, run by the factory object on the real env), then answers;
    the reward is that episode's gym.make grade, and TRL counts the tool calls."""
    kwargs: dict[str, Any] = {"level": 1}
    data = env_dataset(HTTP_ID, split="dev", n=6, seed=0, **kwargs)
    env = gym.make(HTTP_ID, split="dev", **kwargs)
    frozen = cast(FrozenEnv, env.unwrapped)
    index = 0
    for index, row in enumerate(data):  # noqa: B007  (a task whose gold is one call, then the answer)
        env.reset(seed=row["episode_seed"], options={"task_id": row["task_id"]})
        first = frozen.oracle_action()
        if parse_reply(str(first)).calls:
            break
    (call,) = parse_reply(str(first)).calls
    env.step(first)
    answer = str(frozen.oracle_action())
    _, _, terminated, _, info = env.step(answer)
    assert terminated and info["grade"]["score"] == 1.0
    env.close()
    call_text = "<tool_call>\n" + json.dumps({"name": call.name, "arguments": call.arguments}) + "\n</tool_call>"

    model, tokenizer = tiny_qwen2_tool_model()
    scripted = ScriptedReplies(tokenizer, [call_text, answer])
    generate = model.generate
    model.generate = lambda *a, **k: generate(*a, logits_processor=transformers.LogitsProcessorList([scripted]), **k)
    funcs = reward_functions(HTTP_ID, **kwargs)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=512,
        reward_weights=reward_weights(funcs),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=data.select([index]),
        processing_class=tokenizer,
        environment_factory=environment_factory(HTTP_ID, **kwargs),
    )
    trainer.train()
    assert trainer.state.global_step == 2
    steps = [e for e in trainer.state.log_history if "rewards/frostgym_score/mean" in e]
    assert [e["rewards/frostgym_score/mean"] for e in steps] == [1.0, 1.0]
    assert all(e["tools/call_frequency"] == 1.0 and e["tools/failure_frequency"] == 0.0 for e in steps)
