"""``frostgym compare`` and ``trend`` on real cards written by ``frostgym eval``.

The done-when of the comparison issue: a card against itself gives zero deltas, intervals
containing 0, p = 1 and ``promote``; the oracle (base) against the random agent (cand) on
the same plan blocks, naming the regression gate; the same comparison twice prints
byte-identical JSON; mismatched plans are refused unless ``--overlap``, which reports each
side's unpaired count; and the base values are exactly the numbers the cards show.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from frostgym.cards.card import load_card
from frostgym.cli import app
from frostgym.compare.compare import compare_cards
from frostgym.compare.gates import parse_gates, read_gates
from frostgym.compare.trend import TrendRow, _flags, trend
from frostgym.core.errors import GateFileError, PlanMismatchError

ENVS = "frostgym/Arithmetic-v0,frostgym/Fractions-v0"
EXAMPLE_GATES = Path(__file__).resolve().parents[2] / "examples" / "gates.toml"


def _eval(
    out: Path, agent: str, *, episodes: int = 12, samples: int = 2, seed: int = 0, envs: str = ENVS, split: str = "dev"
) -> Path:
    args = ["eval", "--env", envs, "--agent", agent, "--episodes", str(episodes), "--samples", str(samples)]
    args += ["--split", split]
    result = CliRunner().invoke(app, [*args, "--seed", str(seed), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    return {
        "oracle": _eval(root / "oracle", "oracle"),
        "oracle_again": _eval(root / "oracle_again", "oracle"),
        "random": _eval(root / "random", "random"),
        "other_plan": _eval(root / "other_plan", "oracle", seed=1),
    }


def _compare(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["compare", *args])
    return result.exit_code, result.output


def test_a_card_against_itself_is_a_zero_delta_and_promotes(cards: dict[str, Path], tmp_path: Path) -> None:
    gates = tmp_path / "gates.toml"
    gates.write_text('[[gate]]\nname = "no regression"\nmetric = "pass@1"\nmax_drop = 0.0\nsignificant = true\n')
    for cand in (cards["oracle"], cards["oracle_again"]):
        comparison = compare_cards(cards["oracle"], cand, read_gates(gates))
        assert comparison.decision == "promote"
        for view in comparison.views:
            assert view.delta in (0.0, None), view
            if view.ci_low is not None and view.ci_high is not None:
                assert view.ci_low <= 0.0 <= view.ci_high
            if view.view == "pass@1" and view.p_value is not None:
                assert view.p_value == 1.0
        assert all(t.base == t.cand for t in comparison.transitions)
    code, output = _compare(str(cards["oracle"]), str(cards["oracle"]), "--gate", str(gates))
    assert code == 0 and "PROMOTE" in output


def test_oracle_against_random_blocks_naming_the_regression_gate(cards: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    code, output = _compare(
        str(cards["oracle"]), str(cards["random"]), "--gate", str(EXAMPLE_GATES), "--json", str(out)
    )
    assert code == 1, output
    data = json.loads(out.read_text())
    assert data["decision"] == "block"
    failed = {g["name"] for g in data["gates"] if not g["passed"]}
    assert "no env regresses by more than 2 points [frostgym/Arithmetic-v0]" in failed
    assert "BLOCK" in output
    overall = next(v for v in data["views"] if v["view"] == "pass@1" and v["slice"] == "overall")
    assert overall["rule"] in ("errors_as_failures", "errors_excluded")
    for key in ("base", "cand", "delta", "ci_low", "ci_high", "p_value", "n_tasks"):
        assert key in overall
    assert overall["delta"] < 0 and overall["ci_high"] < 0 and overall["p_value"] < 1e-3


def test_the_same_comparison_twice_is_byte_identical(cards: dict[str, Path], tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        code, _ = _compare(str(cards["oracle"]), str(cards["random"]), "--gate", str(EXAMPLE_GATES), "--json", str(out))
        assert code == 1
    assert first.read_bytes() == second.read_bytes()


def test_base_values_are_the_cards_own_views(cards: dict[str, Path]) -> None:
    """pass@k, pass^k, maj@k and mean reward deltas start from the numbers the card shows."""
    comparison = compare_cards(cards["random"], cards["oracle"])
    views = load_card(cards["random"])[0]["views"]
    for rule in ("errors_as_failures", "errors_excluded"):
        shown = views["overall"][rule]
        assert comparison.view("mean_reward", rule=rule).base == pytest.approx(shown["mean_reward"])
        for metric in ("pass@k", "pass^k", "maj@k"):
            for k, value in shown[metric].items():
                found = comparison.view(f"{metric[:-1]}{k}", rule=rule)
                assert found is not None and found.base == pytest.approx(value["value"])
        env = "frostgym/Arithmetic-v0"
        by_env = views["by_env"][env][rule]
        assert comparison.view("pass@1", "env", env, rule).base == pytest.approx(by_env["pass@k"]["1"]["value"])


def test_mismatched_plans_are_refused_unless_overlap(cards: dict[str, Path]) -> None:
    with pytest.raises(PlanMismatchError, match="seed 0 vs 1"):
        compare_cards(cards["oracle"], cards["other_plan"])
    code, output = _compare(str(cards["oracle"]), str(cards["other_plan"]))
    assert code == 2 and "plans differ" in output and "--overlap" in output
    comparison = compare_cards(cards["oracle"], cards["other_plan"], overlap=True)
    total = len(load_card(cards["oracle"])[1])
    assert comparison.pairing.paired + comparison.pairing.base_only == total
    assert comparison.pairing.base_only > 0 and comparison.pairing.cand_only > 0
    code, output = _compare(str(cards["oracle"]), str(cards["other_plan"]), "--overlap")
    assert code == 0
    assert f"only in base: {comparison.pairing.base_only}" in output
    assert f"only in cand: {comparison.pairing.cand_only}" in output


def test_small_slices_are_marked_not_hidden(cards: dict[str, Path]) -> None:
    comparison = compare_cards(cards["oracle"], cards["random"])
    per_env = [v for v in comparison.views if v.slice == "env" and v.view == "pass@1"]
    assert per_env and all(v.n_tasks == 12 for v in per_env)
    assert comparison.view("pass@1").n_tasks == 24
    assert all(v.too_small == (v.n_tasks < 10 or v.ci_low is None) for v in comparison.views)


def test_gate_files_are_checked() -> None:
    assert [g.name for g in read_gates(EXAMPLE_GATES)][-1] == "no env regresses by more than 2 points"
    bad = [
        ({"gate": [{"metric": "pass@1"}]}, "exactly one of"),
        ({"gate": [{"metric": "pass@1", "min": 0.3, "max": 0.9}]}, "exactly one of"),
        ({"gate": [{"metric": "pass@1", "min": "high"}]}, "finite number"),
        ({"gate": [{"metric": "pass@1", "min": 0.3, "per": "planet"}]}, "'per' must be one of"),
        ({"gate": [{"metric": "pass@1", "min": 0.3, "colour": 1}]}, "unknown keys"),
        (
            {"gate": [{"metric": "tool_calls_per_episode", "max_increase": 0.3, "significant": True}]},
            "not max_increase",
        ),
        ({"gates": []}, "unknown top-level"),
        ({}, "no \\[\\[gate\\]\\]"),
    ]
    for data, message in bad:
        with pytest.raises(GateFileError, match=message):
            parse_gates(data)


def test_a_bad_gate_file_is_exit_2(cards: dict[str, Path], tmp_path: Path) -> None:
    gates = tmp_path / "gates.toml"
    gates.write_text("[[gate]]\nmetric = 'pass@1'\nmin = [\n")
    code, output = _compare(str(cards["oracle"]), str(cards["random"]), "--gate", str(gates))
    assert code == 2 and "cannot read gates" in output


def test_an_unknown_metric_fails_its_gate(cards: dict[str, Path], tmp_path: Path) -> None:
    comparison = compare_cards(
        cards["oracle"], cards["oracle"], parse_gates({"gate": [{"metric": "pass@7", "min": 0}]})
    )
    assert comparison.decision == "block"
    assert "no metric 'pass@7'" in comparison.gates[0].detail


def test_trend_rows_follow_the_cards(cards: dict[str, Path]) -> None:
    rows = trend([cards["oracle"], cards["random"], cards["oracle"]], held_out=["frostgym/Fractions-v0"])
    assert [r.views["pass@1"] for r in rows] == [1.0, 0.0, 1.0]
    assert [r.held_out_reward["frostgym/Fractions-v0"] for r in rows] == [1.0, 0.0, 1.0]
    assert all(r.flags == () for r in rows)  # public and held-out moved together
    result = CliRunner().invoke(
        app, ["trend", str(cards["random"]), str(cards["oracle"]), "--held-out", "frostgym/Fractions-v0"]
    )
    assert result.exit_code == 0, result.output


def test_trend_flags_public_up_while_private_or_held_out_falls() -> None:
    def row(public: float, private: float | None, held: float) -> TrendRow:
        return TrendRow("c", 10, {}, public, private, {"frostgym/Fractions-v0": held}, {}, ())

    assert _flags(row(0.2, 0.5, 0.5), row(0.4, 0.5, 0.5)) == ()
    assert _flags(row(0.4, 0.5, 0.5), row(0.2, 0.3, 0.1)) == ()  # everything fell: no tell
    flags = _flags(row(0.2, 0.5, 0.5), row(0.4, 0.3, 0.1))
    assert len(flags) == 2
    assert "private split fell -0.200" in flags[0] and "held-out frostgym/Fractions-v0 fell -0.400" in flags[1]
    assert _flags(row(0.2, None, 0.5), row(0.4, None, 0.5)) == ()


@pytest.mark.slow
def test_a_card_of_two_splits_measures_the_private_gap(tmp_path: Path) -> None:
    """``--split test,private`` puts both splits in one card (replay still plays it); the
    comparison then reports each env's test-minus-private gap on both sides."""
    envs = "frostgym/Arithmetic-v0"
    base = _eval(tmp_path / "oracle", "oracle", episodes=6, samples=1, envs=envs, split="test,private")
    cand = _eval(tmp_path / "random", "random", episodes=6, samples=1, envs=envs, split="test,private")
    for out in (base, cand):
        _, episodes, _ = load_card(out)
        assert sorted({e.split for e in episodes}) == ["private", "test"]
        assert len(episodes) == 12
    assert CliRunner().invoke(app, ["replay", str(base)]).exit_code == 0
    [gap] = compare_cards(base, cand).private_gaps
    assert (gap.env_id, gap.base_gap, gap.cand_gap, gap.delta) == (envs, 0.0, 0.0, 0.0)
    assert (gap.test_tasks, gap.private_tasks) == (6, 6)
    rows = trend([cand, base])
    assert rows[1].private_reward == 1.0 and rows[0].private_reward == 0.0
    gate = parse_gates({"gate": [{"metric": "private_gap", "per": "env", "max": 0.05}]})
    judged = compare_cards(base, cand, gate)
    assert judged.decision == "promote" and judged.gates[0].value == 0.0


def test_an_unfinished_card_is_refused_with_how_to_finish_it(cards: dict[str, Path], tmp_path: Path) -> None:
    unfinished = tmp_path / "unfinished"
    shutil.copytree(cards["random"], unfinished)
    card = json.loads((unfinished / "card.json").read_text())
    card["status"] = "interrupted"
    (unfinished / "card.json").write_text(json.dumps(card))
    code, output = _compare(str(cards["oracle"]), str(unfinished))
    assert code == 2 and "not complete" in output and "--resume" in output
