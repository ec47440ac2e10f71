"""The LLM judge (``frostgym.graders.judge``) against a real model server on loopback
(``tests.chat_server``) whose answers the tests script: strict verdicts, every malformed
shape a drop of the right class, the pairwise order a pure function of the seed, the tie
policies, and record-then-replay without the server."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from frostgym.agents.sampling import SamplingParams
from frostgym.core.errors import JudgeError, RubricError
from frostgym.core.grade import Grade
from frostgym.graders.judge import (
    GRADER,
    Criterion,
    Rubric,
    judge_pairwise,
    judge_rubric,
    load_rubric,
    pairwise_swapped,
    parse_pairwise,
    parse_verdict,
)
from frostgym.models import FrozenModel, ModelCache
from tests.chat_server import Answer, ChatServer

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=64)
RUBRIC = Rubric(
    "helpful",
    (
        Criterion("correct", "The reply answers the question correctly.", 2.0),
        Criterion("polite", "The reply is polite.", 1.0),
    ),
    threshold=0.6,
)


def reply(text: str) -> Answer:
    return 200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}, {}


class Judge:
    """A chat server whose every answer is ``self.answer(body)``, counting the requests."""

    def __init__(self) -> None:
        self.answer: Callable[[dict[str, Any]], Answer] = lambda body: reply('{"correct": "yes", "polite": "yes"}')
        self.server = ChatServer(respond=lambda body: self.answer(body))

    def model(self, cache: ModelCache | None = None, mode: str = "record") -> FrozenModel:
        return FrozenModel(
            f"openai:{self.server.base_url}#judge",
            cache=cache if cache is not None else ModelCache(),
            mode=mode,  # type: ignore[arg-type]
            sampling=GREEDY,
        )


@pytest.fixture
def judge() -> Iterator[Judge]:
    made = Judge()
    with made.server:
        yield made


# -- strict parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"correct": "yes", "polite": "no"}', {"correct": True, "polite": False}),
        ('  {"polite": "yes", "correct": "no"}\n', {"correct": False, "polite": True}),
        ('```json\n{"correct": "yes", "polite": "yes"}\n```', {"correct": True, "polite": True}),
        ('```\n{"correct": "no", "polite": "no"}```', {"correct": False, "polite": False}),
    ],
)
def test_a_verdict_in_the_declared_format_parses(text: str, expected: dict[str, bool]) -> None:
    assert parse_verdict(text, RUBRIC) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not one JSON object"),
        ("yes", "not one JSON object"),
        ('The verdict: {"correct": "yes", "polite": "yes"}', "not one JSON object"),
        ('{"correct": "yes", "polite": "yes"} I hope that helps', "not one JSON object"),
        ('{"correct": "yes"}', "lacks criterion 'polite'"),
        ('{"correct": "yes", "polite": "yes", "brief": "no"}', "no criterion"),
        ('{"correct": "yes", "correct": "no", "polite": "yes"}', "twice"),
        ('{"correct": "Yes", "polite": "yes"}', "must be"),
        ('{"correct": true, "polite": "yes"}', "must be"),
        ('{"correct": 1, "polite": "yes"}', "must be"),
        ('{"correct": {"v": "yes"}, "polite": "yes"}', "must be"),
        ('["yes", "yes"]', "must be a JSON object"),
        ('{"correct": NaN, "polite": "yes"}', "not"),
        ('```json\n{"correct": "yes", "polite": "yes"}\n``` and more', "not one JSON object"),
        ('```json\n{"correct": "yes", "polite": "yes"}\n```\n```json\n{}\n```', "not one JSON object"),
    ],
)
def test_every_malformed_verdict_is_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_verdict(text, RUBRIC)


@pytest.mark.parametrize(
    ("text", "verdict"), [("A", "A"), (" B\n", "B"), ("tie", "tie"), ("TIE", "tie"), ("```\nA\n```", "A")]
)
def test_a_pairwise_verdict_in_the_declared_format_parses(text: str, verdict: str) -> None:
    assert parse_pairwise(text) == verdict


@pytest.mark.parametrize("text", ["", "a", "A.", "Reply A", "A or B", "draw", "AB", '{"winner": "A"}'])
def test_every_malformed_pairwise_verdict_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="exactly A, B or tie"):
        parse_pairwise(text)


# -- rubric grades and their drops ------------------------------------------------------------


def test_a_rubric_grade_has_a_component_per_criterion_and_keeps_the_call(judge: Judge) -> None:
    prompts: list[str] = []

    def answer(body: dict[str, Any]) -> Answer:
        prompts.append(body["messages"][-1]["content"])
        return reply('{"correct": "yes", "polite": "no"}')

    judge.answer = answer
    grade = judge_rubric(RUBRIC, "It is 4, you fool.", judge.model(), seed=7, question="What is 2 + 2?")
    assert grade.components == {"correct": 1.0, "polite": 0.0, "judge": 1.0}
    assert grade.score == pytest.approx(2 / 3) and grade.passed and grade.label == "criteria_missed"
    assert (grade.grader, grade.grader_version) == (GRADER.name, GRADER.version)
    details = grade.details
    assert details["verdict"] == {"correct": "yes", "polite": "no"}
    assert details["judge_reply"] == '{"correct": "yes", "polite": "no"}'
    assert details["judge_model"] == {"spec": "openai", "model": "judge"}
    assert details["judge_source"] == "live" and len(details["judge_key"]) == 64
    assert details["judge_request"]["messages"][-1]["content"] == prompts[0]
    assert "What is 2 + 2?" in prompts[0] and "It is 4, you fool." in prompts[0] and '"polite"' in prompts[0]
    Grade.from_dict(json.loads(json.dumps(grade.to_dict())))  # a card stores it as JSON

    judge.answer = lambda body: reply('{"correct": "no", "polite": "yes"}')
    failed = judge_rubric(RUBRIC, "It is 5.", judge.model(), seed=7)
    assert failed.components["judge"] == 0.0 and failed.score == 0.0 and not failed.passed
    assert failed.label == "judge_fail"
    judge.answer = lambda body: reply('{"correct": "yes", "polite": "yes"}')
    full = judge_rubric(RUBRIC, "It is 4, thank you.", judge.model(), seed=7)
    assert full.score == 1.0 and full.label is None


@pytest.mark.parametrize(
    "text", ["yes", '{"correct": "yes"}', "Sure! ```json\n{}\n```", '{"correct": "maybe", "polite": "yes"}']
)
def test_an_unparseable_verdict_is_a_grader_error_not_a_zero(judge: Judge, text: str) -> None:
    judge.answer = lambda body: reply(text)
    with pytest.raises(JudgeError) as raised:
        judge_rubric(RUBRIC, "4", judge.model(), seed=1)
    assert raised.value.drop_class == "grader_error" and raised.value.stage == "grade"
    assert raised.value.reply == text and raised.value.key is not None
    assert "does not parse" in str(raised.value)


def test_a_failed_judge_call_is_an_infra_error(judge: Judge) -> None:
    judge.answer = lambda body: (400, {"error": {"message": "bad request"}}, {})
    with pytest.raises(JudgeError) as raised:
        judge_rubric(RUBRIC, "4", judge.model(), seed=1)
    assert raised.value.drop_class == "infra_error" and raised.value.reply is None


def test_a_replay_miss_is_a_replay_miss_and_asks_nothing(judge: Judge, tmp_path: Path) -> None:
    model = judge.model(ModelCache(tmp_path / "judge.jsonl"), mode="replay")
    with pytest.raises(JudgeError) as raised:
        judge_rubric(RUBRIC, "4", model, seed=1)
    assert raised.value.drop_class == "replay_miss"
    assert judge.server.bodies == [] and not model.loaded


def test_record_then_replay_gives_the_same_grade_without_the_server(judge: Judge, tmp_path: Path) -> None:
    path = tmp_path / "judge.jsonl"
    judge.answer = lambda body: reply('{"correct": "yes", "polite": "no"}')
    recorded = judge_rubric(RUBRIC, "4", judge.model(ModelCache(path)), seed=3, question="2 + 2?")
    assert len(judge.server.bodies) == 1
    judge.answer = lambda body: reply('{"correct": "no", "polite": "no"}')  # a changed judge is not asked
    replayed = judge_rubric(RUBRIC, "4", judge.model(ModelCache(path), mode="replay"), seed=3, question="2 + 2?")
    assert len(judge.server.bodies) == 1  # no request the second time
    assert replayed.details["judge_source"] == "cache"
    strip = {"judge_source"}
    assert {k: v for k, v in replayed.to_dict()["details"].items() if k not in strip} == {
        k: v for k, v in recorded.to_dict()["details"].items() if k not in strip
    }
    assert (replayed.score, replayed.components, replayed.label) == (
        recorded.score,
        recorded.components,
        recorded.label,
    )
    # the card's own record of the call serves it too
    stored = ModelCache.from_replies([(recorded.details["judge_request"], recorded.details["judge_reply"])])
    again = judge_rubric(RUBRIC, "4", judge.model(stored, mode="replay"), seed=3, question="2 + 2?")
    assert again.components == recorded.components and len(judge.server.bodies) == 1


def test_a_judge_error_keeps_its_drop_class_across_processes() -> None:
    error = pickle.loads(pickle.dumps(JudgeError("no verdict", "replay_miss", key="k", reply=None)))
    assert (error.drop_class, error.stage, error.key, str(error)) == ("replay_miss", "grade", "k", "no verdict")


# -- pairwise ---------------------------------------------------------------------------------


def test_the_pairwise_order_is_a_pure_function_of_the_seed_and_flips_for_some() -> None:
    orders = [pairwise_swapped(seed) for seed in range(200)]
    assert orders == [pairwise_swapped(seed) for seed in range(200)]
    assert 60 < sum(orders) < 140  # about half the seeds show reply_b first


def _pairwise_server(judge: Judge, favourite: str, shown: list[str]) -> None:
    """The judge picks whichever shown reply is ``favourite`` (or says tie for "tie")."""

    def answer(body: dict[str, Any]) -> Answer:
        prompt = body["messages"][-1]["content"]
        shown.append(prompt)
        if favourite == "tie":
            return reply("tie")
        first = prompt.split("Reply A:\n<<<\n", 1)[1].split("\n>>>", 1)[0]
        return reply("A" if first == favourite else "B")

    judge.answer = answer


def test_the_verdict_is_mapped_back_to_the_original_order(judge: Judge) -> None:
    swapped = next(seed for seed in range(100) if pairwise_swapped(seed))
    straight = next(seed for seed in range(100) if not pairwise_swapped(seed))
    shown: list[str] = []
    _pairwise_server(judge, "good reply", shown)
    for seed in (swapped, straight):
        win = judge_pairwise("Q?", "good reply", "bad reply", judge.model(), seed=seed)
        assert win.components == {"judge": 1.0} and win.passed and win.label is None
        assert win.details["winner"] == "a" and win.details["swapped"] == (seed == swapped)
        assert win.details["shown_verdict"] == ("B" if seed == swapped else "A")
        loss = judge_pairwise("Q?", "bad reply", "good reply", judge.model(), seed=seed)
        assert loss.score == 0.0 and loss.label == "pairwise_loss" and loss.details["winner"] == "b"
    assert shown[0].index("bad reply") < shown[0].index("good reply")  # swapped: reply_b shown as A
    assert shown[2].index("good reply") < shown[2].index("bad reply")


@pytest.mark.parametrize(("policy", "score"), [("half", 0.5), ("loss", 0.0)])
def test_a_tie_scores_by_the_declared_policy(judge: Judge, policy: Any, score: float) -> None:
    _pairwise_server(judge, "tie", [])
    grade = judge_pairwise("Q?", "one", "two", judge.model(), seed=5, tie_policy=policy)
    assert grade.score == score and not grade.passed and grade.label == "pairwise_tie"
    assert grade.details["tie_policy"] == policy and grade.details["winner"] == "tie"


def test_an_unknown_tie_policy_and_an_unparseable_pairwise_verdict_are_refused(judge: Judge) -> None:
    with pytest.raises(ValueError, match="tie policy"):
        judge_pairwise("Q?", "one", "two", judge.model(), seed=5, tie_policy="win")  # type: ignore[arg-type]
    judge.answer = lambda body: reply("Reply A is better.")
    with pytest.raises(JudgeError) as raised:
        judge_pairwise("Q?", "one", "two", judge.model(), seed=5)
    assert raised.value.drop_class == "grader_error"


# -- rubrics ----------------------------------------------------------------------------------


def test_a_rubric_file_reads_and_every_bad_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rubric.toml"
    path.write_text(
        'name = "helpful"\nthreshold = 0.6\n'
        '[[criteria]]\nname = "correct"\ndescription = "The reply answers the question correctly."\nweight = 2\n'
        '[[criteria]]\nname = "polite"\ndescription = "The reply is polite."\n'
    )
    assert load_rubric(path) == RUBRIC
    bad = {
        "name = 1\n": "'name' must be a string",
        'name = "x"\n': "'criteria' must be a list",
        'name = "x"\ncolour = 1\n[[criteria]]\nname = "a"\ndescription = "d"\n': "unknown key 'colour'",
        'name = "x"\n[[criteria]]\nname = "a"\ndescription = "d"\nweight = 0\n': "positive weight",
        'name = "x"\n[[criteria]]\nname = "a"\ndescription = "d"\n[[criteria]]\nname = "a"\ndescription = "e"\n': (
            "named twice"
        ),
        'name = "x"\n[[criteria]]\nname = "judge"\ndescription = "d"\n': "frostgym keeps",
        'name = "x"\nthreshold = 1.5\n[[criteria]]\nname = "a"\ndescription = "d"\n': "threshold",
        "name = \n": "not TOML",
    }
    for text, why in bad.items():
        path.write_text(text)
        with pytest.raises(RubricError, match=why):
            load_rubric(path)
    with pytest.raises(RubricError, match="cannot read"):
        load_rubric(tmp_path / "missing.toml")
