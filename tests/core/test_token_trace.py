"""The token trace on a step record: left off the line when absent (records written before it
decode unchanged), checked on decoding (one logprob per completion id, a stored
``prefix_mismatch`` that agrees with the ids), and published in the episode schema."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.cards.schema import SCHEMAS
from frostgym.cards.store import dumps_line
from frostgym.cli import app
from frostgym.core.episode import EpisodeRecord, TokenTrace, decode_line, prefix_mismatch
from frostgym.run.runner import RunOptions, evaluate

SQL = "frostgym/SQL-v0"


class CountingAgent:
    """Replies ``turn N``, with the ids a tokenizer of one id per character would give for a
    template that keeps every turn (``rewrite``: one that rewrites the first message anew on
    every turn)."""

    name = "counting"

    def __init__(self, rewrite: bool = False) -> None:
        self.rewrite = rewrite

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = []
        for request in requests:
            prompt = [ord(c) for m in request.observation for c in m["content"]]
            if self.rewrite:
                prompt[0] += request.turn
            text = f"turn {request.turn}"
            trace = TokenTrace(prompt_ids=prompt, completion_ids=[ord(c) for c in text], logprobs=[-0.5] * len(text))
            replies.append(AgentReply(action=text, tokens=trace))
        return replies

    def describe(self) -> dict[str, Any]:
        return {"spec": "counting"}


def _records(agent: CountingAgent) -> list[EpisodeRecord]:
    return evaluate([SQL], agent, episodes=2, options=RunOptions(env_kwargs={"max_turns": 3})).episodes


def test_prefix_mismatch_compares_each_prompt_with_the_turn_before() -> None:
    first = TokenTrace(prompt_ids=[1, 2], completion_ids=[3])
    assert prefix_mismatch(None, first) is None
    assert prefix_mismatch(first, TokenTrace(prompt_ids=[1, 2, 3, 4])) is False
    assert prefix_mismatch(first, TokenTrace(prompt_ids=[1, 2, 3])) is False
    assert prefix_mismatch(first, TokenTrace(prompt_ids=[1, 2, 4, 3])) is True  # completion re-tokenised
    assert prefix_mismatch(first, TokenTrace(prompt_ids=[9, 2, 3, 4])) is True  # an earlier turn rewritten
    assert prefix_mismatch(first, TokenTrace(prompt_ids=[1, 2])) is True  # shorter than what came before
    assert prefix_mismatch(TokenTrace(prompt_ids=[1]), TokenTrace(prompt_ids=[1, 2])) is None  # no completion ids
    assert prefix_mismatch(first, TokenTrace(completion_ids=[5])) is None


@pytest.mark.parametrize(("rewrite", "flags"), [(False, [None, False, False]), (True, [None, True, True])])
def test_the_runner_sets_the_flag_as_it_records_each_step(rewrite: bool, flags: list[bool | None]) -> None:
    records = _records(CountingAgent(rewrite))
    for record in records:
        assert [s.tokens.prefix_mismatch if s.tokens else "none" for s in record.steps] == flags
        for step in record.steps:
            assert step.tokens is not None and step.tokens.completion_ids == [ord(c) for c in str(step.action)]


def test_a_record_with_tokens_round_trips_through_its_line() -> None:
    record = _records(CountingAgent(rewrite=True))[0]
    line = record.encode(dumps_line)
    assert decode_line(line, "episode") == record
    stored = json.loads(line)["steps"][0]["tokens"]
    assert "prefix_mismatch" not in stored  # None is a default: left off
    assert stored["logprobs"] == [-0.5] * 6


def test_a_line_without_tokens_decodes_as_before() -> None:
    """A record's line as cards were written before token traces: no ``tokens``, and
    ``action_stored`` written out as null."""
    line = json.loads(_records(CountingAgent())[0].encode(dumps_line))
    for step in line["steps"]:
        del step["tokens"]
        step["action_stored"] = None
    record = decode_line(json.dumps(line).encode(), "episode")
    assert isinstance(record, EpisodeRecord)
    assert all(step.tokens is None and step.action_stored is None for step in record.steps)
    assert b'"tokens"' not in record.encode(dumps_line) and b'"action_stored"' not in record.encode(dumps_line)


def _line_with(change: Any) -> bytes:
    line = json.loads(_records(CountingAgent())[0].encode(dumps_line))
    change(line["steps"])
    return json.dumps(line).encode()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda steps: steps[1]["tokens"].update(prefix_mismatch=True), "'tokens.prefix_mismatch' is True, but"),
        (lambda steps: steps[1]["tokens"].pop("prefix_mismatch"), "'tokens.prefix_mismatch' is None, but"),
        (lambda steps: steps[0]["tokens"].update(prefix_mismatch=False), "step 0: 'tokens.prefix_mismatch'"),
        (lambda steps: steps[0]["tokens"]["logprobs"].pop(), "5 logprobs for 6 completion tokens"),
        (
            lambda steps: steps[0]["tokens"].update(completion_ids=[-1]),
            "'completion_ids' item 0 must be an integer >= 0",
        ),
        (
            lambda steps: steps[0]["tokens"].update(prompt_ids=[2**31]),
            "'prompt_ids' item 0 must be an integer <= 2147483647",
        ),
        (lambda steps: steps[0]["tokens"].update(logprobs_of="guess"), "logprobs_of"),
        (lambda steps: steps[0]["tokens"].update(loss_mask=[1]), "unknown field 'loss_mask'"),
    ],
)
def test_a_token_trace_that_breaks_a_rule_is_refused(change: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace("[", r"\[")):
        decode_line(_line_with(change), "episode")


def test_a_trace_needs_logprobs_for_their_source() -> None:
    with pytest.raises(ValueError, match="'logprobs_of' without logprobs"):
        TokenTrace(completion_ids=[1], logprobs_of="model")
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"completion_ids": [1, 2], "logprobs": [0.0]}', type=TokenTrace)


def test_the_episode_schema_publishes_the_token_trace() -> None:
    printed = CliRunner().invoke(app, ["schema", "episode"])
    assert printed.exit_code == 0, printed.output
    schema = json.loads(printed.output)
    assert schema == SCHEMAS["episode"]
    step = schema["$defs"]["step"]
    assert step["properties"]["tokens"]["anyOf"][0] == {"$ref": "#/$defs/token_trace"}
    assert "tokens" not in step["required"]
    trace = schema["$defs"]["token_trace"]
    assert trace["additionalProperties"] is False and not trace.get("required")
    assert set(trace["properties"]) == {"prompt_ids", "completion_ids", "logprobs", "logprobs_of", "prefix_mismatch"}
