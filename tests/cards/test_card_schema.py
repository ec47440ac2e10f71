"""The published JSON Schemas of card.json, plan.json, episodes.jsonl and drops.jsonl hold
for real cards (built through the library, not written by hand) and reject broken ones."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from frostgym.agents.base import Agent, AgentReply, AgentRequest
from frostgym.agents.oracle import OracleAgent
from frostgym.agents.random_agent import RandomAgent
from frostgym.agents.replay import ReplayAgent
from frostgym.cards.schema import SCHEMAS
from frostgym.cli import app
from frostgym.core.episode import DROP_CLASSES
from frostgym.core.messages import ROLES
from frostgym.evaluate.replay import regrade_card
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions

MATH = "frostgym/Math-v0"
SQL = "frostgym/SQL-v0"
Json = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Helpers


def validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(SCHEMAS[kind])


def problems(kind: str, instance: Any) -> list[str]:
    return [f"{e.json_path}: {e.message[:200]}" for e in validator(kind).iter_errors(instance)]


def assert_valid(kind: str, instance: Any) -> None:
    found = problems(kind, instance)
    assert not found, f"{kind} rejected: {found[:5]}"


def assert_invalid(kind: str, instance: Any) -> None:
    assert not validator(kind).is_valid(instance), f"{kind} schema accepted a broken instance"


def lines(path: Path) -> list[Json]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def read_card(directory: Path) -> tuple[Json, list[Json], list[Json]]:
    card = json.loads((directory / "card.json").read_text())
    return card, lines(directory / "episodes.jsonl"), lines(directory / "drops.jsonl")


def read_plan(directory: Path) -> list[Json]:
    plan: list[Json] = json.loads((directory / "plan.json").read_text())
    return plan


def run(
    out: Path,
    agent: Agent,
    env_ids: Sequence[str],
    *,
    episodes: int,
    samples: int = 1,
    options: RunOptions | None = None,
    **hooks: Any,
) -> Json:
    options = options or RunOptions(batch_size=16)
    config = card_config(
        env_ids=env_ids,
        agent_spec=agent.describe()["spec"],
        sampling={"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 64, "stop": [], "seed": 0, "logprobs": False},
        episodes=episodes,
        samples=samples,
        seed=0,
        options=options,
    )
    return run_to_card(out, agent, config, options, **hooks)


class ToolCallingOracle:
    """The oracle's answer sent as a structured tool call, so actions are dicts."""

    name = "tool-oracle"

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = []
        for request in requests:
            assert request.oracle is not None
            query = str(request.oracle()).removeprefix("<answer>").removesuffix("</answer>")
            call = {"name": "submit_sql", "arguments": json.dumps({"query": query})}
            replies.append(AgentReply(action={"content": "", "tool_calls": [call]}, finish_reason="tool_calls"))
        return replies

    def describe(self) -> dict[str, Any]:
        return {"spec": "tool-oracle", "style": "openai tool calls"}


class CrashingAgent:
    """Raises on every call: agent_error drops with tracebacks, retries and, under
    ``max_drops``, cancelled episodes."""

    name = "crash"

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        raise RuntimeError("model server unreachable\nsecond line of the message")

    def describe(self) -> dict[str, Any]:
        return {"spec": "crash"}


class Stop(Exception):
    """Stands in for Ctrl-C: ``run_to_card`` closes the card as interrupted."""


# ---------------------------------------------------------------------------------------------
# Real cards, built once for the module


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cards")
    built: dict[str, Path] = {}

    built["math_sql_samples"] = root / "math_sql_samples"
    run(built["math_sql_samples"], RandomAgent(seed=3), [MATH, SQL], episodes=2, samples=3)

    built["sql_tool_calls"] = root / "sql_tool_calls"
    run(built["sql_tool_calls"], ToolCallingOracle(), [SQL], episodes=2)

    oracle = root / "oracle"
    run(oracle, OracleAgent(), [MATH], episodes=2)
    built["oracle"] = oracle

    built["replay_miss"] = root / "replay_miss"
    run(built["replay_miss"], ReplayAgent.from_card(oracle), [MATH], episodes=4)

    built["regraded"] = root / "regraded"
    regrade_card(built["replay_miss"], built["regraded"])

    built["agent_errors"] = root / "agent_errors"
    options = RunOptions(batch_size=1, retries=1, max_drops=0)
    run(built["agent_errors"], CrashingAgent(), [MATH], episodes=3, options=options)

    return built


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Json]:
    """card.json as it stands while running, after an interruption, while running again
    after a resume, and complete."""
    out = tmp_path_factory.mktemp("lifecycle") / "card"
    seen: dict[str, Json] = {}

    def snapshot(name: str) -> Callable[[int, int], None]:
        def take(total: int, done: int) -> None:
            seen[name] = json.loads((out / "card.json").read_text())

        return take

    def interrupt(_: object) -> None:
        raise Stop

    with pytest.raises(Stop):
        run(
            out,
            OracleAgent(),
            [MATH],
            episodes=3,
            options=RunOptions(batch_size=1),
            on_plan=snapshot("running"),
            on_outcome=interrupt,
        )
    seen["interrupted"] = json.loads((out / "card.json").read_text())
    returned = run(
        out,
        OracleAgent(),
        [MATH],
        episodes=3,
        options=RunOptions(batch_size=1),
        resume=True,
        on_plan=snapshot("resumed_running"),
    )
    seen["complete"] = json.loads((out / "card.json").read_text())
    assert returned == seen["complete"]  # close returns card.json's content
    return seen


@pytest.fixture(scope="module")
def samples(cards: dict[str, Path]) -> dict[str, Json]:
    """One valid instance of each kind, to break one field at a time."""
    card, episodes, _ = read_card(cards["sql_tool_calls"])
    _, _, drops = read_card(cards["replay_miss"])
    return {"card": card, "plan": read_plan(cards["sql_tool_calls"]), "episode": episodes[0], "drop": drops[0]}


# ---------------------------------------------------------------------------------------------
# The schemas themselves


@pytest.mark.parametrize("kind", ["card", "plan", "episode", "drop"])
def test_schema_is_valid_draft_2020_12(kind: str) -> None:
    schema = SCHEMAS[kind]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://frostgym.dev/schema/{kind}/4.json"
    assert schema["title"] and schema["description"]
    closed = schema["$defs"]["plan_entry"] if schema["type"] == "array" else schema  # plan.json: an array of entries
    assert closed["additionalProperties"] is False
    assert json.loads(json.dumps(SCHEMAS[kind])) == schema  # plain JSON data: no tuples, no odd keys


def test_vocabularies_come_from_the_code() -> None:
    drop = SCHEMAS["drop"]["properties"]
    assert drop["drop_class"]["enum"] == list(DROP_CLASSES)
    assert set(drop["counted_as"]["enum"]) == {"failure", "excluded"}
    assert set(SCHEMAS["episode"]["$defs"]["message"]["properties"]["role"]["enum"]) == ROLES
    assert set(SCHEMAS["card"]["properties"]["status"]["enum"]) == {"running", "interrupted", "complete"}


@pytest.mark.parametrize("which", ["card", "plan", "episode", "drop"])
def test_cli_prints_the_schema(which: str) -> None:
    result = CliRunner().invoke(app, ["schema", which])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == SCHEMAS[which]


def test_cli_rejects_an_unknown_schema() -> None:
    result = CliRunner().invoke(app, ["schema", "episodes"])
    assert result.exit_code != 0


# ---------------------------------------------------------------------------------------------
# Real cards validate


def check_card_dir(directory: Path) -> tuple[Json, list[Json], list[Json]]:
    card, episodes, drops = read_card(directory)
    assert_valid("card", card)
    plan = read_plan(directory)
    assert_valid("plan", plan)
    assert len(plan) == card["plan"]["count"]
    for episode in episodes:
        assert_valid("episode", episode)
    for drop in drops:
        assert_valid("drop", drop)
    for stamp in [card["created_at"], card.get("updated_at", card["created_at"])]:
        dt.datetime.fromisoformat(stamp)  # format: date-time is only an annotation to jsonschema
    return card, episodes, drops


def test_math_sql_card_with_samples(cards: dict[str, Path]) -> None:
    card, episodes, drops = check_card_dir(cards["math_sql_samples"])
    assert card["status"] == "complete" and card["config"]["identity"]["samples"] == 3
    assert {e["env_id"] for e in episodes} == {MATH, SQL} and len(episodes) == 12 and not drops
    assert any(len(e["steps"]) > 1 for e in episodes)  # multi-turn SQL, with observation deltas
    assert set(card["config"]["ks"]) == {1, 2, 3}


def test_tool_calling_card(cards: dict[str, Path]) -> None:
    _, episodes, _ = check_card_dir(cards["sql_tool_calls"])
    steps = [step for episode in episodes for step in episode["steps"]]
    assert all(isinstance(step["action"], dict) and step["tool_calls"] and step["tool_results"] for step in steps)
    assert all(episode["grade"]["score"] == 1.0 for episode in episodes)


def test_card_with_replay_miss_drops(cards: dict[str, Path]) -> None:
    card, episodes, drops = check_card_dir(cards["replay_miss"])
    assert len(episodes) == 2 and len(drops) == 2
    assert {d["drop_class"] for d in drops} == {"replay_miss"}
    assert all(d["episode_id"] is not None and d["observation"] for d in drops)
    assert card["accounting"]["dropped_by_class"] == {"replay_miss": 2}


def test_regraded_card_with_skipped_drops(cards: dict[str, Path]) -> None:
    card, episodes, drops = check_card_dir(cards["regraded"])
    assert "regraded_from" in card and len(episodes) == 2
    assert {(d["drop_class"], d["counted_as"], d["stage"]) for d in drops} == {("skipped", "excluded", "runner")}
    assert all(d["episode_id"] is None for d in drops)


def test_card_with_agent_errors_and_cancelled(cards: dict[str, Path]) -> None:
    _, episodes, drops = check_card_dir(cards["agent_errors"])
    assert not episodes
    errors = [d for d in drops if d["drop_class"] == "agent_error"]
    assert errors and all(d["attempts"] == 2 and d["earlier_errors"] and d["traceback"] for d in errors)
    assert any(d["drop_class"] == "cancelled" for d in drops)


def test_card_at_every_stage_of_its_life(lifecycle: dict[str, Json]) -> None:
    running = lifecycle["running"]
    assert running["status"] == "running" and "accounting" not in running
    assert_valid("card", running)
    interrupted = lifecycle["interrupted"]
    assert interrupted["status"] == "interrupted" and interrupted["accounting"]["pending"] > 0
    assert_valid("card", interrupted)
    assert lifecycle["resumed_running"]["status"] == "running"
    assert_valid("card", lifecycle["resumed_running"])
    complete = lifecycle["complete"]
    assert complete["status"] == "complete" and len(complete["sessions"]) == 2
    assert_valid("card", complete)


# ---------------------------------------------------------------------------------------------
# Broken files are rejected (each instance is valid before its one change)


def broken(samples: dict[str, Json], kind: str, change: Callable[[Json], object]) -> Json:
    assert_valid(kind, samples[kind])
    instance = copy.deepcopy(samples[kind])
    change(instance)
    return instance


def _set(path: str, value: Any) -> Callable[[Json], None]:
    """Set a dotted path ('steps.0.grade.score'), list indices as numbers."""

    def change(instance: Json) -> None:
        *parents, last = path.split(".")
        target: Any = instance
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[int(last) if isinstance(target, list) else last] = value

    return change


def _drop(key: str) -> Callable[[Json], None]:
    return lambda instance: instance.pop(key)


BROKEN: list[tuple[str, str, Callable[[Json], object]]] = [
    ("drop", "unknown drop class", _set("drop_class", "gremlins")),
    ("drop", "counted_as contradicting the class", _set("counted_as", "excluded")),
    ("drop", "unknown stage", _set("stage", "somewhere")),
    ("drop", "multi-line error", _set("error", "first\nsecond")),
    ("drop", "missing drop_class", _drop("drop_class")),
    ("drop", "unknown key", _set("severity", "high")),
    ("episode", "grade score 1.5", _set("grade.score", 1.5)),
    ("episode", "step grade score 1.5", lambda line: _set("steps.0.grade", {**line["grade"], "score": 1.5})(line)),
    ("episode", "grade component above 1", _set("grade.components.correctness", 1.01)),
    ("episode", "missing seed", _drop("seed")),
    ("episode", "negative seed", _set("seed", -1)),
    ("episode", "seed as a string", _set("seed", "42")),
    ("episode", "unknown key", _set("notes", "")),
    ("episode", "unknown message role", _set("observation.0.role", "robot")),
    ("episode", "unknown key in a step", _set("steps.0.extra", 1)),
    ("episode", "unknown key in a grade", _set("grade.passed", True)),
    ("episode", "observation delta without keep", lambda e: e["steps"][0]["observation"].pop("keep")),
    ("episode", "reward null (a NaN written by orjson)", _set("reward", None)),
    ("card", "unknown top-level key", _set("comment", "hand-edited")),
    ("card", "complete card without accounting", _drop("accounting")),
    ("card", "complete card without views", _drop("views")),
    ("card", "unknown status", _set("status", "done")),
    ("card", "wrong schema tag", _set("schema", "frostgym.card/1")),
    ("card", "unknown drop class in the accounting", _set("accounting.dropped_by_class", {"gremlins": 1})),
    ("card", "complete card with pending episodes", _set("accounting.pending", 1)),
    ("card", "plan entries back in card.json", _set("plan.episodes", [])),
    ("card", "plan without its count", lambda c: c["plan"].pop("count")),
    ("plan", "plan entry with a negative seed", _set("0.seed", -5)),
    ("plan", "unknown key in a plan entry", _set("0.weight", 1)),
    ("plan", "plan entry without a plan_id", lambda p: p[0].pop("plan_id")),
    ("plan", "not an array", lambda p: p.clear() or p.append([])),
    ("card", "pass@k value above 1", _set("views.overall.errors_excluded.pass@k.1.value", 2.0)),
    ("card", "missing rule in a view", lambda c: c["views"]["overall"].pop("errors_as_failures")),
    ("card", "samples of 0", _set("config.identity.samples", 0)),
]


@pytest.mark.parametrize(("kind", "what", "change"), BROKEN, ids=[f"{k}: {w}" for k, w, _ in BROKEN])
def test_broken_instance_is_rejected(
    samples: dict[str, Json], kind: str, what: str, change: Callable[[Json], object]
) -> None:
    assert_invalid(kind, broken(samples, kind, change))


def test_unknown_drop_class_in_a_real_drops_file(cards: dict[str, Path], tmp_path: Path) -> None:
    """A drops.jsonl edited to carry a class outside DROP_CLASSES fails line validation."""
    text = (cards["replay_miss"] / "drops.jsonl").read_text().replace('"replay_miss"', '"cosmic_ray"', 1)
    edited = tmp_path / "drops.jsonl"
    edited.write_text(text)
    verdicts = [validator("drop").is_valid(record) for record in lines(edited)]
    assert verdicts == [False, True]
