"""``frostgym export inspect``: real cards (math, HTTP tools, BFCL tools, code in a sandbox,
a card with drops) written as inspect_ai eval logs and read back with inspect_ai's own
reader: every episode and drop is a sample, every score, message and tool call survives."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.agents import AgentReply, AgentRequest, OracleAgent
from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.core.episode import EpisodeRecord, Record
from frostgym.core.errors import InspectMissingError
from frostgym.core.messages import Observation
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.export.inspect_log import INSTALL_HINT, RESULT_KEY, export_inspect, sample_id
from frostgym.run.runner import RunOptions
from tests.faulty_env import FAULTY_ID

pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install 'frostgym[inspect]')")
from inspect_ai.log import EvalLog, EvalSample, read_eval_log
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool

pytestmark = pytest.mark.slow

TOOL_ENVS = ["frostgym/Math-v0", "frostgym/ToolsHTTP-v0", "frostgym/Tools-v0", "frostgym/Code-v0"]


class _FlakyOracle:
    """The oracle, except that every third episode (by id) gets an agent error and every
    third a wrong answer, so the card has agent drops and graded failures with labels."""

    name = "flaky-oracle"

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = OracleAgent().act(requests)
        out = []
        for request, reply in zip(requests, replies, strict=True):
            kind = int(request.episode_id, 16) % 3
            if kind == 0:
                out.append(AgentReply.failed("model server said 500"))
            elif kind == 1:
                guess = "<think>guess</think><answer>-1</answer>"
                out.append(AgentReply(action=guess, prompt_tokens=40, completion_tokens=9, finish_reason="stop"))
            else:
                out.append(reply)
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": "flaky-oracle"}


def _card(out: Path, agent: Any, env_ids: list[str], episodes: int, options: RunOptions) -> Path:
    sampling = {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 64, "stop": [], "seed": 0, "logprobs": False}
    config = card_config(
        env_ids=env_ids,
        agent_spec=agent.describe()["spec"],
        sampling=sampling,
        episodes=episodes,
        samples=1,
        seed=0,
        options=options,
    )
    run_to_card(out, agent, config, options)
    return out


@pytest.fixture(scope="module")
def tool_card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The oracle on math, HTTP tools (calls and results), BFCL (calls alone) and code."""
    out = tmp_path_factory.mktemp("tools") / "card"
    return _card(out, OracleAgent(), TOOL_ENVS, 2, RunOptions(split="test", batch_size=8))


@pytest.fixture(scope="module")
def drop_card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real drops of every kind the faulty env makes, agent errors, wrong answers, and the
    episodes ``max_drops`` cancelled."""
    out = tmp_path_factory.mktemp("drops") / "card"
    options = RunOptions(batch_size=4, retries=0, max_drops=3)
    return _card(out, _FlakyOracle(), [FAULTY_ID], 10, options)


def _export(card: Path, out: Path) -> EvalLog:
    assert export_inspect(card, out) == out
    return read_eval_log(str(out))


def _conversation(record: Record) -> Observation:
    """The record's final conversation, by applying each step's delta."""
    observation = list(record.observation)
    for step in record.steps:
        observation = step.observation.apply(observation)
    return observation


def _check_messages(record: Record, sample: EvalSample) -> None:
    """Every message of the conversation survives in order with its role and text; each
    step's tool calls are on its assistant message and its results follow it, tied by id."""
    added = [m for m in sample.messages if isinstance(m, ChatMessageTool) and m.metadata and RESULT_KEY in m.metadata]
    plain = [m for m in sample.messages if m not in added]
    assert [(m.role, m.text) for m in plain] == [(m["role"], m["content"]) for m in _conversation(record)]
    assert len(added) == sum(len(step.tool_results) for step in record.steps)
    for step in record.steps:
        action = plain[step.observation.keep]  # the step's first new message: its reply
        assert isinstance(action, ChatMessageAssistant) and action.text == step.observation.new[0]["content"]
        calls = action.tool_calls or []
        assert [(c.function, c.arguments) for c in calls] == [(c["name"], c["arguments"]) for c in step.tool_calls]
        at = sample.messages.index(action)
        results = sample.messages[at + 1 : at + 1 + len(step.tool_results)]
        for index, (message, result) in enumerate(zip(results, step.tool_results, strict=True)):
            assert isinstance(message, ChatMessageTool) and message.metadata == {RESULT_KEY: result}
            assert message.function == result["name"] and message.tool_call_id == calls[index].id


def _check_log(card_dir: Path, log: EvalLog) -> dict[str, EvalSample]:
    """What every export must hold, checked against the card itself."""
    card, episodes, drops = load_card(card_dir)
    records: list[Record] = [*episodes, *drops]
    assert log.status == "success" and log.eval.model == card["config"]["identity"]["agent"]
    env_ids = card["config"]["identity"]["env_ids"]
    assert log.eval.task == "frostgym/" + ",".join(e.removeprefix("frostgym/") for e in env_ids)
    assert log.eval.created == card["created_at"]
    assert log.eval.metadata is not None and log.eval.metadata["plan_sha256"] == card["plan"]["sha256"]
    assert log.eval.metadata["frostgym_version"] == card["frostgym_version"]
    assert log.samples is not None
    samples = {str(s.id): s for s in log.samples}
    assert len(log.samples) == len(samples) == len(records) == len(card["plan"]["episodes"])
    for record in records:
        sample = samples[sample_id(record.plan_id)]
        metadata = sample.metadata
        assert sample.epoch == record.sample + 1 and metadata["plan_id"] == record.plan_id
        assert (metadata["seed"], metadata["seed_derivation"]) == (record.seed, record.seed_derivation)
        assert (metadata["env_id"], metadata["task_id"], metadata["episode_id"]) == (
            record.env_id,
            record.task_id,
            record.episode_id,
        )
        _check_messages(record, sample)
        if isinstance(record, EpisodeRecord):
            grade = record.grade
            assert grade is not None and sample.error is None and sample.scores is not None
            assert set(sample.scores) == {"reward", *grade["components"]}
            for name, value in grade["components"].items():
                assert sample.scores[name].value == value
            reward = sample.scores["reward"]
            assert reward.value == record.reward and reward.explanation == grade["label"]
            assert reward.metadata == (grade["details"] or None)
            assert metadata["grader"] == grade["grader"] and metadata["split"] == record.split
            assert sample.target == grade["details"].get("gold", "")
            continue
        drop = record.drop
        assert (metadata["drop_class"], metadata["stage"], metadata["error"]) == (
            drop.drop_class,
            drop.stage,
            drop.error,
        )
        assert metadata["counted_as"] == record.counted_as
        assert sample.error is not None and drop.error in sample.error.message
        if record.counted_as == "failure":
            assert sample.scores is not None and set(sample.scores) == {"reward"}
            assert sample.scores["reward"].value == 0.0
        else:
            assert sample.scores is None
    view = card["views"]["overall"]["errors_as_failures"]
    assert log.results is not None
    results = {score.name: score for score in log.results.scores}
    assert next(iter(results)) == "reward" and results["reward"].metrics["mean"].value == view["mean_reward"]
    assert results["reward"].metrics["pass@1"].value == view["pass@k"]["1"]["value"]
    assert {name: results[name].metrics["mean"].value for name in view["component_means"]} == view["component_means"]
    return samples


def test_a_tool_card_survives_inspects_reader(tool_card: Path, tmp_path: Path) -> None:
    log = _export(tool_card, tmp_path / "tools.eval")
    samples = _check_log(tool_card, log)
    _, episodes, _ = load_card(tool_card)
    assert {r.env_id for r in episodes} == set(TOOL_ENVS)  # the code episodes ran in the sandbox
    tool_steps = [s for r in episodes for s in r.steps if s.tool_calls]
    assert any(s.tool_results for s in tool_steps) and any(not s.tool_results for s in tool_steps)
    math = next(r for r in episodes if r.env_id == "frostgym/Math-v0")
    assert math.grade is not None and samples[sample_id(math.plan_id)].target == math.grade["details"]["gold"] != ""
    assert samples[sample_id(math.plan_id)].input == math.observation[1]["content"]


def test_a_card_with_drops_survives_inspects_reader(drop_card: Path, tmp_path: Path) -> None:
    log = _export(drop_card, tmp_path / "drops.eval")
    samples = _check_log(drop_card, log)
    _, episodes, drops = load_card(drop_card)
    classes = {d.drop.drop_class for d in drops}
    assert {"agent_error", "cancelled"} <= classes and len(classes) >= 3
    assert any(d.observation for d in drops) and any(not d.observation for d in drops)  # ran, never ran
    wrong = next(e for e in episodes if e.grade is not None and e.grade["label"])  # a failure with its reason
    sample = samples[sample_id(wrong.plan_id)]
    assert sample.output.completion == wrong.steps[-1].action and sample.output.stop_reason == "stop"
    usage = sample.model_usage["flaky-oracle"]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (40, 9, 49)


def test_json_and_eval_hold_the_same_log_and_exporting_again_gives_it_again(drop_card: Path, tmp_path: Path) -> None:
    first = _export(drop_card, tmp_path / "a.eval")
    again = _export(drop_card, tmp_path / "b.eval")
    as_json = _export(drop_card, tmp_path / "c.json")

    def content(log: EvalLog) -> dict[str, Any]:
        data = log.model_dump(exclude={"location", "etag"})
        data["samples"] = sorted(data["samples"], key=lambda s: s["id"])
        return data

    assert content(first) == content(again) == content(as_json)


def test_the_cli_writes_the_log_and_names_what_is_wrong(tool_card: Path, tmp_path: Path) -> None:
    out = tmp_path / "logs" / "card.eval"
    result = CliRunner().invoke(app, ["export", "inspect", str(tool_card), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert read_eval_log(str(out)).status == "success" and "inspect view" in result.output
    missing = CliRunner().invoke(app, ["export", "inspect", str(tmp_path / "nope"), "--out", str(out)])
    assert missing.exit_code == 2 and "holds no card" in missing.output
    wrong = CliRunner().invoke(app, ["export", "inspect", str(tool_card), "--out", str(tmp_path / "card.txt")])
    assert wrong.exit_code == 2 and ".eval or .json" in wrong.output
    (tmp_path / "file").write_text("")
    blocked = CliRunner().invoke(app, ["export", "inspect", str(tool_card), "--out", str(tmp_path / "file" / "x.eval")])
    assert blocked.exit_code == 2 and f"cannot write {tmp_path / 'file' / 'x.eval'}" in blocked.output
    assert [p.name for p in out.parent.iterdir()] == ["card.eval"]  # no staging file left behind
    assert not (tmp_path / "card.txt").exists()


def test_without_inspect_ai_the_export_says_how_to_install_it(
    tool_card: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("inspect_ai", "inspect_ai.log"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    with pytest.raises(InspectMissingError, match=INSTALL_HINT.replace("[", r"\[").replace("]", r"\]")):
        export_inspect(tool_card, tmp_path / "x.eval")
    result = CliRunner().invoke(app, ["export", "inspect", str(tool_card), "--out", str(tmp_path / "x.eval")])
    assert result.exit_code == 2 and INSTALL_HINT in result.output
    assert not (tmp_path / "x.eval").exists()
