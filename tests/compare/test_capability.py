"""Capability or compression (``frostgym.compare.capability``): both pass@k curves with the
paired interval at each k, where they cross, the reach sets and the verdict.

The cards are synthetic cards of a real plan (Arithmetic-v0, 21 tasks): a policy answers with
the oracle on an episode when a hash of its episode id falls below its pass rate for the task's
group (two groups of tasks by a hash of the prompt), else with the random agent's junk. The
same hash on both sides makes the passes nested: a higher rate passes every episode a lower
one passes, and more. So each case is built to be what it is:

- compressed: the candidate passes more samples only on the tasks the base already sometimes
  solved (0.3 -> 0.8 on one group, 0 on the other on both sides);
- expanded: the candidate solves the other group, which the base never did, at 0.25, and
  gives up as much on the first (0.5 -> 0.25): pass@1 flat, reach up;
- both: 0.3 -> 0.8 on the first group, 0 -> 0.5 on the second;
- neither: the base's rates, other samples (another hash).

The intervals are the comparison's own paired bootstrap (nothing is resampled again), so they
are checked against the comparison's pass@k rows, not against scipy.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from frostgym.agents import AgentReply, AgentRequest, OracleAgent, RandomAgent
from frostgym.cli import app
from frostgym.compare.capability import Capability, crossing, judge_capability
from frostgym.compare.compare import Comparison, compare_cards
from frostgym.compare.gates import parse_gates
from frostgym.compare.views import ViewDelta
from frostgym.core.grade import passes
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.report.build import write_report
from frostgym.run.runner import RunOptions

ARITHMETIC = "frostgym/Arithmetic-v0"
TASKS, SAMPLES = 21, 64
GRPO = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "grpo-l1"


class _Rates:
    """The oracle where a hash of the episode id falls below the rate of the task's group."""

    name = "rates"

    def __init__(self, rates: tuple[float, float], salt: str = "a") -> None:
        self.rates, self.salt = rates, salt

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        good, bad = OracleAgent().act(requests), RandomAgent(seed=2).act(requests)
        out = []
        for request, right, wrong in zip(requests, good, bad, strict=True):
            prompt = json.dumps(request.observation, sort_keys=True, default=str)
            rate = self.rates[zlib.crc32(prompt.encode()) % 2]
            draw = zlib.crc32((self.salt + request.episode_id).encode()) % 10_000 / 10_000
            out.append(right if draw < rate else wrong)
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": f"rates-{self.rates[0]}-{self.rates[1]}-{self.salt}"}


def _card(out: Path, agent: _Rates, samples: int = SAMPLES) -> Path:
    options = RunOptions(split="test", batch_size=64, retries=0)
    config = card_config(
        env_ids=[ARITHMETIC], agent_spec=agent.describe()["spec"], sampling={}, episodes=TASKS, samples=samples,
        seed=5, options=options,
    )  # fmt: skip
    run_to_card(out, agent, config, options)
    return out


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("capability")
    rates: dict[str, tuple[tuple[float, float], str]] = {
        "base": ((0.3, 0.0), "a"),
        "compressed": ((0.8, 0.0), "a"),
        "expanded_base": ((0.5, 0.0), "a"),
        "expanded": ((0.25, 0.25), "a"),
        "both": ((0.8, 0.5), "a"),
        "neither": ((0.3, 0.0), "b"),
    }
    return {name: _card(root / name, _Rates(*spec)) for name, spec in rates.items()}


PAIRS = {
    "compressed": ("base", "compressed"),
    "expanded": ("expanded_base", "expanded"),
    "both": ("base", "both"),
    "neither": ("base", "neither"),
}


def _capability(comparison: Comparison) -> Capability:
    assert comparison.capability is not None
    return comparison.capability


def _passed(card: Path) -> dict[str, set[str]]:
    """Per task id, the plan ids of the card's passing episodes (every task is a key)."""
    out: dict[str, set[str]] = {}
    for line in (card / "episodes.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        passed = out.setdefault(record["task_id"], set())
        if record["grade"] is not None and passes(record["grade"]):
            passed.add(record["plan_id"])
    return out


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_each_synthetic_case_gets_its_verdict(cards: dict[str, Path], case: str) -> None:
    base, cand = PAIRS[case]
    found = _capability(compare_cards(cards[base], cards[cand]))
    assert found.verdict == case, found.reason
    assert found.k_max == SAMPLES and found.tasks == TASKS
    assert found.reason.startswith("pass@1 ") and f"pass@{SAMPLES} " in found.reason


def test_the_cases_are_what_they_claim(cards: dict[str, Path]) -> None:
    base, compressed, expanded_base = (_passed(cards[n]) for n in ("base", "compressed", "expanded_base"))
    expanded, both = _passed(cards["expanded"]), _passed(cards["both"])
    never = {task for task, passed in base.items() if not passed}
    assert 4 <= len(never) <= TASKS - 4  # two groups of tasks, each of a few tasks
    for task, passed in base.items():
        assert passed <= compressed[task] and passed <= both[task]  # nested: more samples pass, none fewer
        assert (not compressed[task]) == (task in never)  # compressed: only the tasks the base solved
        assert bool(both[task]) and bool(expanded[task])  # both, expanded: every task, the new ones too
        assert (not expanded_base[task]) == (task in never)
    assert sum(map(len, compressed.values())) > sum(map(len, base.values()))


def test_the_curves_are_the_comparisons_pass_at_k_rows(cards: dict[str, Path]) -> None:
    comparison = compare_cards(cards["base"], cards["compressed"])
    found = _capability(comparison)
    assert [v.view for v in found.curve] == [f"pass@{k}" for k in comparison.ks]
    for v in found.curve:
        assert v == comparison.view(v.view)  # the same row: the same paired bootstrap interval
        assert v.ci_low is not None and v.ci_high is not None and v.ci_low <= (v.delta or 0.0) <= v.ci_high
    assert found.curve[0].ci_low is not None and found.curve[0].ci_low > 0
    assert found.curve[-1].delta == 0.0  # pass@n is the share of tasks reached: the same on both sides
    again = compare_cards(cards["base"], cards["compressed"])
    assert json.dumps(again.to_json()) == json.dumps(comparison.to_json())


def test_compression_crosses_where_the_curves_meet(cards: dict[str, Path]) -> None:
    found = _capability(compare_cards(cards["base"], cards["compressed"]))
    deltas = {int(v.view[5:]): v.delta for v in found.curve}
    assert found.crossing is not None
    assert deltas[found.crossing] == 0.0
    assert all(d is not None and d > 0 for k, d in deltas.items() if k < found.crossing)
    assert found.cand_only == () and found.base_only == ()
    assert found.base_reached == found.cand_reached


def test_reach_sets_name_the_tasks_and_their_passing_episodes(cards: dict[str, Path]) -> None:
    comparison = compare_cards(cards["expanded_base"], cards["expanded"])
    found = _capability(comparison)
    base, cand = _passed(cards["expanded_base"]), _passed(cards["expanded"])
    assert {t.task_id for t in found.cand_only} == {task for task in cand if cand[task] and not base[task]}
    assert found.base_only == ()
    for task in found.cand_only:
        assert task.env_id == ARITHMETIC and task.passed == len(cand[task.task_id])
        assert set(task.episodes) <= cand[task.task_id] and len(task.episodes) == min(task.passed, 16)
    data = comparison.to_json()["capability"]
    assert data["verdict"] == "expanded" and data["crossing"] == found.crossing
    reach = data["reach"]
    assert reach["cand"] == TASKS and reach["base"] == TASKS - len(found.cand_only)
    assert [t["task_id"] for t in reach["cand_only"]] == [t.task_id for t in found.cand_only]
    assert reach["cand_only"][0]["episodes"] == list(found.cand_only[0].episodes)
    ceiling = data["curve"][-1]
    assert ceiling["k"] == SAMPLES and ceiling["delta"] == pytest.approx(len(found.cand_only) / TASKS)


def _compare(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["compare", *args])
    return result.exit_code, result.output


def test_the_command_prints_compressed_with_the_crossing_and_expanded(cards: dict[str, Path]) -> None:
    code, output = _compare(str(cards["base"]), str(cards["compressed"]))
    found = _capability(compare_cards(cards["base"], cards["compressed"]))
    assert code == 0
    line = next(line for line in output.splitlines() if line.startswith("capability: "))
    assert line.startswith("capability: compressed: pass@1 +")
    assert f"the curves cross at k = {found.crossing}" in line
    assert "Capability or compression: pass@k curves" in output and "verdict: compressed" in output
    code, output = _compare(str(cards["expanded_base"]), str(cards["expanded"]))
    assert code == 0 and "capability: expanded: " in output


def test_the_issues_shape_at_256_samples(tmp_path: Path) -> None:
    """21 tasks x 256 samples, the candidate only compresses search: pass@1 up beyond noise,
    pass@k flat from some k on, no task reached by one side only."""
    base = _card(tmp_path / "base", _Rates((0.3, 0.0)), samples=256)
    cand = _card(tmp_path / "cand", _Rates((0.8, 0.0)), samples=256)
    found = _capability(compare_cards(base, cand))
    assert found.verdict == "compressed" and found.k_max == 256
    assert found.crossing is not None and found.crossing <= 256
    assert all(v.delta == 0.0 for v in found.curve if int(v.view[5:]) >= found.crossing)
    assert found.cand_only == () and found.base_only == ()


def test_a_ceiling_gate_reads_pass_at_the_largest_k(cards: dict[str, Path]) -> None:
    gate = {"name": "ceiling holds", "metric": "pass@max", "max_drop": 0.0, "significant": True}
    kept = compare_cards(cards["base"], cards["compressed"], parse_gates({"gate": [gate]}))
    assert kept.decision == "promote"
    assert kept.measure("pass@max", "overall", "", "errors_as_failures") == kept.measure(
        f"pass@{SAMPLES}", "overall", "", "errors_as_failures"
    )
    # The expanded card as the base: the candidate loses every task only the expanded one reached.
    lost = compare_cards(cards["expanded"], cards["expanded_base"], parse_gates({"gate": [gate]}))
    assert lost.decision == "block"
    (result,) = lost.gates
    ceiling = lost.view(f"pass@{SAMPLES}")
    assert ceiling is not None and ceiling.ci_high is not None and ceiling.ci_high < 0
    assert result.value == ceiling.delta and result.interval == (ceiling.ci_low, ceiling.ci_high)
    per_env = parse_gates({"gate": [{"metric": "pass@max", "per": "env", "min": 0.5, "significant": True}]})
    (own,) = compare_cards(cards["base"], cards["compressed"], per_env).gates
    assert own.interval is not None and own.interval_method is not None  # the candidate's own interval


def test_the_committed_grpo_cards_are_compressed() -> None:
    """The GRPO example (benchmarks/results/grpo-l1): pass@1 0.244 -> 0.649 beyond noise,
    pass@8 0.714 -> 0.810 within it; the candidate reaches 3 tasks the base never solved in 8
    samples and the base 1 the candidate never did."""
    comparison = compare_cards(GRPO / "before", GRPO / "after")
    found = _capability(comparison)
    assert found.verdict == "compressed" and found.k_max == 8 and found.crossing is None
    pass1, ceiling = found.curve[0], found.curve[-1]
    assert (round(pass1.base or 0, 3), round(pass1.cand or 0, 3)) == (0.244, 0.649)
    assert (round(ceiling.base or 0, 3), round(ceiling.cand or 0, 3)) == (0.714, 0.81)
    assert ceiling.ci_low is not None and ceiling.ci_low < 0
    assert (found.tasks, found.base_reached, found.cand_reached) == (21, 15, 17)
    assert (len(found.cand_only), len(found.base_only)) == (3, 1)


def test_one_sample_per_task_has_no_verdict(tmp_path: Path) -> None:
    base = _card(tmp_path / "base", _Rates((0.3, 0.0)), samples=1)
    cand = _card(tmp_path / "cand", _Rates((0.8, 0.0)), samples=1)
    comparison = compare_cards(base, cand)
    assert comparison.capability is None and comparison.to_json()["capability"] is None
    code, output = _compare(str(base), str(cand))
    assert code == 0 and "capability: no verdict: one sample per task" in output
    gates = parse_gates({"gate": [{"metric": "pass@max", "max_drop": 0.0}]})
    pass1 = comparison.view("pass@1")
    assert pass1 is not None and compare_cards(base, cand, gates).gates[0].value == pass1.delta


def test_the_report_shows_the_verdict(cards: dict[str, Path], tmp_path: Path) -> None:
    page = write_report([cards["base"], cards["compressed"]], tmp_path / "report").read_text(encoding="utf-8")
    assert 'Verdict: <strong class="verdict verdict-compressed">compressed</strong>' in page
    assert "</strong></p><p>pass@1 +" in page  # the reason, with its numbers, beside the verdict


def _row(k: int, delta: float | None, low: float | None = None, *, too_small: bool = False) -> ViewDelta:
    high = None if low is None else low + 0.2
    return ViewDelta("overall", "", f"pass@{k}", "errors_as_failures", 0.5, 0.5, delta, low, high, None, 20, too_small)


def test_crossing_either_way_and_none() -> None:
    assert crossing([_row(1, 0.2), _row(2, 0.1), _row(4, -0.05), _row(8, -0.1)]) == 4
    assert crossing([_row(1, -0.2), _row(2, -0.1), _row(4, 0.0)]) == 4  # the reverse: at or above
    assert crossing([_row(1, 0.2), _row(2, 0.1)]) is None
    assert crossing([_row(1, 0.0), _row(2, -0.1)]) is None  # no side above at k = 1
    assert crossing([_row(1, None), _row(2, -0.1)]) is None


def test_the_rule_on_intervals() -> None:
    up, flat, down = _row(1, 0.3, 0.1), _row(8, 0.0, -0.1), _row(8, -0.3, -0.4)
    assert judge_capability(up, flat) == "compressed"
    assert judge_capability(up, down) == "compressed"  # the ceiling fell: compressed all the same
    assert judge_capability(flat, _row(8, 0.3, 0.1)) == "expanded"
    assert judge_capability(up, _row(8, 0.3, 0.1)) == "both"
    assert judge_capability(flat, flat) == "neither"
    assert judge_capability(flat, down) == "neither"
    assert judge_capability(_row(1, 0.3, 0.1, too_small=True), flat) == "neither"  # too few tasks: no claim
    assert judge_capability(_row(1, 0.3, 0.0), flat) == "neither"  # a lower bound at 0 is not above 0
