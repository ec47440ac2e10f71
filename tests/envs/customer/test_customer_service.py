"""CustomerService-v0 on real parts: tau2's installed data and tools, the scripted customer,
a model customer on a real OpenAI-compatible server on loopback (``tests.chat_server``)
through the frozen model layer, real cards from ``frostgym eval``.

(1) the oracle per domain; (2) the adversarial suite; (3) the model customer: record, then
replay without the server, a cache miss as a ``replay_miss`` drop, a hand-edited cache;
(4) bad input. The differential check against tau2's own evaluator is
``test_tau2_differential.py``; the contract tests over every id cover the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from frostgym.core.errors import SecondPartyError
from frostgym.core.grade import Grade
from frostgym.customer.tau2_data import DOMAINS, STOP
from frostgym.envs.customer import CustomerServiceEnv
from frostgym.envs.customer.users import GREETING
from frostgym.graders.adversarial import AdversarialCase, run_suite
from frostgym.graders.customer_service import GRADER
from tests.chat_server import ChatServer
from tests.cli_process import run_cli
from tests.conftest import make_env

ENV_ID = "frostgym/CustomerService-v0"
CANCEL_TASK = "customer_service/dev/17"  # retail: cancel order #W8835847, "ordered by mistake"


def _play(env: CustomerServiceEnv, task_id: str, replies: list[str], seed: int = 0) -> tuple[list[Any], dict[str, Any]]:
    observation, info = env.reset(seed=seed, options={"task_id": task_id})
    for reply in replies:
        observation, _, done, _, info = env.step(reply)
        if done:
            break
    return observation, info


# -- (1) the oracle -------------------------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_oracle_scores_one_on_every_dev_task_of_each_domain(domain: str) -> None:
    env = make_env(ENV_ID, domain=domain)
    tasks = [t for t in env.source.tasks("dev") if t.metadata["domain"] == domain]
    assert len(tasks) >= 5
    for task in tasks:
        env.reset(seed=0, options={"task_id": task.task_id})
        done, info = False, {}
        while not done:
            _, _, done, _, info = env.step(env.oracle_action())
        assert info["grade"]["score"] == 1.0, (task.task_id, info["grade"])
    drawn = {env.reset(seed=seed)[1]["domain"] for seed in range(20)}
    assert drawn == {domain}


# -- (2) the adversarial suite -------------------------------------------------------------


def test_adversarial_suite(record_property: Any) -> None:
    env = make_env(ENV_ID)

    def grade(case: AdversarialCase) -> Grade:
        _, info = _play(env, case.gold, list(case.context["replies"]))
        return Grade.from_dict(info["grade"])

    report = run_suite("customer_service", grade, GRADER)
    record_property("adversarial_report", report.render())
    assert report.passed, report.render()
    assert report.label_coverage == 1.0, report.render()


# -- (3) the model customer ----------------------------------------------------------------


def _customer_server() -> ChatServer:
    """A customer model that opens with the ticket, asks once more, then stops when told it
    is done (a rule of the conversation it is sent, so record and replay see the same)."""

    def respond(body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        messages = body["messages"]
        assert messages[0]["role"] == "system" and "<scenario>" in messages[0]["content"]
        assert messages[1] == {"role": "user", "content": GREETING}
        heard = messages[-1]["content"]
        if len(messages) == 2:
            text = "Hi, I'm Daiki Silva (daiki.silva6295@example.com). Please cancel order #W8835847."
        elif "cancelled" in heard.lower():
            text = f"Thanks! {STOP}"
        else:
            text = "I ordered it by mistake. Can you cancel it?"
        completion = {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
        return 200, completion, {}

    return ChatServer(respond)


AGENT = [
    "Why would you like to cancel it?",
    '<tool_call>{"name": "cancel_pending_order", '
    '"arguments": {"order_id": "#W8835847", "reason": "ordered by mistake"}}</tool_call>',
    "Your order #W8835847 is cancelled.",
]


def _model_env(server_url: str, cache: Path, mode: str) -> CustomerServiceEnv:
    return make_env(ENV_ID, customer=f"openai:{server_url}#customer", customer_cache=str(cache), cache_mode=mode)


def test_a_model_customer_records_then_replays_byte_for_byte_without_its_server(tmp_path: Path) -> None:
    cache = tmp_path / "customer.jsonl"
    with _customer_server() as server:
        env = _model_env(server.base_url, cache, "record")
        recorded, info = _play(env, CANCEL_TASK, AGENT)
        assert info["grade"]["score"] == 1.0, info["grade"]
        assert len(server.bodies) == 3  # the opening and two answers
    lines = cache.read_text().splitlines()
    assert len(lines) == 3
    replayer = _model_env("http://127.0.0.1:9/v1", cache, "replay")  # the server is gone; the model name is the pin
    replayed, info2 = _play(replayer, CANCEL_TASK, AGENT)
    assert json.dumps(replayed) == json.dumps(recorded)
    assert info2["grade"] == info["grade"] and info2["customer_call"]["source"] == "cache"
    second_party = replayer.contract()["second_party"]
    assert second_party["mode"] == "replay" and second_party["model"] == {"spec": "openai", "model": "customer"}
    assert len(second_party["cache_sha256"]) == 64


def test_a_cache_miss_is_a_replay_miss_drop_named_in_the_manifest(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    env = _model_env("http://127.0.0.1:9/v1", empty, "replay")
    with pytest.raises(SecondPartyError) as raised:
        env.reset(seed=0, options={"task_id": CANCEL_TASK})
    assert raised.value.drop_class == "replay_miss"
    out = tmp_path / "card"
    spec = f"{ENV_ID}[customer=openai:http://127.0.0.1:9/v1#customer,customer_cache={empty}]"
    result = run_cli("eval", "--env", spec, "--agent", "oracle", "--episodes", "3", "--seed", "0", "--out", str(out))
    assert result.returncode == 0, result.stderr
    drops = [json.loads(line) for line in (out / "drops.jsonl").read_text().splitlines()]
    assert len(drops) == 3 and {d["drop_class"] for d in drops} == {"replay_miss"}
    assert all("no cached reply for model call" in d["error"] for d in drops)
    card = json.loads((out / "card.json").read_text())
    assert card["contract"]["envs"][ENV_ID]["second_party"]["mode"] == "replay"


def test_a_hand_edited_customer_cache_is_not_served(tmp_path: Path) -> None:
    cache = tmp_path / "customer.jsonl"
    with _customer_server() as server:
        _play(_model_env(server.base_url, cache, "record"), CANCEL_TASK, AGENT)
    lines = cache.read_text().splitlines()
    entry = json.loads(lines[0])
    entry["reply"] = "Hi, cancel every order I have."  # the opening, rewritten by hand
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([json.dumps(entry), *lines[1:]]) + "\n")
    env = _model_env("http://127.0.0.1:9/v1", edited, "replay")
    with pytest.raises(SecondPartyError, match="no cached reply") as raised:
        env.reset(seed=0, options={"task_id": CANCEL_TASK})
    assert raised.value.drop_class == "replay_miss"


def test_a_customer_answer_missing_mid_episode_is_a_step_drop(tmp_path: Path) -> None:
    cache = tmp_path / "customer.jsonl"
    with _customer_server() as server:
        _play(_model_env(server.base_url, cache, "record"), CANCEL_TASK, AGENT[:1])  # the opening and one answer
    env = _model_env("http://127.0.0.1:9/v1", cache, "replay")
    _, info = _play(env, CANCEL_TASK, ["Something else entirely?"])
    assert info["drop"]["drop_class"] == "replay_miss" and "grade" not in info


# -- (4) bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"domain": "telecom"}, "domain must be one of"),
        ({"customer": "oracle"}, "not a model"),
        ({"customer": "smollm2", "cache_mode": "sometimes"}, "cache_mode must be one of"),
        ({"customer": "smollm2", "cache_mode": "record"}, "give customer_cache=PATH"),
        ({"customer_max_new_tokens": 0}, "customer_max_new_tokens"),
        ({"level": 4}, "has no level 4"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_env(ENV_ID, **kwargs)


def test_unreadable_and_unknown_calls_are_error_results_not_crashes() -> None:
    env = make_env(ENV_ID)
    replies = [
        '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": 7}}</tool_call>',
        "<tool_call>not json</tool_call>",
        {"content": "", "tool_calls": [{"name": "get_order_details", "arguments": {"order_id": "#W8835847"}}]},
    ]
    env.reset(seed=0, options={"task_id": CANCEL_TASK})
    for reply in replies:
        observation, _, done, _, info = env.step(reply)
        assert not done and observation[-1]["role"] == "user"
    assert "Error" in observation[-3]["content"] or "Error" in observation[-5]["content"]
    assert info["tool_results"][0]["ok"] is True


# -- (5) the embedded model's card, its customer from the packaged cache ----------------------

SMOLLM2_CARD = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "customer-service-smollm2"


def test_the_embedded_models_card_replays_from_the_packaged_cache() -> None:
    """SmolLM2 as agent and customer: every customer turn on the committed card is a cache
    hit in replay mode, and ``frostgym replay`` plays the card again byte for byte with no
    model loaded (the replay agent plays the agent's side)."""
    lines = (SMOLLM2_CARD / "episodes.jsonl").read_text().splitlines()
    steps = [step for line in lines for step in json.loads(line)["steps"]]
    calls = [
        step["info"][key] for step in steps for key in ("customer_opening_call", "customer_call") if key in step["info"]
    ]
    assert "customer_opening_call" in steps[0]["info"]
    assert len(lines) == 2 and calls and {c["source"] for c in calls} == {"cache"}
    card = json.loads((SMOLLM2_CARD / "card.json").read_text())
    second_party = card["contract"]["envs"][ENV_ID]["second_party"]
    assert second_party["mode"] == "replay" and second_party["model"]["spec"] == "smollm2"
    result = run_cli("replay", str(SMOLLM2_CARD))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "replay identical: 2 episodes" in result.stdout


def test_the_embedded_models_run_is_the_same_card_in_another_process(tmp_path: Path) -> None:
    """The same run (its agent's actions replayed, its customer from the cache) in a fresh
    process writes the same card, timings and hosts aside."""
    from tests.card_equality import comparable

    spec = next(iter(json.loads((SMOLLM2_CARD / "card.json").read_text())["envs"]))
    options = json.loads((SMOLLM2_CARD / "card.json").read_text())["config"]["identity"]["env_options"][spec]
    env_spec = f"{spec}[" + ",".join(f"{k}={v}" for k, v in options.items()) + "]"
    out = tmp_path / "again"
    args = ["eval", "--env", env_spec, "--agent", f"replay:{SMOLLM2_CARD}", "--episodes", "2", "--seed", "0"]
    result = run_cli(*args, "--out", str(out))
    assert result.returncode == 0, result.stderr
    _, first, _ = comparable(SMOLLM2_CARD)
    _, second, _ = comparable(out)
    assert [_without_agent(e) for e in second] == [_without_agent(e) for e in first]


def _without_agent(episode: dict[str, Any]) -> dict[str, Any]:
    """An episode without what names the agent that played it (smollm2 on one card, the
    replay of its actions on the other) or its token counts."""
    steps = [{k: v for k, v in step.items() if k not in ("agent", "tokens", "agent_seed")} for step in episode["steps"]]
    return {**{k: v for k, v in episode.items() if k not in ("agent",)}, "steps": steps}
