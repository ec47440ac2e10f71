"""``frostgym judge`` and ``frostgym judge-agreement`` end to end, with an agreement known in
advance: a real card of frostgym/Arithmetic-v0 (the oracle's answer on some episodes, a wrong
one on the others), labels from frostgym's own grader on the same replies (episode passed), and
a judge served by ``tests.chat_server`` that says "correct" exactly when the rule grader passed
the reply, except on a known set of episodes where it says the opposite, and on one where its
verdict is not JSON (a ``grader_error`` drop)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from frostgym.agents import OracleAgent
from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.cards.card import load_card
from frostgym.cli import main
from frostgym.compare.agreement import Confusion, accuracy, cohen_kappa
from frostgym.core.grade import passes
from frostgym.evaluate.judge import question_of
from tests.chat_server import Answer, ChatServer
from tests.report_cards import make_card

RUBRIC = """name = "arithmetic"
threshold = 0.75

[[criteria]]
name = "correct"
description = "The final answer inside <answer></answer> is the value of the expression."
weight = 3

[[criteria]]
name = "concise"
description = "The reply gives the answer and nothing else."
weight = 1
"""
EPISODES = 20
#: What the test establishes. The card (seed 3) has 9 episodes the rule grader passes and 11 it
#: fails; the judge flips 2 passes and 1 fail and gives no verdict on 1 pass, so the table is
#: 6 both pass, 2 label only, 1 judge only, 10 both fail (n = 19): accuracy 16/19, and kappa
#: (p_o - p_e) / (1 - p_e) with p_o = 16/19, p_e = (8 * 7 + 11 * 12) / 19**2 = 188/361, so 116/173.
ACCURACY, KAPPA = 0.842105263158, 0.670520231214


class HalfRightAgent:
    """The oracle's reply on episodes whose id is even, a wrong answer on the others."""

    name = "half-right"

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        right = OracleAgent().act(requests)
        return [
            reply if int(request.episode_id, 16) % 2 == 0 else AgentReply("<answer>-1.5</answer>")
            for request, reply in zip(requests, right, strict=True)
        ]

    def describe(self) -> dict[str, Any]:
        return {"spec": "half-right"}


def frostgym(*args: object) -> int:
    """``frostgym ARGS`` through its console entry point in this process: its exit code (what
    it prints, a test reads with ``capfd``)."""
    argv = sys.argv
    sys.argv = ["frostgym", *map(str, args)]
    try:
        with pytest.raises(SystemExit) as exited:
            main()
    finally:
        sys.argv = argv
    code = exited.value.code
    return code if isinstance(code, int) else 1


@dataclass
class Judged:
    source: Path
    judged: Path
    labels: Path
    cache: Path
    rubric: Path
    flipped: set[str]
    broken: str
    expected: Confusion
    requests: int


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    root = tmp_path_factory.mktemp("judge")
    source = make_card(root / "source", HalfRightAgent(), ["frostgym/Arithmetic-v0"], EPISODES, samples=1)
    _, episodes, drops = load_card(source)
    assert len(episodes) == EPISODES and not drops
    label = {e.episode_id: passes(e.grade or {}) for e in episodes}
    question = {e.episode_id: question_of(e.observation) for e in episodes}
    passing = sorted(i for i, ok in label.items() if ok)
    failing = sorted(i for i, ok in label.items() if not ok)
    assert (len(passing), len(failing)) == (9, 11)
    flipped = {passing[0], passing[1], failing[0]}  # the judge gets these wrong
    broken = passing[-1]  # the judge's verdict on this one is not JSON
    verdict_of = {question[i]: label[i] != (i in flipped) for i in label}
    broken_question = question[broken]

    def respond(body: dict[str, Any]) -> Answer:
        prompt = body["messages"][-1]["content"]
        asked = _between(prompt, "Question:\n<<<\n", "\n>>>")
        text = (
            "I would say it is correct."
            if asked == broken_question
            else json.dumps({"correct": "yes" if verdict_of[asked] else "no", "concise": "no"})
        )
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}, {}

    labels = root / "labels.jsonl"
    labels.write_text("".join(json.dumps({"episode_id": i, "label": ok}) + "\n" for i, ok in sorted(label.items())))
    rubric = root / "rubric.toml"
    rubric.write_text(RUBRIC)
    cache = root / "judge_cache.jsonl"
    with ChatServer(respond=respond) as server:
        code = frostgym(
            "judge", source, "--rubric", rubric, "--model", f"openai:{server.base_url}#judge",
            "--cache", cache, "--mode", "record", "--out", root / "judged",
        )  # fmt: skip
        assert code == 0
        requests = len(server.bodies)
    p, f = len(passing), len(failing)
    # label pass: 2 flipped, 1 dropped, the rest agree; label fail: 1 flipped, the rest agree
    expected = Confusion(both_pass=p - 3, label_only=2, judge_only=1, both_fail=f - 1)
    return Judged(source, root / "judged", labels, cache, rubric, flipped, broken, expected, requests)


def test_the_judged_card_holds_the_judges_grades_and_its_drops(judged: Judged) -> None:
    card, episodes, drops = load_card(judged.judged)
    assert judged.requests == EPISODES
    assert {e.grade["grader"] for e in episodes if e.grade} == {"llm_judge"}
    assert [(d.episode_id, d.drop.drop_class, d.drop.stage) for d in drops] == [
        (judged.broken, "grader_error", "grade")
    ]
    assert "does not parse" in drops[0].drop.error
    assert card["graders"] == {"llm_judge": ["1.0.0"]}
    for episode in episodes:
        grade = episode.grade
        assert grade is not None and episode.reward == grade["score"]
        assert grade["details"]["judge_reply"] and grade["details"]["judge_model"] == {
            "spec": "openai",
            "model": "judge",
        }
        assert grade["details"]["answer_key"] is not None  # the math grader's reading, for maj@k
    report = json.loads((judged.judged / "judge.json").read_text())
    assert report["judged"] == EPISODES - 1 and report["drops"] == {"grader_error": 1}
    assert report["judge_replies"] == {"live": EPISODES - 1}


def test_a_replay_of_the_judge_gives_the_same_card_without_the_server(judged: Judged, tmp_path: Path) -> None:
    code = frostgym(
        "judge", judged.source, "--rubric", judged.rubric, "--model", "openai:http://127.0.0.1:9/v1#judge",
        "--cache", judged.cache, "--mode", "replay", "--out", tmp_path / "again",
    )  # fmt: skip
    assert code == 0  # nothing listens on port 9: every verdict came from the cache
    _, before, dropped_before = load_card(judged.judged)
    _, after, dropped_after = load_card(tmp_path / "again")
    assert [(e.episode_id, e.grade and e.grade["components"]) for e in after] == [
        (e.episode_id, e.grade and e.grade["components"]) for e in before
    ]
    # the unparseable verdict was cached too: replayed, it is the same grader_error
    assert [(d.episode_id, d.drop.drop_class) for d in dropped_after] == [
        (d.episode_id, d.drop.drop_class) for d in dropped_before
    ]


def test_the_agreement_is_the_one_known_in_advance(judged: Judged, capfd: pytest.CaptureFixture[str]) -> None:
    table = judged.expected
    assert accuracy(table) == ACCURACY and cohen_kappa(table) == KAPPA
    # by hand: p_o = (tp + tn) / n, p_e from the marginals
    n = table.n
    p_o = (table.both_pass + table.both_fail) / n
    p_label, p_judge = (table.both_pass + table.label_only) / n, (table.both_pass + table.judge_only) / n
    p_e = p_label * p_judge + (1 - p_label) * (1 - p_judge)
    assert pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-12) == KAPPA

    code = frostgym("judge-agreement", judged.labels, judged.judged, "--json", "--seed", "4")
    out = capfd.readouterr().out
    assert code == 0
    report = json.loads(out)
    assert report["labels"] == EPISODES and report["n"] == EPISODES - 1
    assert report["accuracy"]["value"] == ACCURACY and report["kappa"]["value"] == KAPPA
    assert report["confusion"] == {
        "label_pass_judge_pass": table.both_pass,
        "label_pass_judge_fail": table.label_only,
        "label_fail_judge_pass": table.judge_only,
        "label_fail_judge_fail": table.both_fail,
    }
    assert report["accuracy"]["low"] <= ACCURACY <= report["accuracy"]["high"] <= 1.0
    assert -1.0 <= report["kappa"]["low"] <= KAPPA <= report["kappa"]["high"] <= 1.0
    assert [(d["episode_id"], d["drop_class"]) for d in report["dropped"]] == [(judged.broken, "grader_error")]

    code = frostgym("judge-agreement", judged.labels, judged.judged, "--seed", "4")
    text = capfd.readouterr().out
    assert code == 0
    assert f"accuracy  {ACCURACY:.3f}  95% CI [{report['accuracy']['low']:.3f}" in text
    assert f"kappa     {KAPPA:.3f}  95% CI [{report['kappa']['low']:.3f}" in text
    assert f"{EPISODES} labels: {EPISODES - 1} judged, 1 without a verdict" in text and judged.broken in text
    # the same seed, the same intervals
    frostgym("judge-agreement", judged.labels, judged.judged, "--json", "--seed", "4")
    assert json.loads(capfd.readouterr().out) == report


def test_labels_by_task_id_match_the_same_episodes(judged: Judged, tmp_path: Path, capfd: Any) -> None:
    _, episodes, _ = load_card(judged.source)
    labels = tmp_path / "by_task.jsonl"
    labels.write_text(
        "".join(json.dumps({"task_id": e.task_id, "label": passes(e.grade or {})}) + "\n" for e in episodes)
    )
    code = frostgym("judge-agreement", labels, judged.judged, "--json")
    assert code == 0
    report = json.loads(capfd.readouterr().out)
    assert (report["accuracy"]["value"], report["kappa"]["value"]) == (ACCURACY, KAPPA)


def _lines(rows: list[Any]) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


@pytest.mark.parametrize(
    ("labels", "why"),
    [
        (None, "cannot read the labels"),
        (["{not json"], ":1: not JSON"),
        ([{"episode_id": "EP", "label": True}, {"episode_id": "EP", "label": False}], ":2: labels an episode line 1"),
        ([{"episode_id": "0123456789abcdef", "label": True}], "is not in the card"),
        ([{"episode_id": "EP", "label": "yes"}], "true or false"),
        ([{"episode_id": "EP", "task_id": "T", "label": True}], "one string episode_id or task_id"),
        ([], "no labels"),
    ],
)
def test_bad_labels_stop_with_one_line(
    judged: Judged, tmp_path: Path, capfd: Any, labels: list[Any] | None, why: str
) -> None:
    _, episodes, _ = load_card(judged.judged)
    path = tmp_path / "labels.jsonl"
    if labels is not None:
        path.write_text(_lines(labels).replace('"EP"', json.dumps(episodes[0].episode_id)))
    code = frostgym("judge-agreement", path, judged.judged)
    err = capfd.readouterr().err
    assert code == 2 and why in err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_card_with_no_judge_grades_stops_with_one_line(judged: Judged, capfd: Any) -> None:
    code = frostgym("judge-agreement", judged.labels, judged.source)
    err = capfd.readouterr().err
    assert code == 2 and "no judge grades" in err and err.count("\n") == 1


def test_a_bad_rubric_and_a_replay_without_a_cache_stop_with_one_line(
    judged: Judged, tmp_path: Path, capfd: Any
) -> None:
    rubric = tmp_path / "bad.toml"
    rubric.write_text('name = "x"\n')
    code = frostgym(
        "judge", judged.source, "--rubric", rubric, "--model", "openai:http://127.0.0.1:9/v1#j", "--out", tmp_path / "o"
    )
    err = capfd.readouterr().err
    assert code == 2 and "'criteria' must be a list" in err and err.count("\n") == 1
    code = frostgym(
        "judge", judged.source, "--rubric", judged.rubric, "--model", "openai:http://127.0.0.1:9/v1#j",
        "--mode", "replay", "--out", tmp_path / "o",
    )  # fmt: skip
    err = capfd.readouterr().err
    assert code == 2 and "--cache" in err and not (tmp_path / "o").exists()


# -- the statistics against references ----------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "kappa"),
    [
        # Wikipedia, "Cohen's kappa", worked example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no
        (Confusion(both_pass=20, label_only=5, judge_only=10, both_fail=15), 0.4),
        # the same page, "same agreement, different kappa": both 60% agreement
        (Confusion(both_pass=45, label_only=15, judge_only=25, both_fail=15), 0.1304),
        (Confusion(both_pass=25, label_only=35, judge_only=5, both_fail=35), 0.2593),
        # perfect agreement, and agreement exactly at chance
        (Confusion(both_pass=3, label_only=0, judge_only=0, both_fail=7), 1.0),
        (Confusion(both_pass=1, label_only=1, judge_only=1, both_fail=1), 0.0),
    ],
)
def test_kappa_is_the_published_value(table: Confusion, kappa: float) -> None:
    assert cohen_kappa(table) == pytest.approx(kappa, abs=5e-5)


def test_kappa_is_undefined_where_chance_agreement_is_one() -> None:
    assert cohen_kappa(Confusion(both_pass=5, label_only=0, judge_only=0, both_fail=0)) is None
    assert cohen_kappa(Confusion(0, 0, 0, 0)) is None and accuracy(Confusion(0, 0, 0, 0)) is None


def _vectorized_kappa(label: Any, verdict: Any, axis: int) -> Any:
    import numpy as np

    label, verdict = np.asarray(label, dtype=bool), np.asarray(verdict, dtype=bool)
    p_o = np.mean(label == verdict, axis=axis)
    p_l, p_j = np.mean(label, axis=axis), np.mean(verdict, axis=axis)
    p_e = p_l * p_j + (1 - p_l) * (1 - p_j)
    return (p_o - p_e) / (1 - p_e)


def _vectorized_accuracy(label: Any, verdict: Any, axis: int) -> Any:
    import numpy as np

    return np.mean(np.asarray(label) == np.asarray(verdict), axis=axis)


def test_the_intervals_are_scipys_percentile_bootstrap() -> None:
    import numpy as np

    from frostgym.compare.agreement import agreement
    from frostgym.core.seeding import derive_random
    from tests.stats_reference import RESAMPLES, assert_matches, scipy_interval

    rng = derive_random("test_judge_agreement", "intervals")
    labels = [rng.random() < 0.45 for _ in range(80)]
    verdicts = [label if rng.random() < 0.8 else not label for label in labels]
    ours = agreement(labels, verdicts, seed=11, resamples=RESAMPLES)
    data = (np.array(labels, dtype=float), np.array(verdicts, dtype=float))
    assert ours.accuracy_interval is not None and ours.kappa_interval is not None
    assert_matches(
        ours.accuracy_interval.low,
        ours.accuracy_interval.high,
        scipy_interval(data, _vectorized_accuracy, seed=5, paired=True),
    )
    assert_matches(
        ours.kappa_interval.low, ours.kappa_interval.high, scipy_interval(data, _vectorized_kappa, seed=5, paired=True)
    )
    assert agreement(labels, verdicts, seed=11, resamples=500) == agreement(labels, verdicts, seed=11, resamples=500)
    assert agreement(labels, verdicts, seed=12, resamples=500) != agreement(labels, verdicts, seed=11, resamples=500)
