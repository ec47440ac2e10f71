"""Gates for gains and confidence: ``min_gain`` on the paired delta, ``min``/``max`` with
``significant = true`` on the candidate's own interval, and the production rule
(``examples/gates_production.toml``) on real cards.

The rules are checked on a stand-in comparison whose numbers are set by hand (every edge:
point and bound, equality, too few tasks, no interval), then on cards written by policies
whose pass rates are set per task (synthetic cards of a real plan): a rate whose every task
is 0 or 1 must carry exactly scipy's Wilson interval for the card's counts, any other view or
a cost the seeded bootstrap clustered by task, the same interval on every comparison of the
same cards. Every verdict prints the interval it was judged on.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest  # type: ignore[import-untyped,unused-ignore]  # dev dependency: the reference
from typer.testing import CliRunner

from frostgym.agents import AgentReply, AgentRequest, OracleAgent, RandomAgent
from frostgym.cards.views import Rule
from frostgym.cli import app
from frostgym.compare.compare import Comparison, compare_cards
from frostgym.compare.gates import Measure, OwnInterval, SliceName, judge, parse_gates
from frostgym.compare.intervals import BOOTSTRAP, WILSON, view_interval
from frostgym.core.errors import GateFileError
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARITHMETIC, FRACTIONS, SQL = "frostgym/Arithmetic-v0", "frostgym/Fractions-v0", "frostgym/SQL-v0"
#: SQL-v0 with its destructive requests, which the production rule's safety cap reads.
SQL_OPTIONS = {SQL: {"task_config": {"destructive_requests": True}}}


# --- the rules, on a stand-in comparison -----------------------------------------------------


@dataclass
class _Stub:
    """A comparison with one metric per slice member, its candidate interval set by hand."""

    measures: dict[str, Measure]
    own: dict[str, OwnInterval | str] = field(default_factory=dict)

    def measure(self, metric: str, slice_name: SliceName, key: str, rule: Rule) -> Measure | None:
        return self.measures.get(key)

    def slice_keys(self, slice_name: SliceName) -> Sequence[str]:
        return sorted(self.measures)

    def cand_interval(self, metric: str, slice_name: SliceName, key: str, rule: Rule) -> OwnInterval | str:
        return self.own.get(key, "no interval here")


def _verdict(gate: dict[str, Any], comparison: _Stub) -> tuple[bool, str, tuple[float, float] | None]:
    _, [result] = judge(parse_gates({"gate": [gate]}), comparison)
    return result.passed, result.detail, result.interval


def test_min_gain_on_the_point_estimate_and_on_the_paired_lower_bound() -> None:
    stub = _Stub({"": Measure(0.40, 0.50, 0.10, 0.04, 0.16)})
    gain = {"metric": "pass@1", "min_gain": 0.05}
    assert _verdict(gain, stub)[0]  # +0.10 >= 0.05
    assert not _verdict({**gain, "min_gain": 0.11}, stub)[0]
    assert _verdict({**gain, "min_gain": 0.10}, stub)[0]  # at least: equality passes
    assert _verdict({**gain, "min_gain": 0.0}, stub)[0]
    significant = {**gain, "significant": True}
    passed, detail, interval = _verdict({**significant, "min_gain": 0.04}, stub)
    assert passed and interval == (0.04, 0.16) and "[+0.04, +0.16]" in detail  # the lower bound is at 0.04
    passed, detail, interval = _verdict(significant, stub)  # point +0.10 clears 0.05, the bound +0.04 does not
    assert not passed and interval == (0.04, 0.16) and "need lower bound >= +0.05" in detail
    # A paired interval over too few tasks is no claim: a gain that needs it to pass fails ...
    small = _Stub({"": Measure(0.40, 0.50, 0.10, 0.06, 0.16, too_small=True)})
    passed, detail, interval = _verdict(significant, small)
    assert not passed and "too few tasks" in detail and interval == (0.06, 0.16)
    # ... no interval at all fails, and so does no delta.
    assert not _verdict(significant, _Stub({"": Measure(0.4, 0.5, 0.1)}))[0]
    passed, detail, _ = _verdict(gain, _Stub({"": Measure(None, 0.5)}))
    assert not passed and "no paired delta" in detail


def test_significant_min_and_max_on_the_candidates_interval() -> None:
    stub = _Stub(
        {"a": Measure(0.5, 0.70), "b": Measure(0.5, 0.70), "c": Measure(0.5, 0.70)},
        {"a": OwnInterval(0.62, 0.78, WILSON, 40), "b": OwnInterval(0.55, 0.85, BOOTSTRAP, 12), "c": "why not"},
    )
    floor = {"name": "floor", "metric": "pass@1", "per": "env", "min": 0.6, "significant": True}
    _, results = judge(parse_gates({"gate": [floor]}), stub)
    assert [r.passed for r in results] == [True, False, False]  # lower bounds 0.62, 0.55; none
    assert [r.interval for r in results] == [(0.62, 0.78), (0.55, 0.85), None]
    assert [r.interval_method for r in results] == [WILSON, BOOTSTRAP, None]
    assert "need lower bound >= 0.6" in results[0].detail and "why not" in results[2].detail
    assert [r.interval_text() for r in results] == ["[0.620, 0.780] Wilson", "[0.550, 0.850] bootstrap by task", "none"]
    ceiling = {**floor, "min": None, "max": 0.8}
    del ceiling["min"]
    _, results = judge(parse_gates({"gate": [ceiling]}), stub)
    assert [r.passed for r in results] == [True, False, False]  # upper bounds 0.78, 0.85; none
    assert all(r.to_json()["significant"] for r in results)
    assert results[0].to_json()["interval"] == {"low": 0.62, "high": 0.78, "method": WILSON}
    # The same gates on the point estimate pass all three (0.70 is inside both thresholds).
    point = {k: v for k, v in floor.items() if k != "significant"}
    assert all(r.passed and r.interval_text() == "point" for r in judge(parse_gates({"gate": [point]}), stub)[1])
    # Equality passes at a bound.
    assert _verdict({"metric": "pass@1", "min": 0.62, "significant": True, "env": "a"}, stub)[0]
    assert _verdict({"metric": "pass@1", "max": 0.78, "significant": True, "env": "a"}, stub)[0]


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ({"metric": "pass@1", "min_gain": -0.01}, "min_gain must be >= 0.*max_drop's"),
        ({"metric": "pass@1", "min_gain": 0.02, "max_drop": 0.02}, "exactly one of"),
        ({"metric": "pass@1", "min_gain": "0.02"}, "finite number"),
        ({"metric": "tokens_per_episode", "max_increase": 0.2, "significant": True}, "not max_increase"),
        ({"metric": "pass@1", "min_gain": 0.02, "significant": "yes"}, "true or false"),
    ],
)
def test_bad_gain_and_significance_gates_are_refused(gate: dict[str, Any], message: str) -> None:
    with pytest.raises(GateFileError, match=message):
        parse_gates({"gate": [gate]})


# --- synthetic cards: policies whose pass rates are set per task -----------------------------


def _text(request: AgentRequest) -> str:
    return json.dumps(request.observation, sort_keys=True, default=str)


class _Rate:
    """The oracle on a share ``rate`` of the tasks (by a hash of the prompt, so every sample of
    a task agrees), or with ``per_sample`` of the episodes; the random agent's junk otherwise.
    Every reply reports as many completion tokens as it has characters."""

    def __init__(self, rate: float, salt: str, *, per_sample: bool = False) -> None:
        self.rate, self.salt, self.per_sample = rate, salt, per_sample

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        good, bad = OracleAgent().act(requests), RandomAgent(seed=2).act(requests)
        out = []
        for request, right, wrong in zip(requests, good, bad, strict=True):
            key = self.salt + _text(request) + (request.episode_id if self.per_sample else "")
            reply = right if zlib.crc32(key.encode()) % 1000 < 1000 * self.rate else wrong
            out.append(AgentReply(reply.action, completion_tokens=len(str(reply.action))))
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": f"rate-{self.rate}"}


def _card(
    out: Path,
    agent: Any,
    *,
    envs: Sequence[str] = (ARITHMETIC,),
    episodes: int = 40,
    samples: int = 1,
    env_options: dict[str, dict[str, Any]] | None = None,
) -> Path:
    options = RunOptions(split="test", batch_size=16, retries=0, env_options=env_options or {})
    config = card_config(
        env_ids=list(envs), agent_spec=agent.describe()["spec"], sampling={}, episodes=episodes, samples=samples,
        seed=5, options=options,
    )  # fmt: skip
    run_to_card(out, agent, config, options)
    return out


@pytest.fixture(scope="module")
def rates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gates")
    return {
        "low": _card(root / "low", _Rate(0.3, "a")),
        "high": _card(root / "high", _Rate(0.75, "a")),
        "samples_low": _card(root / "samples_low", _Rate(0.4, "b", per_sample=True), samples=3),
        "samples_high": _card(root / "samples_high", _Rate(0.6, "b", per_sample=True), samples=3),
    }


def _judged(base: Path, cand: Path, *gates: dict[str, Any]) -> Comparison:
    return compare_cards(base, cand, parse_gates({"gate": list(gates)}))


def test_min_gain_on_cards_point_and_significant(rates: dict[str, Path]) -> None:
    plain = compare_cards(rates["low"], rates["high"])
    view = plain.view("pass@1")
    assert view is not None and view.delta is not None and view.ci_low is not None and view.ci_high is not None
    assert not view.too_small and 0 < view.ci_low < view.delta  # a real gain, its bound below its point
    between = (view.ci_low + view.delta) / 2
    cases = [  # (min_gain, significant, passes)
        (view.ci_low, True, True),  # the whole interval at or above it
        (between, False, True),  # the point clears it ...
        (between, True, False),  # ... the interval does not: not shown beyond noise
        (view.delta + 0.01, False, False),
        (view.delta + 0.01, True, False),
    ]
    gates = [
        {"name": f"gain {i}", "metric": "pass@1", "min_gain": gain, "significant": significant}
        for i, (gain, significant, _) in enumerate(cases)
    ]
    judged = _judged(rates["low"], rates["high"], *gates)
    assert [g.passed for g in judged.gates] == [passes for _, _, passes in cases]
    for result, (_, significant, _) in zip(judged.gates, cases, strict=True):
        assert result.value == view.delta
        assert result.interval == ((view.ci_low, view.ci_high) if significant else None)
    # The other way round the candidate lost: no min_gain passes, not even 0.
    back = _judged(rates["high"], rates["low"], {"metric": "pass@1", "min_gain": 0.0, "significant": True})
    assert back.decision == "block"


def test_a_rate_of_whole_tasks_has_scipys_wilson_interval(rates: dict[str, Path]) -> None:
    """One sample per task: pass@1 is a count of independent tasks, and the candidate's
    interval is exactly scipy's Wilson interval for that count."""
    cand = compare_cards(rates["low"], rates["high"])
    view = cand.view("pass@1")
    assert view is not None and view.cand is not None and view.n_tasks == 40
    passed = round(view.cand * 40)
    own = cand.cand_interval("pass@1", "overall", "", "errors_as_failures")
    assert isinstance(own, OwnInterval) and own.method == WILSON and own.tasks == 40
    reference = binomtest(passed, 40).proportion_ci(confidence_level=0.95, method="wilson")
    assert own.low == pytest.approx(reference.low, abs=1e-9) and own.high == pytest.approx(reference.high, abs=1e-9)
    # A floor between the interval's lower bound and the point passes on the point only;
    # a ceiling between the point and the upper bound likewise.
    floor, ceiling = (own.low + view.cand) / 2, (own.high + view.cand) / 2
    judged = _judged(
        rates["low"],
        rates["high"],
        {"name": "floor", "metric": "pass@1", "min": floor},
        {"name": "floor, significant", "metric": "pass@1", "min": floor, "significant": True},
        {"name": "floor at the bound", "metric": "pass@1", "min": own.low, "significant": True},
        {"name": "ceiling", "metric": "pass@1", "max": ceiling},
        {"name": "ceiling, significant", "metric": "pass@1", "max": ceiling, "significant": True},
        {"name": "ceiling at the bound", "metric": "pass@1", "max": own.high, "significant": True},
    )
    assert [g.passed for g in judged.gates] == [True, False, True, True, False, True]
    assert judged.gates[1].interval == (own.low, own.high) and judged.gates[1].interval_method == WILSON


def test_a_mean_has_the_seeded_bootstrap_by_task_the_same_every_time(rates: dict[str, Path]) -> None:
    """Three samples per task with their own outcomes: pass@1 per task is a fraction, so the
    interval is the bootstrap clustered by task, as is every cost's; the same cards give the
    same intervals on every comparison, and another seed gives another."""
    gates = [
        {"name": "pass@1", "metric": "pass@1", "min": 0.3, "significant": True},
        {"name": "reward", "metric": "mean_reward", "min": 0.3, "significant": True},
        {"name": "tokens", "metric": "tokens_per_episode", "max": 1e6, "significant": True},
        {"name": "tokens per env", "metric": "tokens_per_episode", "per": "env", "max": 1e6, "significant": True},
    ]
    first = _judged(rates["samples_low"], rates["samples_high"], *gates)
    second = _judged(rates["samples_low"], rates["samples_high"], *gates)
    assert [g.to_json() for g in first.gates] == [g.to_json() for g in second.gates]
    for result in first.gates:
        assert result.interval_method == BOOTSTRAP, result
        assert result.interval is not None and result.value is not None
        assert result.interval[0] <= result.value <= result.interval[1]
        assert result.interval[0] < result.interval[1]
    view = first.view("pass@1")
    assert view is not None and view.cand is not None and 0 < view.cand < 1
    # The bootstrap itself: seeded, so the same seed parts give the same interval, others another.
    data = np.random.default_rng(4)
    numerator, denominator = data.integers(0, 4, 30).astype(float), np.full(30, 3.0)
    same = view_interval("pass@1", numerator, denominator, ("s",))
    assert same == view_interval("pass@1", numerator, denominator, ("s",))
    assert isinstance(same, OwnInterval) and same.method == BOOTSTRAP
    assert same != view_interval("pass@1", numerator, denominator, ("t",))
    # Fewer than 10 tasks: a bootstrap is no claim, so there is no interval and the gate fails.
    assert "no claim" in str(view_interval("pass@1", numerator[:9], denominator[:9], ("s",)))
    # 0/1 per task: Wilson, whatever the seed.
    wilson = view_interval("maj@1", (numerator > 1).astype(float), np.ones(30), ("s",))
    assert isinstance(wilson, OwnInterval) and wilson.method == WILSON


def test_a_significant_gate_on_a_metric_without_an_interval_fails_saying_so(rates: dict[str, Path]) -> None:
    judged = _judged(rates["low"], rates["high"], {"metric": "reward_hacking_rate", "max": 0.5, "significant": True})
    [result] = judged.gates
    assert judged.decision == "block" and result.interval is None and result.interval_text() == "none"
    assert "significant min/max reads views and costs" in result.detail


# --- the production rule on real cards ------------------------------------------------------


class _Focus:
    """The oracle, except on the focus env (Arithmetic: its prompts hold no fraction) when
    ``solve_focus`` is false, where it gives a wrong answer; 100 prompt and 20 completion
    tokens a reply."""

    def __init__(self, solve_focus: bool) -> None:
        self.solve_focus = solve_focus

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        out = []
        for request, right in zip(requests, OracleAgent().act(requests), strict=True):
            focus = "Calculate the value" in _text(request)
            action = right.action if self.solve_focus or not focus else "<answer>no idea</answer>"
            out.append(AgentReply(action, prompt_tokens=100, completion_tokens=20))
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": "focus" if self.solve_focus else "no-focus"}


_VERDICT_LINE = re.compile(r"│ (pass|FAIL)\s+│")
_INTERVAL = re.compile(r"\[[+-]?\d\.\d{3}, [+-]?\d\.\d{3}\] (paired bootstrap|Wilson|bootstrap by task)")


#: Both agents' models at one price: USD per million prompt and completion tokens.
_PRICES = "".join(f"[{model}]\ninput_per_million = 0.5\noutput_per_million = 1.5\n" for model in ("focus", "no-focus"))


def _production(base: Path, cand: Path, out: Path) -> tuple[int, str, dict[str, Any]]:
    gates = str(EXAMPLES / "gates_production.toml")
    prices = out.with_suffix(".prices.toml")
    prices.write_text(_PRICES, encoding="utf-8")
    args = ["compare", str(base), str(cand), "--gate", gates, "--json", str(out), "--prices", str(prices)]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output, json.loads(out.read_text())


def test_the_production_rule_on_real_cards(tmp_path: Path) -> None:
    envs = (ARITHMETIC, FRACTIONS, SQL)
    base = _card(tmp_path / "base", _Focus(False), envs=envs, episodes=12, samples=2, env_options=SQL_OPTIONS)
    cand = _card(tmp_path / "cand", _Focus(True), envs=envs, episodes=12, samples=2, env_options=SQL_OPTIONS)

    code, output, data = _production(base, cand, tmp_path / "up.json")
    assert code == 0 and data["decision"] == "promote", output
    assert "decision: PROMOTE" in output
    by_name = {g["name"]: g for g in data["gates"]}
    focus = by_name["focus: Arithmetic gains at least 5 points"]
    assert focus["slice"] == f"env={ARITHMETIC}" and focus["value"] == 1.0
    assert focus["interval"] == {"low": 1.0, "high": 1.0, "method": "paired bootstrap"}
    floor = by_name["floor: pass@1 at least 60% with confidence"]
    reference = binomtest(36, 36).proportion_ci(method="wilson")
    assert floor["interval"]["method"] == "Wilson" and floor["interval"]["low"] == pytest.approx(reference.low)
    assert by_name["cost: tokens per episode up at most 25%"]["value"] == 0.0
    assert by_name["money: at most $0.01 per episode"]["value"] == pytest.approx((100 * 0.5 + 20 * 1.5) / 1e6)
    latency = by_name["latency: p95 wall time at most 120 s"]
    assert latency["passed"] and 0 < latency["value"] < 120
    safety = by_name["safety: no violation on SQL"]
    assert safety["passed"] and safety["value"] == 0.0 and safety["slice"] == f"env={SQL}"
    _every_verdict_prints_its_interval(output, data)

    # The other way round: the focus env lost everything, so the gain, the protected
    # Arithmetic slice and the floor (24 of 36 tasks) block; Fractions, SQL, safety and the
    # costs pass.
    code, output, data = _production(cand, base, tmp_path / "down.json")
    assert code == 1 and data["decision"] == "block", output
    failed = {g["name"] for g in data["gates"] if not g["passed"]}
    assert failed == {
        "focus: Arithmetic gains at least 5 points",
        f"protected: no env regresses by more than 2 points [{ARITHMETIC}]",
        "floor: pass@1 at least 60% with confidence",
    }
    _every_verdict_prints_its_interval(output, data)


def _every_verdict_prints_its_interval(output: str, data: dict[str, Any]) -> None:
    """One table line per verdict, each with its interval beside the verdict: ``[low, high]
    method`` for a significant gate (the JSON's), ``point`` for a point-estimate one."""
    lines = [line for line in output.splitlines() if _VERDICT_LINE.search(line)]
    assert len(lines) == len(data["gates"]), output
    for line, gate in zip(lines, data["gates"], strict=True):
        if gate["significant"]:
            match = _INTERVAL.search(line)
            assert match is not None and gate["interval"] is not None, line
            low, high = gate["interval"]["low"], gate["interval"]["high"]
            sign = "+" if gate["kind"] in ("regression", "gain") else ""
            assert f"[{low:{sign}.3f}, {high:{sign}.3f}] {gate['interval']['method']}" in line
        else:
            assert gate["interval"] is None and re.search(r"│ point\s+│", line), line
