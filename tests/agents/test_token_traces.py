"""Token-level trajectories end to end, on the loopback chat server's vLLM-shaped model: the
OpenAI agent's opt-in (what it asks, what it records, what it ignores), the runner putting
the trace on each step with its prefix check, and a card written by ``frostgym eval`` read
back by the trainers' reader (``frostgym.integrations``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from frostgym.agents.base import AgentRequest
from frostgym.agents.openai_compat import OpenAIAgent
from frostgym.cards.card import load_card
from frostgym.cards.schema import SCHEMAS
from frostgym.cli import app
from frostgym.core.episode import EpisodeRecord
from frostgym.core.messages import Observation
from frostgym.integrations import card_token_turns, token_turns
from tests.chat_server import ChatServer, toy_completion_ids, toy_logprob, toy_prompt_ids

SQL = "frostgym/SQL-v0"
QUESTION: Observation = [{"role": "user", "content": "q0"}]


def _request() -> AgentRequest:
    return AgentRequest(QUESTION, "e0", 0, seed=0)


def test_token_ids_are_asked_for_and_recorded_when_opted_in() -> None:
    with ChatServer() as server:
        reply = OpenAIAgent(server.base_url, "vllm-tokens", token_ids=True).act([_request()])[0]
        body = server.bodies[0]
    assert body["logprobs"] is True and body["return_tokens_as_token_ids"] is True and body["return_token_ids"] is True
    assert reply.drop is None and reply.action == "reply 1"
    tokens = reply.tokens
    assert tokens is not None
    assert tokens.prompt_ids == toy_prompt_ids(QUESTION)
    assert tokens.completion_ids == toy_completion_ids("reply 1")
    assert tokens.logprobs == [toy_logprob(i) for i in range(len(tokens.completion_ids))]
    assert tokens.logprobs_of == "server" and tokens.prefix_mismatch is None
    assert "logprobs" not in reply.extra  # asked for with the ids only: recorded once, in tokens


def test_token_ids_are_off_by_default_and_a_server_without_them_gives_none() -> None:
    with ChatServer() as server:
        plain = OpenAIAgent(server.base_url, "vllm-tokens").act([_request()])[0]
        asked_of_echo = OpenAIAgent(server.base_url, "echo", token_ids=True).act([_request()])[0]
        bodies = list(server.bodies)
    assert plain.tokens is None and asked_of_echo.tokens is None
    assert not {"logprobs", "return_token_ids", "return_tokens_as_token_ids"} & bodies[0].keys()
    assert asked_of_echo.action == "you said: q0" and asked_of_echo.drop is None


def _answer(**fields: Any) -> dict[str, Any]:
    """A vLLM-shaped answer with ``fields`` on its first choice (``prompt_token_ids`` at the top)."""
    choice: dict[str, Any] = {"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    reply: dict[str, Any] = {"choices": [choice]}
    if "prompt_token_ids" in fields:
        reply["prompt_token_ids"] = fields.pop("prompt_token_ids")
    choice.update(fields)
    return reply


def _logprobs(*entries: Any) -> dict[str, Any]:
    return {"content": list(entries)}


def test_completion_ids_are_read_from_token_id_tokens_when_token_ids_are_absent() -> None:
    answer = _answer(
        prompt_token_ids=[1, 2, 3],
        logprobs=_logprobs({"token": "token_id:7", "logprob": -0.5}, {"token": "token_id:0", "logprob": 0}),
    )
    with ChatServer(lambda body: (200, answer, {})) as server:
        tokens = OpenAIAgent(server.base_url, "m", token_ids=True).act([_request()])[0].tokens
    assert tokens is not None
    assert (tokens.prompt_ids, tokens.completion_ids, tokens.logprobs) == ([1, 2, 3], [7, 0], [-0.5, 0.0])


GOOD_LOGPROBS = _logprobs({"token": "token_id:5", "logprob": -1.0}, {"token": "token_id:6", "logprob": -2.0})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # (what the server sent on the choice, (prompt_ids, completion_ids, logprobs) recorded)
        ({"prompt_token_ids": "1 2 3", "token_ids": [5, 6]}, (None, [5, 6], None)),
        ({"prompt_token_ids": [1, -2], "token_ids": [5, 6]}, (None, [5, 6], None)),
        ({"prompt_token_ids": [1, True], "token_ids": [5, 6]}, (None, [5, 6], None)),
        ({"prompt_token_ids": [2**31], "token_ids": [5, 6]}, (None, [5, 6], None)),
        ({"prompt_token_ids": [1], "token_ids": [5.0, 6]}, ([1], None, None)),
        ({"prompt_token_ids": [1], "token_ids": {"ids": [5]}}, ([1], None, None)),
        ({"token_ids": [5, 6], "logprobs": GOOD_LOGPROBS}, (None, [5, 6], [-1.0, -2.0])),
        ({"token_ids": [5, 6, 7], "logprobs": GOOD_LOGPROBS}, (None, [5, 6, 7], None)),  # not one per id
        ({"logprobs": _logprobs({"token": "token_id:x", "logprob": -1.0})}, (None, None, [-1.0])),
        ({"logprobs": _logprobs({"token": "token_id:99999999999", "logprob": -1.0})}, (None, None, [-1.0])),
        ({"logprobs": _logprobs({"token": "token_id:\uff13", "logprob": -1.0})}, (None, None, [-1.0])),  # not ASCII
        (
            {
                "token_ids": [5, 6, 7, 8],
                "logprobs": _logprobs({"logprob": 0.5}, {"logprob": "x"}, None, {"logprob": None}),
            },
            (None, [5, 6, 7, 8], [None, None, None, None]),
        ),
        ({"token_ids": [5], "logprobs": {"content": "nope"}}, (None, [5], None)),
        ({"token_ids": [5], "logprobs": [1, 2]}, (None, [5], None)),
        ({"prompt_token_ids": None, "token_ids": None, "logprobs": None}, None),
    ],
)
def test_a_malformed_token_field_is_ignored_never_a_crash(fields: dict[str, Any], expected: Any) -> None:
    answer = _answer(**fields)
    with ChatServer(lambda body: (200, answer, {})) as server:
        reply = OpenAIAgent(server.base_url, "m", token_ids=True).act([_request()])[0]
    assert reply.drop is None and reply.action == "hi"
    got = (
        None if reply.tokens is None else (reply.tokens.prompt_ids, reply.tokens.completion_ids, reply.tokens.logprobs)
    )
    assert got == expected


def test_infinite_and_nan_logprobs_read_as_none() -> None:
    raw = (
        b'{"choices": [{"message": {"content": "hi"}, "token_ids": [5, 6, 7],'
        b' "logprobs": {"content": [{"logprob": NaN}, {"logprob": -Infinity}, {"logprob": -0.0}]}}]}'
    )
    with ChatServer(lambda body: (200, raw, {})) as server:
        tokens = OpenAIAgent(server.base_url, "m", token_ids=True).act([_request()])[0].tokens
    assert tokens is not None and tokens.logprobs == [None, None, 0.0]


# -- a multi-turn run, on a card -------------------------------------------------------------


def _eval(out: Path, base_url: str, model: str, *extra: str) -> None:
    args = ["eval", "--env", SQL, "--agent", f"openai:{base_url}#{model}", "--episodes", "3"]
    result = CliRunner().invoke(app, [*args, "--max-turns", "3", "--out", str(out), *extra])
    assert result.exit_code == 0, result.output


def _observations(record: EpisodeRecord) -> list[Observation]:
    """The observation each step's request carried: the reset one, then each step's."""
    seen = [record.observation]
    for step in record.steps[:-1]:
        seen.append(step.observation.apply(seen[-1]))
    return seen


@pytest.mark.parametrize(("model", "mismatch"), [("vllm-tokens", False), ("vllm-tokens-strip", True)])
def test_a_multi_turn_card_holds_each_turns_ids_and_the_prefix_check(
    tmp_path: Path, model: str, mismatch: bool
) -> None:
    out = tmp_path / "card"
    with ChatServer() as server:
        _eval(out, server.base_url, model, "--token-ids")
    _, episodes, drops = load_card(out)
    assert len(episodes) == 3 and not drops
    by_episode = list(card_token_turns(out))
    assert [[t.episode_id for t in turns] for turns in by_episode] == [[e.episode_id] * 3 for e in episodes]
    for record, turns in zip(episodes, by_episode, strict=True):
        assert turns == token_turns(record)  # the card's reader and the record's agree
        assert [t.prefix_mismatch for t in turns] == [None, mismatch, mismatch]
        strip = model == "vllm-tokens-strip"
        for turn, observation, step in zip(turns, _observations(record), record.steps, strict=True):
            assert turn.prompt_ids == toy_prompt_ids(observation, strip_thinking=strip)  # what the server was sent
            assert turn.completion_ids == toy_completion_ids(str(step.action))
            assert turn.input_ids == turn.prompt_ids + turn.completion_ids
            assert turn.mask == [0] * len(turn.prompt_ids) + [1] * len(turn.completion_ids)
            assert turn.logprobs is not None and len(turn.logprobs) == len(turn.completion_ids)
            assert (turn.reward, turn.episode_reward) == (step.reward, record.reward)
        assert [t.done for t in turns] == [False, False, True]
    lines = [json.loads(text) for text in (out / "episodes.jsonl").read_text().splitlines()]
    validator = jsonschema.Draft202012Validator(SCHEMAS["episode"])
    assert all(validator.is_valid(line) for line in lines)  # the published schema holds them
    line = lines[0]
    stored = line["steps"][1]["tokens"]
    assert type(stored["prompt_ids"]) is list and all(type(i) is int for i in stored["prompt_ids"])  # plain JSON
    assert stored["prefix_mismatch"] is mismatch and stored["logprobs_of"] == "server"
    assert "tokens" not in line["steps"][1]["agent"]


def test_a_card_without_token_ids_reads_as_episodes_without_turns(tmp_path: Path) -> None:
    out = tmp_path / "card"
    with ChatServer() as server:
        _eval(out, server.base_url, "vllm-tokens")  # not asked: as every card before token traces
    text = (out / "episodes.jsonl").read_text()
    assert '"tokens"' not in text and '"action_stored"' not in text  # a default is left off the line
    _, episodes, _ = load_card(out)
    assert list(card_token_turns(out)) == [[], [], []]
    assert all(step.tokens is None for record in episodes for step in record.steps)
