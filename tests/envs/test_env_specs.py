"""Env specs (``ID[key=value,...]``): parsed one way for every command, recorded per env in
a card's plan identity, and part of what a resume must match."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from frostgym.agents import OracleAgent
from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.core.errors import CardMismatchError, EnvSpecError
from frostgym.envs.specs import EnvSpec, env_kwargs_for, env_options, parse_env_specs
from frostgym.evaluate.replay import replay_card
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions


def test_parse_plain_ids_and_bracketed_arguments() -> None:
    specs = parse_env_specs("frostgym/Arithmetic-v0[level=1], frostgym/SQL-v0[level=2,max_turns=3],frostgym/Code-v0")
    assert specs == [
        EnvSpec("frostgym/Arithmetic-v0", {"level": 1}),
        EnvSpec("frostgym/SQL-v0", {"level": 2, "max_turns": 3}),
        EnvSpec("frostgym/Code-v0"),
    ]


@pytest.mark.parametrize(
    ("raw", "value"),
    [("1", 1), ("0.5", 0.5), ("true", True), ("null", None), ('"7"', "7"), ("abc", "abc"), ("{}", "{}")],
)
def test_values_are_json_scalars_else_strings(raw: str, value: object) -> None:
    (spec,) = parse_env_specs(f"x/Y-v0[key={raw}]")
    assert spec.kwargs == {"key": value}
    assert parse_env_specs(str(spec)) == [spec]  # the spelling round-trips


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no env id"),
        ("a/B-v0[level=1", "unbalanced '\\['"),
        ("a/B-v0]level=1", "unbalanced '\\]'"),
        ("a/B-v0[level]", "not key=value"),
        ("a/B-v0[=1]", "not key=value"),
        ("a/B-v0[level=1,level=2]", "twice"),
        ("a/B-v0[level=1]x", "not ID or ID"),
        ("[level=1]", "not ID or ID"),
    ],
)
def test_bad_specs_say_why(text: str, why: str) -> None:
    with pytest.raises(EnvSpecError, match=why):
        parse_env_specs(text)


def test_options_per_env_win_over_options_for_all() -> None:
    specs = parse_env_specs("a/A-v0[max_turns=3],b/B-v0")
    options = env_options(specs)
    assert options == {"a/A-v0": {"max_turns": 3}}
    assert env_kwargs_for("a/A-v0", {"max_turns": 5, "task_config": {}}, options) == {"max_turns": 3, "task_config": {}}
    assert env_kwargs_for("b/B-v0", {"max_turns": 5}, options) == {"max_turns": 5}
    with pytest.raises(EnvSpecError, match="twice"):
        env_options(parse_env_specs("a/A-v0[max_turns=1],a/A-v0[max_turns=2]"))


def _config(options: RunOptions) -> dict[str, object]:
    return card_config(
        env_ids=["frostgym/SQL-v0", "frostgym/Fractions-v0"],
        agent_spec="oracle",
        sampling={},
        episodes=2,
        samples=1,
        seed=0,
        options=options,
    )


def test_a_card_records_each_envs_options_and_a_resume_must_match_them(tmp_path: Path) -> None:
    options = RunOptions(env_options={"frostgym/SQL-v0": {"max_turns": 2}})
    card = run_to_card(tmp_path / "card", OracleAgent(), _config(options), options)
    assert card["config"]["identity"]["env_options"] == {"frostgym/SQL-v0": {"max_turns": 2}}
    assert card["envs"]["frostgym/SQL-v0"]["max_turns"] == 2
    _, episodes, _ = load_card(tmp_path / "card")
    assert {e.steps[-1].info["max_turns"] for e in episodes if e.env_id == "frostgym/SQL-v0"} == {2}
    assert replay_card(tmp_path / "card").ok

    other = RunOptions(env_options={"frostgym/SQL-v0": {"max_turns": 3}})
    with pytest.raises(CardMismatchError, match="env_options"):
        run_to_card(tmp_path / "card", OracleAgent(), _config(other), other, resume=True)


def test_a_card_without_options_has_the_identity_cards_had_before() -> None:
    assert "env_options" not in _config(RunOptions())["identity"]  # type: ignore[operator]


def test_eval_takes_the_bracket_spelling_and_refuses_a_bad_one(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(
        app, ["eval", "--env", "frostgym/SQL-v0[max_turns=2]", "--episodes", "1", "--out", str(tmp_path / "a")]
    )
    assert ok.exit_code == 0, ok.output
    card, _, _ = load_card(tmp_path / "a")
    assert card["config"]["identity"]["env_options"] == {"frostgym/SQL-v0": {"max_turns": 2}}
    bad = runner.invoke(app, ["eval", "--env", "frostgym/SQL-v0[max_turns=2", "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "unbalanced" in bad.output
    assert not (tmp_path / "b").exists()
