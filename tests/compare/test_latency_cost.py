"""Latency and money in ``frostgym compare`` (issue 38 item 4): the wall-time percentiles of
the episodes, checked against numpy and against the type-7 order statistic written out; the
mean USD per episode from a declared price table, checked against the token counts on the
committed GRPO cards' lines; a price table that lacks a card's model refused, naming it; and
``max`` / ``max_increase`` gates on p95 wall time and on money, each passing and failing."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from frostgym.agents import OracleAgent
from frostgym.cli import app
from frostgym.compare.compare import Comparison, compare_cards
from frostgym.compare.costs import TOKEN_TIMINGS, WALL_PERCENTILES, costs, percentile, token_timings, wall_percentiles
from frostgym.compare.gates import parse_gates
from frostgym.compare.prices import Price, PriceFileError, model_id, parse_prices, read_prices
from frostgym.compare.reading import read_card_facts
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions

GRPO = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "grpo-l1"
BEFORE, AFTER = GRPO / "before", GRPO / "after"
#: Both GRPO checkpoints at one price: USD per million prompt and completion tokens.
PRICES = {
    "runs/grpo-l1/before": Price(0.10, 0.40),
    "runs/grpo-l1/after": Price(0.10, 0.40),
}


def _lines(card: Path) -> list[dict[str, Any]]:
    with open(card / "episodes.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _type7(values: list[float], q: float) -> float:
    """Hyndman and Fan's type 7, written out: rank (n - 1) q / 100 of the sorted values,
    interpolated linearly between its two neighbours."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


def _cost(comparison: Comparison, metric: str, slice_label: str = "overall") -> tuple[float | None, float | None]:
    [found] = [c for c in comparison.costs if c.metric == metric and c.slice == slice_label]
    return found.base, found.cand


# --- wall-time percentiles ------------------------------------------------------------------


def test_wall_percentiles_on_real_cards_are_numpys_of_the_episode_lines() -> None:
    comparison = compare_cards(BEFORE, AFTER)
    for side, card in ((0, BEFORE), (1, AFTER)):
        walls = [line["wall_seconds"] for line in _lines(card)]
        assert len(walls) == 168
        for metric, q in WALL_PERCENTILES.items():
            value = _cost(comparison, metric)[side]
            assert value == pytest.approx(float(np.percentile(walls, q)), rel=1e-12, abs=0)
            assert value == pytest.approx(_type7(walls, q), rel=1e-12)
    # one env: its slice has the same percentiles as overall
    env = "env=frostgym/Arithmetic-v0"
    assert _cost(comparison, "wall_seconds_p95", env) == _cost(comparison, "wall_seconds_p95")


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1001])
def test_percentile_is_the_type7_order_statistic(n: int) -> None:
    values = np.random.default_rng(n).exponential(3.0, size=n)
    for q in (0.0, 50.0, 95.0, 99.0, 100.0):
        found = percentile(values, q)
        assert found == pytest.approx(float(np.percentile(values, q)), rel=1e-12)
        assert found == pytest.approx(_type7(values.tolist(), q), rel=1e-12)
    assert percentile(np.zeros(0), 95.0) is None


def test_percentiles_count_failed_drops_and_leave_out_episodes_that_never_ran() -> None:
    facts = read_card_facts(BEFORE).facts
    names = (*facts.names, "agent_error", "skipped", "cancelled")
    code = {name: names.index(name) for name in ("agent_error", "skipped", "cancelled")}
    drop = facts.drop.copy()
    wall = facts.wall_seconds.copy()
    drop[:3], wall[:3] = code["agent_error"], 500.0  # three timed-out calls: the tail
    drop[3:40], wall[3:40] = code["skipped"], 0.0  # never ran
    drop[40:50], wall[40:50] = code["cancelled"], 0.0
    edited = replace(facts, names=names, drop=drop, wall_seconds=wall)
    ran = np.concatenate([wall[:3], wall[50:]])
    found = wall_percentiles(edited)
    for metric, q in WALL_PERCENTILES.items():
        assert found[metric] == pytest.approx(float(np.percentile(ran, q)), rel=1e-12)
    # the mean per episode still spreads over every episode, as every cost does
    assert costs(edited)["wall_seconds_per_episode"] == pytest.approx(float(wall.sum()) / len(wall))


# --- time to first token, seconds per output token ------------------------------------------


def test_token_timings_are_percentiles_of_the_episodes_that_recorded_one() -> None:
    facts = read_card_facts(BEFORE).facts
    rng = np.random.default_rng(3)
    ttft, tpot = rng.exponential(0.2, len(facts)), rng.exponential(0.01, len(facts))
    ttft[:20] = np.nan  # steps that recorded none: left out, not 0
    tpot[100:] = np.nan
    found = token_timings(replace(facts, ttft_seconds=ttft, tpot_seconds=tpot))
    kept = {"ttft_seconds": ttft[20:], "tpot_seconds": tpot[:100]}
    for metric, (column, q) in TOKEN_TIMINGS.items():
        assert found[metric] == pytest.approx(float(np.percentile(kept[column], q)), rel=1e-12)
    nothing = token_timings(replace(facts, ttft_seconds=np.full(len(facts), np.nan)))
    assert nothing["ttft_seconds_p95"] is None


def test_cards_without_token_timings_have_no_such_cost_and_its_gate_says_why() -> None:
    comparison = compare_cards(BEFORE, AFTER, parse_gates({"gate": [{"metric": "ttft_seconds_p95", "max": 1.0}]}))
    assert not {c.metric for c in comparison.costs} & set(TOKEN_TIMINGS)
    [verdict] = comparison.gates
    assert not verdict.passed and "the hf agent does, the openai agent cannot" in verdict.detail


# --- money --------------------------------------------------------------------------------


def test_cost_per_episode_is_the_mean_of_each_episodes_priced_tokens() -> None:
    comparison = compare_cards(BEFORE, AFTER, prices=PRICES)
    for side, card in ((0, BEFORE), (1, AFTER)):
        lines = _lines(card)
        dollars = [
            sum(
                step["agent"]["prompt_tokens"] * 0.10 + step["agent"]["completion_tokens"] * 0.40
                for step in line["steps"]
            )
            / 1e6
            for line in lines
        ]
        assert _cost(comparison, "cost_per_episode")[side] == pytest.approx(sum(dollars) / len(lines), rel=1e-12)
    data = comparison.to_json()
    assert data["prices"] == {
        "base": {"model": "runs/grpo-l1/before", "input_per_million": 0.1, "output_per_million": 0.4},
        "cand": {"model": "runs/grpo-l1/after", "input_per_million": 0.1, "output_per_million": 0.4},
    }
    assert "cost_per_episode" in {c["metric"] for c in data["costs"]}
    # without a table there is no money, and the JSON says no prices were given
    plain = compare_cards(BEFORE, AFTER)
    assert "cost_per_episode" not in {c.metric for c in plain.costs} and plain.to_json()["prices"] is None


def test_each_side_is_priced_at_its_own_model() -> None:
    dearer = {**PRICES, "runs/grpo-l1/after": Price(1.0, 4.0)}  # ten times the base's
    cheap, dear = _cost(compare_cards(BEFORE, AFTER, prices=PRICES), "cost_per_episode")
    base, cand = _cost(compare_cards(BEFORE, AFTER, prices=dearer), "cost_per_episode")
    assert base == cheap and cand is not None and dear is not None and cand == pytest.approx(10 * dear)


def test_a_model_missing_from_the_table_is_refused_naming_it(tmp_path: Path) -> None:
    only_before = {"runs/grpo-l1/before": PRICES["runs/grpo-l1/before"]}
    with pytest.raises(PriceFileError, match=r"no model 'runs/grpo-l1/after' \(the cand card's model\)"):
        compare_cards(BEFORE, AFTER, prices=only_before)
    table = tmp_path / "prices.toml"
    table.write_text('["runs/grpo-l1/before"]\ninput_per_million = 0.1\noutput_per_million = 0.4\n')
    result = CliRunner().invoke(app, ["compare", str(BEFORE), str(AFTER), "--prices", str(table)])
    assert result.exit_code == 2 and "no model 'runs/grpo-l1/after'" in result.output, result.output


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no models"),
        ("m = 1\n", "'m' is not a table"),
        ("[m]\ninput_per_million = 1\n", "'m' has no output_per_million"),
        ("[m]\ninput_per_million = 1\noutput_per_million = -2\n", "must be a finite number >= 0"),
        ("[m]\ninput_per_million = true\noutput_per_million = 2\n", "must be a finite number >= 0"),
        ("[m]\ninput_per_million = 1\noutput_per_million = nan\n", "must be a finite number >= 0"),
        ("[m]\ninput_per_million = 1\noutput_per_million = 2\ncached = 3\n", "unknown keys ['cached']"),
        ("[m\n", "cannot read prices"),
    ],
)
def test_a_price_file_that_is_not_one_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    with pytest.raises(PriceFileError) as error:
        read_prices(path)
    assert problem in str(error.value) and str(path) in str(error.value)


def test_a_price_table_reads_dotted_model_ids() -> None:
    table = parse_prices({"openai/gpt-x.1": {"input_per_million": 2, "output_per_million": 8}})
    assert table == {"openai/gpt-x.1": Price(2.0, 8.0)}
    assert table["openai/gpt-x.1"].dollars(1_000_000, 500_000) == pytest.approx(6.0)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("latency") / "oracle"
    options = RunOptions(split="test", batch_size=16, retries=0)
    config = card_config(
        env_ids=["frostgym/Arithmetic-v0"], agent_spec="oracle", sampling={}, episodes=12, samples=1,
        seed=5, options=options,
    )  # fmt: skip
    run_to_card(out, OracleAgent(), config, options)
    return out


def test_an_agent_that_reports_no_tokens_has_no_cost_not_zero(oracle: Path) -> None:
    card = json.loads((oracle / "card.json").read_text())
    assert model_id(card) == "oracle"  # no model: the spec
    prices = {"oracle": Price(1.0, 1.0)}
    comparison = compare_cards(
        oracle, oracle, parse_gates({"gate": [{"metric": "cost_per_episode", "max": 1.0}]}), prices=prices
    )
    assert _cost(comparison, "cost_per_episode") == (None, None)
    [verdict] = comparison.gates
    assert not verdict.passed and verdict.detail == "the candidate has no value here"
    # a free token kind needs no count: an oracle priced at 0 costs 0
    free = compare_cards(oracle, oracle, prices={"oracle": Price(0.0, 0.0)})
    assert _cost(free, "cost_per_episode") == (0.0, 0.0)
    # its wall-time percentiles are there all the same
    base, cand = _cost(comparison, "wall_seconds_p95")
    assert base is not None and base == cand


# --- gates ---------------------------------------------------------------------------------


def _gated(*gates: dict[str, Any], prices: dict[str, Price] | None = PRICES) -> Comparison:
    return compare_cards(BEFORE, AFTER, parse_gates({"gate": list(gates)}), prices=prices)


def test_p95_wall_time_gates_pass_and_fail() -> None:
    p95 = _cost(compare_cards(BEFORE, AFTER), "wall_seconds_p95")[1]
    assert p95 is not None
    judged = _gated(
        {"name": "slo ok", "metric": "wall_seconds_p95", "max": p95 + 1.0},
        {"name": "slo broken", "metric": "wall_seconds_p95", "max": p95 - 1.0},
        {"name": "tail up at most 50%", "metric": "wall_seconds_p95", "max_increase": 0.5},
        {"name": "tail up at most 10%", "metric": "wall_seconds_p95", "max_increase": 0.1},
        {"name": "per env", "metric": "wall_seconds_p99", "per": "env", "max": 1e6},
    )
    verdicts = {g.name: g for g in judged.gates}
    assert verdicts["slo ok"].passed and verdicts["slo ok"].value == p95
    assert not verdicts["slo broken"].passed
    assert verdicts["tail up at most 50%"].passed and not verdicts["tail up at most 10%"].passed
    assert verdicts["tail up at most 10%"].value == pytest.approx(0.406, abs=1e-3)  # 73.8 s to 103.8 s
    assert verdicts["per env [frostgym/Arithmetic-v0]"].passed
    assert judged.decision == "block"


def test_a_significant_gate_on_a_percentile_fails_saying_why() -> None:
    [verdict] = _gated({"metric": "wall_seconds_p95", "max": 1e6, "significant": True}).gates
    assert not verdict.passed and "a percentile is judged on its point estimate" in verdict.detail


def test_money_gates_pass_and_fail() -> None:
    base, cand = _cost(compare_cards(BEFORE, AFTER, prices=PRICES), "cost_per_episode")
    assert base is not None and cand is not None and cand < base  # after GRPO: shorter replies
    judged = _gated(
        {"name": "under budget", "metric": "cost_per_episode", "max": cand * 1.01},
        {"name": "over budget", "metric": "cost_per_episode", "max": cand * 0.99},
        {"name": "no dearer", "metric": "cost_per_episode", "max_increase": 0.0},
        {"name": "budget with confidence", "metric": "cost_per_episode", "max": base, "significant": True},
    )
    verdicts = {g.name: g for g in judged.gates}
    assert verdicts["under budget"].passed and not verdicts["over budget"].passed
    assert verdicts["no dearer"].passed and verdicts["no dearer"].value == pytest.approx(cand / base - 1)
    confident = verdicts["budget with confidence"]
    assert confident.passed and confident.interval_method == "bootstrap by task"
    assert confident.interval is not None and confident.interval[0] <= cand <= confident.interval[1]
    # the other way round the cost rose, and the same ratio gate blocks
    [back] = compare_cards(
        AFTER, BEFORE, parse_gates({"gate": [{"metric": "cost_per_episode", "max_increase": 0.0}]}), prices=PRICES
    ).gates
    assert not back.passed and back.value == pytest.approx(base / cand - 1)


def test_a_money_gate_without_a_price_table_fails_saying_what_it_needs() -> None:
    [verdict] = _gated({"metric": "cost_per_episode", "max": 1.0}, prices=None).gates
    assert not verdict.passed and "--prices FILE" in verdict.detail


def test_the_cli_prints_the_prices_and_the_money(tmp_path: Path) -> None:
    table = tmp_path / "prices.toml"
    table.write_text("".join(f'["{model}"]\ninput_per_million = 0.1\noutput_per_million = 0.4\n' for model in PRICES))
    gates = tmp_path / "gates.toml"
    gates.write_text(
        '[[gate]]\nmetric = "cost_per_episode"\nmax = 0.001\n[[gate]]\nmetric = "wall_seconds_p95"\nmax = 3600\n'
    )
    out = tmp_path / "out.json"
    args = ["compare", str(BEFORE), str(AFTER), "--prices", str(table), "--gate", str(gates), "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "price (cand): runs/grpo-l1/after: $0.1 input, $0.4 output per million tokens" in result.output
    assert "cost_per_episode" in result.output and "wall_seconds_p95" in result.output
    data = json.loads(out.read_text())
    assert data["decision"] == "promote" and [g["passed"] for g in data["gates"]] == [True, True]
