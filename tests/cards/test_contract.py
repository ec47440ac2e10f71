"""The evaluation contract on the card (``frostgym.cards.contract``): a real eval records
what bounded its episodes (turns, each env's limits with their values, its tools read-only
or writing, the agent's budgets) and the declared baseline role; an older card reads with
them unknown; ``frostgym compare`` prints the base's role and every part two cards differ in."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import jsonschema
import pytest
from typer.testing import CliRunner

from frostgym.cards.card import read_card_json
from frostgym.cards.contract import (
    UNKNOWN,
    agent_contract,
    baseline_role,
    contract_differences,
    contract_lines,
    read_contract,
)
from frostgym.cards.schema import SCHEMAS
from frostgym.cli import app
from frostgym.tools.http.clients import TOOLS

ROOT = Path(__file__).resolve().parents[2]
OLD_CARD = ROOT / "benchmarks" / "results" / "grpo-l1" / "before"
ENVS = "frostgym/SQL-v0,frostgym/Code-v0"


def _eval(out: Path, *extra: str) -> dict[str, Any]:
    args = ["eval", "--env", ENVS, "--split", "test", "--episodes", "2", "--out", str(out), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    card: dict[str, Any] = json.loads((out / "card.json").read_text())
    jsonschema.validate(card, SCHEMAS["card"])
    return card


@pytest.fixture(scope="module")
def base_card(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("contract") / "base"
    _eval(out, "--baseline-role", "sft")
    return out


def test_an_eval_card_records_the_contract_with_the_real_limits(base_card: Path) -> None:
    contract = json.loads((base_card / "card.json").read_text())["contract"]
    assert contract["envs"] == {
        "frostgym/SQL-v0": {
            "max_turns": 6,
            "limits": {"max_result_chars": 2000, "max_result_rows": 20, "sql_memory_mb": 64, "sql_timeout_s": 1.0},
            "tools": {"read_only": ["run_sql", "submit_sql"], "writing": []},
        },
        "frostgym/Code-v0": {
            "max_turns": 1,
            "limits": {"cpu_seconds": 3.0, "memory_mb": 512, "wall_seconds": 8.0},
            "tools": {"read_only": ["run_tests", "submit"], "writing": []},
        },
    }
    # the oracle makes no requests and knows no context length; no episode has a wall-time budget
    assert contract["agent"] == {
        "max_new_tokens": 512,
        "context_length": None,
        "request_timeout_s": None,
        "episode_wall_s": None,
    }
    assert contract["baseline_role"] == "sft"
    summary = CliRunner().invoke(app, ["summary", str(base_card)])
    assert summary.exit_code == 0, summary.output
    assert "contract: baseline role: sft" in summary.output
    assert "contract: frostgym/SQL-v0: max_turns 6; limits max_result_chars 2000, max_result_rows 20" in summary.output
    assert "cpu_seconds 3, memory_mb 512, wall_seconds 8; tools read-only run_tests, submit" in summary.output


def test_limits_given_to_the_env_are_the_values_recorded(tmp_path: Path) -> None:
    out = tmp_path / "narrow"
    args = ["eval", "--env", "frostgym/Code-v0[cpu_seconds=1.5,memory_mb=256]", "--split", "test", "--episodes", "1"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    limits = read_card_json(out)["contract"]["envs"]["frostgym/Code-v0"]["limits"]
    assert limits == {"cpu_seconds": 1.5, "memory_mb": 256, "wall_seconds": 5.0}


def test_an_older_card_reads_with_the_contract_unknown() -> None:
    card = read_card_json(OLD_CARD, entries=False)
    assert "contract" not in card
    jsonschema.validate(json.loads((OLD_CARD / "card.json").read_text()), SCHEMAS["card"])
    contract = read_contract(card)
    assert contract["recorded"] is False and contract["baseline_role"] == UNKNOWN
    # max_turns and max_new_tokens every card recorded (its envs, its sampling); the rest it never did
    assert contract["envs"] == {"frostgym/Arithmetic-v0": {"max_turns": 1, "limits": UNKNOWN, "tools": UNKNOWN}}
    assert contract["agent"] == {
        "max_new_tokens": 64,
        "context_length": UNKNOWN,
        "request_timeout_s": UNKNOWN,
        "episode_wall_s": UNKNOWN,
    }
    assert contract_lines(card)[-1] == "frostgym/Arithmetic-v0: max_turns 1; limits unknown; tools unknown"
    summary = CliRunner().invoke(app, ["summary", str(OLD_CARD)])
    assert summary.exit_code == 0, summary.output
    assert "contract: baseline role: unknown" in summary.output


def test_compare_prints_the_base_role_and_each_contract_difference(base_card: Path, tmp_path: Path) -> None:
    cand = tmp_path / "cand"
    _eval(cand, "--max-turns", "3")
    assert "baseline_role" not in read_card_json(cand, entries=False)["contract"]
    result = CliRunner().invoke(app, ["compare", str(base_card), str(cand)])
    assert result.exit_code == 0, result.output
    assert "base role: sft" in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning: contract:")]
    assert lines == [
        "warning: contract: max_turns of frostgym/SQL-v0 differs: 6 vs 3",
        "warning: contract: max_turns of frostgym/Code-v0 differs: 1 vs 3",
    ]
    same = CliRunner().invoke(app, ["compare", str(cand), str(cand)])
    assert "base role: not declared" in same.output and "warning: contract:" not in same.output


def test_an_older_card_in_a_comparison_is_said_once() -> None:
    card = read_card_json(OLD_CARD, entries=False)
    recorded = {
        **card,
        "contract": {
            "envs": {
                "frostgym/Arithmetic-v0": {"max_turns": 2, "limits": {}, "tools": {"read_only": [], "writing": []}}
            },
            "agent": {"max_new_tokens": 64, "context_length": 2048, "request_timeout_s": None, "episode_wall_s": None},
        },
    }
    assert contract_differences(card, recorded) == [
        "the base card records no contract (written before frostgym recorded one): limits, tools and agent budgets "
        "are unknown, so whether both were played under the same contract cannot be checked",
        "max_turns of frostgym/Arithmetic-v0 differs: 1 vs 2",
    ]
    assert contract_differences(card, card)[0].startswith("neither card records a contract")
    narrower = json.loads(json.dumps(recorded))
    narrower["contract"]["agent"]["max_new_tokens"] = 32
    narrower["contract"]["envs"]["frostgym/Arithmetic-v0"]["limits"] = {"cpu_seconds": 1.5}
    assert contract_differences(recorded, narrower) == [
        "cpu_seconds of frostgym/Arithmetic-v0 differs: unknown vs 1.5",
        "max_new_tokens differs: 64 vs 32",
    ]


def test_the_agent_part_reads_what_the_agent_knows() -> None:
    from frostgym.agents.hf import HFAgent

    openai_like = SimpleNamespace(describe=lambda: {"request_timeout_s": 120.0})
    assert agent_contract(openai_like, {"max_new_tokens": 256}) == {
        "max_new_tokens": 256,
        "context_length": None,
        "request_timeout_s": 120.0,
        "episode_wall_s": None,
    }
    model = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace(max_position_embeddings=8192)))
    assert HFAgent.context_length.fget(model) == 8192  # type: ignore[attr-defined]
    hf_like = SimpleNamespace(context_length=8192, describe=dict)
    assert agent_contract(hf_like, {"max_new_tokens": 64})["context_length"] == 8192
    assert [baseline_role(role) for role in ("previous", "sft", "production", "other")]
    with pytest.raises(ValueError, match="baseline role must be one of previous, sft, production, other"):
        baseline_role("best")


def test_an_http_tool_writes_exactly_when_its_request_is_not_a_get() -> None:
    """``HttpTool.writes``, the table ToolsHTTP-v0's contract marks its tools by, against
    the method each tool sends."""
    methods: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        methods.append(request.method)
        return httpx.Response(200, json={})

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        for tool in TOOLS:
            arguments = {name: _value(tool.properties[name]) for name in tool.required}
            tool.function(client, **arguments)
            assert tool.writes == (methods[-1] != "GET"), (tool.name, methods[-1])
    assert sorted(t.name for t in TOOLS if t.writes) == ["book_flight", "create_event", "delete_event"]


def _value(schema: Any) -> object:
    kind = schema.get("type")
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return 1.0
    return "x"
