"""Refusal and abstention in a card's views: ``no_answer_rate`` (the share of graded episodes
labelled ``no_answer``) and ``selective_accuracy`` (the pass rate of the others), each with
its Wilson interval, per slice and rule; order-independent like every view; on hand-made
records, on real cards (the oracle, an agent that abstains on some episodes, one that never
answers), and on a card written before the views had them (shown as unknown)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from frostgym.agents import OracleAgent
from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.cards.summary import UNKNOWN, views_table
from frostgym.cards.views import NO_ANSWER, ViewsBuilder, compute_views, normalise_ks, task_entry, task_record
from frostgym.core.episode import COUNTED_AS, DropClass, Head, RecordHead
from frostgym.core.stats import wilson_interval
from tests.report_cards import make_card

FAIL, EXCL = "errors_as_failures", "errors_excluded"
ABSTAIN = "I do not know."


def _grade(passed: bool, label: str | None) -> dict[str, Any]:
    return {
        "score": float(passed),
        "components": {"correct": float(passed)},
        "weights": {"correct": 1.0},
        "required": ["correct"],
        "grader": "hand",
        "grader_version": "1",
        "label": label,
    }


def _episode(env: str, task: str, sample: int, grade: dict[str, Any] | None, **head: Any) -> Head:
    data = {
        "plan_id": f"{env}:{task}:{sample}",
        "env_id": env,
        "task_id": task,
        "sample": sample,
        "difficulty": head.get("difficulty"),
        "tags": head.get("tags", []),
        "reward": 0.0 if grade is None else grade["score"],
        "grade": grade,
    }
    return RecordHead.from_json(data, "episode")


def _drop(env: str, task: str, sample: int, drop_class: DropClass) -> Head:
    data = {
        "plan_id": f"{env}:{task}:{sample}",
        "env_id": env,
        "task_id": task,
        "sample": sample,
        "difficulty": None,
        "tags": [],
        "drop_class": drop_class,
        "counted_as": COUNTED_AS[drop_class],
        "stage": "runner",
        "error": "hand-made",
    }
    return RecordHead.from_json(data, "drop")


PASS, WRONG, NONE = _grade(True, None), _grade(False, "wrong_answer"), _grade(False, NO_ANSWER)
# a/t1 (hard, [x]): pass, no_answer, wrong, agent_error drop (failure)  -> graded 3, no answer 1, answered 2 (1 pass)
# a/t2 (easy, [x]): no_answer, no_answer, skipped drop (excluded)       -> graded 2, no answer 2, answered 0
# b/t3 (easy):      pass, pass, completed without a grade               -> graded 2, no answer 0, answered 2 (2 pass)
HEADS = [
    _episode("a", "t1", 0, PASS, difficulty="hard", tags=["x"]),
    _episode("a", "t1", 1, NONE, difficulty="hard", tags=["x"]),
    _episode("a", "t1", 2, WRONG, difficulty="hard", tags=["x"]),
    _drop("a", "t1", 3, "agent_error"),
    _episode("a", "t2", 0, NONE, difficulty="easy", tags=["x"]),
    _episode("a", "t2", 1, NONE, difficulty="easy", tags=["x"]),
    _drop("a", "t2", 2, "skipped"),
    _episode("b", "t3", 0, PASS, difficulty="easy"),
    _episode("b", "t3", 1, PASS, difficulty="easy"),
    _episode("b", "t3", 2, None, difficulty="easy"),
]


def _expected(no_answer: int, graded: int, passed: int) -> dict[str, Any]:
    answered = graded - no_answer
    rate, accuracy = wilson_interval(no_answer, graded), wilson_interval(passed, answered)
    return {
        "no_answer_rate": {
            "value": no_answer / graded if graded else None,
            "ci_low": rate.low if rate else None,
            "ci_high": rate.high if rate else None,
            "no_answer": no_answer,
            "graded": graded,
        },
        "selective_accuracy": {
            "value": passed / answered if answered else None,
            "ci_low": accuracy.low if accuracy else None,
            "ci_high": accuracy.high if accuracy else None,
            "passed": passed,
            "answered": answered,
        },
    }


def _of(metrics: dict[str, Any]) -> dict[str, Any]:
    return {name: metrics[name] for name in ("no_answer_rate", "selective_accuracy")}


def test_each_slice_counts_graded_episodes_only_the_same_under_both_rules() -> None:
    views = compute_views(HEADS, [1])
    for rule in (FAIL, EXCL):  # drops have no grade: neither rule counts them here
        assert _of(views["overall"][rule]) == _expected(no_answer=3, graded=7, passed=3)
        assert _of(views["by_env"]["a"][rule]) == _expected(no_answer=3, graded=5, passed=1)
        assert _of(views["by_env"]["b"][rule]) == _expected(no_answer=0, graded=2, passed=2)
        assert _of(views["by_difficulty"]["easy"][rule]) == _expected(no_answer=2, graded=4, passed=2)
        assert _of(views["by_difficulty"]["hard"][rule]) == _expected(no_answer=1, graded=3, passed=1)
        assert _of(views["by_tag"]["x"][rule]) == _expected(no_answer=3, graded=5, passed=1)
    # plain pass@1 (errors_as_failures) counts the failure drop and the ungraded episode: 3 of 9 samples
    assert views["overall"][FAIL]["pass@k"]["1"]["value"] == pytest.approx((1 / 4 + 0 / 2 + 2 / 3) / 3)
    assert "no_answer" in views["definitions"]["no_answer_rate"]
    assert "Wilson" in views["definitions"]["selective_accuracy"]
    assert json.loads(json.dumps(views)) == views


def test_all_abstained_has_no_selective_accuracy_and_nothing_graded_has_no_rate() -> None:
    abstained = compute_views([_episode("a", "t", i, NONE) for i in range(3)], [1])["overall"][FAIL]
    assert abstained["no_answer_rate"]["value"] == 1.0 and abstained["no_answer_rate"]["ci_high"] == 1.0
    assert abstained["selective_accuracy"] == {
        "value": None,
        "ci_low": None,
        "ci_high": None,
        "passed": 0,
        "answered": 0,
    }
    ungraded = compute_views([_episode("a", "t", 0, None), _drop("a", "t", 1, "agent_error")], [1])["overall"][FAIL]
    assert _of(ungraded) == _expected(0, 0, 0)
    assert _of(compute_views([], [1])["overall"][FAIL]) == _expected(0, 0, 0)


def test_the_views_do_not_depend_on_the_order_tasks_are_added() -> None:
    ks = normalise_ks([1, 2])
    by_task: dict[tuple[str, str], list[Any]] = {}
    for head in HEADS:
        by_task.setdefault((head.env_id, head.task_id), []).append(task_record(head))
    entries = [(key, task_entry(key, records, ks)) for key, records in by_task.items()]
    expected = compute_views(HEADS, ks)
    rng = random.Random(5)
    for _ in range(5):
        rng.shuffle(entries)
        builder = ViewsBuilder(ks)
        for key, entry in entries:
            builder.add(key, entry)
        assert builder.views() == expected
    shuffled = list(HEADS)
    rng.shuffle(shuffled)
    assert compute_views(shuffled, ks) == expected


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (1, 7), (37, 120), (999, 1000)])
def test_the_intervals_are_scipys_wilson(k: int, n: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    expected = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    heads = [_episode("a", f"t{i}", 0, NONE if i < k else PASS) for i in range(n)]
    rate = compute_views(heads, [1])["overall"][FAIL]["no_answer_rate"]
    assert rate["value"] == pytest.approx(k / n)
    assert rate["ci_low"] == pytest.approx(expected.low, abs=1e-9)
    assert rate["ci_high"] == pytest.approx(expected.high, abs=1e-9)


# -- real cards --------------------------------------------------------------------------


class AbstainingAgent:
    """The oracle on the episodes whose id is a multiple of ``answers_every`` (None: none),
    "I do not know." on the others: graded no_answer."""

    name = "abstaining"

    def __init__(self, answers_every: int | None) -> None:
        self.answers_every = answers_every

    def _answers(self, request: AgentRequest) -> bool:
        return self.answers_every is not None and int(request.episode_id, 16) % self.answers_every == 0

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = OracleAgent().act(requests)
        return [
            reply if self._answers(request) else AgentReply(ABSTAIN)
            for request, reply in zip(requests, replies, strict=True)
        ]

    def describe(self) -> dict[str, Any]:
        return {"spec": f"abstaining-{self.answers_every}"}


@pytest.fixture(scope="module")
def cards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("no_answer_cards")
    envs = ["frostgym/Arithmetic-v0"]
    return {
        "oracle": make_card(root / "oracle", OracleAgent(), envs, episodes=6),
        "abstaining": make_card(root / "abstaining", AbstainingAgent(answers_every=2), envs, episodes=6),
        "junk": make_card(root / "junk", AbstainingAgent(answers_every=None), envs, episodes=6),
    }


def _card(directory: Path) -> dict[str, Any]:
    card: dict[str, Any] = json.loads((directory / "card.json").read_text())
    return card


def test_real_cards_record_both_views_and_the_schema_takes_them(cards: dict[str, Path]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from frostgym.cards.schema import SCHEMAS

    oracle = _card(cards["oracle"])["views"]["overall"][FAIL]
    assert oracle["no_answer_rate"]["value"] == 0.0 and oracle["no_answer_rate"]["graded"] == 12
    assert oracle["selective_accuracy"]["value"] == 1.0

    junk = _card(cards["junk"])["views"]["by_env"]["frostgym/Arithmetic-v0"][EXCL]
    assert junk["no_answer_rate"]["value"] == 1.0 and junk["selective_accuracy"]["value"] is None

    abstaining = _card(cards["abstaining"])["views"]["overall"][FAIL]
    rate, accuracy = abstaining["no_answer_rate"], abstaining["selective_accuracy"]
    assert 0 < rate["no_answer"] < rate["graded"] == 12
    assert accuracy == {**accuracy, "value": 1.0, "passed": 12 - rate["no_answer"]}  # it answers only right
    assert abstaining["pass@k"]["1"]["value"] < 1.0  # while plain accuracy counts each abstention as a miss
    for directory in cards.values():
        jsonschema.validate(_card(directory), SCHEMAS["card"])


def test_summary_shows_them_and_unknown_on_a_card_written_before_them(cards: dict[str, Path], tmp_path: Path) -> None:
    from frostgym.cards.schema import SCHEMAS

    card = _card(cards["abstaining"])
    rendered = _render(views_table(card))
    assert "no answer" in rendered and "selective acc" in rendered
    rate = card["views"]["overall"][FAIL]["no_answer_rate"]["value"]
    assert f"{rate:.3f}" in rendered

    old = json.loads(json.dumps(card))
    for by_rule in [
        old["views"]["overall"],
        *(v for s in ("by_env", "by_difficulty", "by_tag") for v in old["views"][s].values()),
    ]:
        for metrics in by_rule.values():
            del metrics["no_answer_rate"], metrics["selective_accuracy"]
    rows = [row for row in _render(views_table(old)).splitlines() if "errors_" in row]
    assert rows and all(row.count(UNKNOWN) == 2 for row in rows)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(old, SCHEMAS["card"])  # the views stay optional: older cards still validate


def _render(table: Any) -> str:
    console = Console(width=250, record=True)
    console.print(table)
    return console.export_text()
