"""Score views: the per-task estimators against hand arithmetic, and compute_views on a small
hand-made run whose every expected number is worked out in a comment beside it."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from frostgym.cards.summary import views_table
from frostgym.cards.views import compute_views, default_ks, majority_vote, pass_at_k, pass_hat_k
from frostgym.core.episode import COUNTED_AS, DropClass, RecordHead

FAIL = "errors_as_failures"
EXCL = "errors_excluded"


# ---------------------------------------------------------------------------------------------
# Records


def _grade(correct: float, answer: str | None, fmt: float | None = None) -> dict[str, Any]:
    """A grade that passes exactly when the required ``correct`` component is 1."""
    components = {"correct": correct} if fmt is None else {"correct": correct, "format": fmt}
    return {
        "score": correct,
        "components": components,
        "weights": dict.fromkeys(components, 1.0),
        "required": ["correct"],
        "grader": "hand",
        "grader_version": "1",
        "label": None,
        "details": {"answer_key": answer},
    }


def _episode(
    env_id: str,
    task_id: str,
    sample: int,
    reward: float,
    grade: dict[str, Any] | None,
    difficulty: str | None = None,
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """The head of an episode record, as its line in episodes.jsonl begins."""
    return {
        "plan_id": f"{env_id}:{task_id}:{sample}",
        "env_id": env_id,
        "task_id": task_id,
        "sample": sample,
        "difficulty": difficulty,
        "tags": tags or [],
        "reward": reward,
        "grade": grade,
    }


def _drop(
    env_id: str,
    task_id: str,
    sample: int,
    drop_class: DropClass,
    difficulty: str | None = None,
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """The head of a drop record, as its line in drops.jsonl begins."""
    return {
        "plan_id": f"{env_id}:{task_id}:{sample}",
        "env_id": env_id,
        "task_id": task_id,
        "sample": sample,
        "difficulty": difficulty,
        "tags": tags or [],
        "drop_class": drop_class,
        "counted_as": COUNTED_AS[drop_class],
        "stage": "runner",
        "error": "hand-made",
    }


def views_of(episodes: list[dict[str, Any]], drops: list[dict[str, Any]], ks: Any) -> dict[str, Any]:
    """compute_views over the heads the records decode to, as a card's close reads them."""
    heads = [RecordHead.from_json(e, "episode") for e in episodes] + [RecordHead.from_json(d, "drop") for d in drops]
    return compute_views(heads, ks)


# The hand-made run: 2 envs, 4 tasks, 3 samples each. Rewards are the env's and are set
# independently of the grade score so best_of_n and mean_reward have non-trivial values.
#   math/m1 (easy, [algebra]):      s0 pass r=1.0 "4" | s1 fail r=0.2 "5" | s2 pass r=0.8 "4"
#   math/m2 (hard, [algebra,word]): s0 fail r=0.3 "7" | s1 agent_error -> failure | s2 skipped -> excluded
#   sql/s1  (None, [join]):         s0 fail r=0.0 "b" | s1 pass r=1.0 "a" | s2 no grade r=0.0
#   sql/s2  (easy, []):             s0, s1, s2 pass r=1.0 "x"
# Counted n / c per task:  errors_as_failures: m1 3/2, m2 2/0, s1 3/1, s2 3/3
#                          errors_excluded:    m1 3/2, m2 1/0, s1 3/1, s2 3/3
EASY, HARD = "easy", "hard"
EPISODES = [
    _episode("math", "m1", 0, 1.0, _grade(1.0, "4", fmt=1.0), EASY, ["algebra"]),
    _episode("math", "m1", 1, 0.2, _grade(0.0, "5", fmt=1.0), EASY, ["algebra"]),
    _episode("math", "m1", 2, 0.8, _grade(1.0, "4", fmt=0.5), EASY, ["algebra"]),
    _episode("math", "m2", 0, 0.3, _grade(0.0, "7", fmt=1.0), HARD, ["algebra", "word"]),
    _episode("sql", "s1", 0, 0.0, _grade(0.0, "b"), None, ["join"]),
    _episode("sql", "s1", 1, 1.0, _grade(1.0, "a"), None, ["join"]),
    _episode("sql", "s1", 2, 0.0, None, None, ["join"]),
    _episode("sql", "s2", 0, 1.0, _grade(1.0, "x"), EASY),
    _episode("sql", "s2", 1, 1.0, _grade(1.0, "x"), EASY),
    _episode("sql", "s2", 2, 1.0, _grade(1.0, "x"), EASY),
]
DROPS = [
    _drop("math", "m2", 1, "agent_error", HARD, ["algebra", "word"]),
    _drop("math", "m2", 2, "skipped", HARD, ["algebra", "word"]),
]
KS = [4, 2, 1, 3, 2]


@pytest.fixture(scope="module")
def views() -> dict[str, Any]:
    return views_of(EPISODES, DROPS, KS)


def _agg(value: float | None, counted: int, n_lt_k: int) -> dict[str, Any]:
    return {"value": value, "tasks_counted": counted, "tasks_n_lt_k": n_lt_k}


def _assert_agg(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert actual["tasks_counted"] == expected["tasks_counted"]
    assert actual["tasks_n_lt_k"] == expected["tasks_n_lt_k"]
    if expected["value"] is None:
        assert actual["value"] is None
    else:
        assert actual["value"] == pytest.approx(expected["value"])


# ---------------------------------------------------------------------------------------------
# Per-task estimators


def test_pass_at_k_hand_values() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # c / n
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    assert pass_at_k(5, 3, 3) == 1.0  # n - c = 2 < k: every draw of 3 holds a pass
    assert pass_at_k(2, 2, 3) is None  # n < k, even when every sample passed
    assert pass_at_k(0, 0, 1) is None


def test_pass_hat_k_hand_values() -> None:
    assert pass_hat_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)  # C(2,2)/C(5,2) = 1/10
    assert pass_hat_k(5, 2, 3) == 0.0  # C(2,3) = 0
    assert pass_hat_k(5, 0, 1) == 0.0
    assert pass_hat_k(5, 5, 5) == 1.0
    assert pass_hat_k(2, 2, 3) is None


def test_product_form_matches_binomial_form() -> None:
    for n in range(13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                expected = 1.0 - math.comb(n - c, k) / math.comb(n, k)
                value = pass_at_k(n, c, k)
                assert value is not None and math.isclose(value, expected, abs_tol=1e-12), (n, c, k)


def test_large_n_stays_finite() -> None:
    value = pass_at_k(1000, 3, 100)
    assert value is not None and math.isfinite(value) and 0.0 <= value <= 1.0
    # 1 - C(997,100)/C(1000,100), exact in integers
    assert value == pytest.approx(1 - math.comb(997, 100) / math.comb(1000, 100))
    hat = pass_hat_k(1000, 3, 100)
    assert hat == 0.0
    hat = pass_hat_k(1000, 999, 100)
    assert hat is not None and 0.0 < hat < 1.0


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(5) == [1, 2, 4, 5]
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(12) == [1, 2, 4, 8, 12]


# ---------------------------------------------------------------------------------------------
# Majority vote


def test_majority_vote_counts_and_tie_rule() -> None:
    assert majority_vote(["a", "b", "b"]) == "b"
    assert majority_vote(["a", "b"]) == "a"  # tie: "a" voted first (sample 0)
    assert majority_vote(["y", "x", "x", "y"]) == "y"  # 2-2 tie: "y" voted first
    assert majority_vote(["b", None, "a"]) == "b"
    assert majority_vote([None, "a", None]) == "a"  # None does not vote
    assert majority_vote([None, "b", "a", "a", "b"]) == "b"  # first vote at index 1 beats index 2
    assert majority_vote([None, None]) is None
    assert majority_vote([]) is None


def test_maj_at_k_winner_needs_a_passing_voter() -> None:
    episodes = [
        # t1: "4" (fail, e.g. bad format), "4" (pass), "5" (pass): "4" wins 2-1, a "4" voter passed -> solved
        _episode("e", "t1", 0, 0.0, _grade(0.0, "4")),
        _episode("e", "t1", 1, 1.0, _grade(1.0, "4")),
        _episode("e", "t1", 2, 1.0, _grade(1.0, "5")),
        # t2: a passing sample with no answer key does not vote; "9" wins alone and failed -> unsolved
        _episode("e", "t2", 0, 1.0, _grade(1.0, None)),
        _episode("e", "t2", 1, 0.0, _grade(0.0, "9")),
        _episode("e", "t2", 2, 0.0, None),
        # t3: nobody votes -> unsolved, even though sample 0 passed
        _episode("e", "t3", 0, 1.0, {**_grade(1.0, None), "components": {}, "weights": {}, "required": []}),
        _episode("e", "t3", 1, 0.0, None),
        _episode("e", "t3", 2, 0.0, None),
    ]
    maj = views_of(episodes, [], [1, 2, 3])["overall"][EXCL]["maj@k"]
    # maj@1: t1 "4" failed -> 0; t2 no vote -> 0; t3 no vote -> 0
    _assert_agg(maj["1"], _agg(0.0, 3, 0))
    # maj@2: t1 "4","4" -> a "4" passed -> 1; t2 "9" failed -> 0; t3 -> 0: 1/3
    _assert_agg(maj["2"], _agg(1 / 3, 3, 0))
    # maj@3: t1 1; t2 0; t3 0: 1/3
    _assert_agg(maj["3"], _agg(1 / 3, 3, 0))


def test_maj_at_k_takes_the_first_k_samples_by_index() -> None:
    # Given out of order: sorted by sample, the first 2 are "a"(pass), "b"(fail): tie -> "a" -> solved.
    episodes = [
        _episode("e", "t", 2, 0.0, _grade(0.0, "b")),
        _episode("e", "t", 1, 0.0, _grade(0.0, "b")),
        _episode("e", "t", 0, 1.0, _grade(1.0, "a")),
    ]
    maj = views_of(episodes, [], [2, 3])["overall"][EXCL]["maj@k"]
    assert maj["2"]["value"] == 1.0  # samples 0,1: "a" vs "b" tie, "a" voted first and passed
    assert maj["3"]["value"] == 0.0  # samples 0..2: "b" wins 2-1 and never passed


# ---------------------------------------------------------------------------------------------
# compute_views on the hand-made run


def test_shape_and_text(views: dict[str, Any]) -> None:
    assert views["ks"] == [1, 2, 3, 4]
    assert set(views["rules"]) == {FAIL, EXCL}
    assert set(views["definitions"]) == {
        "pass@k",
        "pass^k",
        "maj@k",
        "best_of_n",
        "mean_reward",
        "component_means",
        "no_answer_rate",
        "selective_accuracy",
        "safety_violation_rate",
    }
    assert "tie" in views["definitions"]["maj@k"]
    assert all("component_means" in text for text in views["rules"].values())
    assert list(views["overall"][FAIL]["pass@k"]) == ["1", "2", "3", "4"]
    assert json.loads(json.dumps(views)) == views


def test_overall_errors_as_failures(views: dict[str, Any]) -> None:
    m = views["overall"][FAIL]
    assert m["episodes"] == 11  # 10 completed + 1 failure drop
    assert m["tasks"] == 4
    assert m["per_task_n"] == {"min": 2, "max": 3}  # m2 has 2
    # (1.0+0.2+0.8) + (0.3+0) + (0+1+0) + 3*1.0 = 6.3 over 11
    assert m["mean_reward"] == pytest.approx(6.3 / 11)
    # correct over the 9 graded episodes: m1 1+0+1, m2 0, s1 0+1, s2 3 = 6/9; format (math only): 1+1+0.5+1 = 3.5/4
    assert m["component_means"] == pytest.approx({"correct": 6 / 9, "format": 0.875})
    assert list(m["component_means"]) == ["correct", "format"]
    # pass@1: (2/3 + 0/2 + 1/3 + 3/3) / 4 = 0.5
    _assert_agg(m["pass@k"]["1"], _agg(0.5, 4, 0))
    # pass@2: m1 n-c=1<2 -> 1; m2 c=0 -> 0; s1 1 - C(2,2)/C(3,2) = 2/3; s2 1  => (8/3)/4 = 2/3
    _assert_agg(m["pass@k"]["2"], _agg(2 / 3, 4, 0))
    # pass@3: m2 has n=2<3 and is left out; m1, s1, s2 all have n-c<3 -> 1
    _assert_agg(m["pass@k"]["3"], _agg(1.0, 3, 1))
    # pass@4: every task has n<4
    _assert_agg(m["pass@k"]["4"], _agg(None, 0, 4))
    # pass^2: m1 C(2,2)/C(3,2)=1/3; m2 0; s1 C(1,2)=0 -> 0; s2 1  => (4/3)/4 = 1/3
    _assert_agg(m["pass^k"]["2"], _agg(1 / 3, 4, 0))
    # pass^3: m1 C(2,3)=0; m2 n<3; s1 0; s2 1  => 1/3
    _assert_agg(m["pass^k"]["3"], _agg(1 / 3, 3, 1))
    # maj@1: m1 "4" pass 1; m2 "7" fail 0; s1 "b" fail 0; s2 "x" pass 1  => 0.5
    _assert_agg(m["maj@k"]["1"], _agg(0.5, 4, 0))
    # maj@2: m1 "4"/"5" tie -> "4" (sample 0, passed) 1; m2 "7" + the drop (no vote) -> "7" 0;
    #        s1 "b"/"a" tie -> "b" 0; s2 1  => 0.5
    _assert_agg(m["maj@k"]["2"], _agg(0.5, 4, 0))
    # maj@3: m1 "4" 2-1 -> 1; m2 n<3; s1 "b"/"a"/no grade -> tie -> "b" 0; s2 1  => 2/3
    _assert_agg(m["maj@k"]["3"], _agg(2 / 3, 3, 1))
    # best_of_n: m1 1.0, m2 0.3, s1 1.0, s2 1.0 => 3.3/4; pass_any: m2 never passed => 3/4
    assert m["best_of_n"] == pytest.approx({"value": 0.825, "tasks_counted": 4, "pass_any": 0.75})


def test_overall_errors_excluded(views: dict[str, Any]) -> None:
    m = views["overall"][EXCL]
    assert m["episodes"] == 10
    assert m["tasks"] == 4
    assert m["per_task_n"] == {"min": 1, "max": 3}  # m2 keeps only sample 0
    assert m["mean_reward"] == pytest.approx(0.63)  # 6.3 / 10
    assert m["component_means"] == pytest.approx({"correct": 6 / 9, "format": 0.875})  # same under both rules
    # pass@1: (2/3 + 0/1 + 1/3 + 1) / 4 = 0.5
    _assert_agg(m["pass@k"]["1"], _agg(0.5, 4, 0))
    # pass@2: m2 now has n=1<2 and is left out: (m1 1 + s1 2/3 + s2 1) / 3 = 8/9
    _assert_agg(m["pass@k"]["2"], _agg(8 / 9, 3, 1))
    _assert_agg(m["pass@k"]["3"], _agg(1.0, 3, 1))
    _assert_agg(m["pass@k"]["4"], _agg(None, 0, 4))
    # pass^2: (m1 1/3 + s1 0 + s2 1) / 3 = 4/9
    _assert_agg(m["pass^k"]["2"], _agg(4 / 9, 3, 1))
    # maj@1: m1 1, m2 "7" 0, s1 0, s2 1 => 0.5; maj@2: m2 left out => (1 + 0 + 1) / 3
    _assert_agg(m["maj@k"]["1"], _agg(0.5, 4, 0))
    _assert_agg(m["maj@k"]["2"], _agg(2 / 3, 3, 1))
    # best_of_n: m2's only counted sample has reward 0.3, as before => 3.3/4
    assert m["best_of_n"] == pytest.approx({"value": 0.825, "tasks_counted": 4, "pass_any": 0.75})


def test_by_env(views: dict[str, Any]) -> None:
    assert list(views["by_env"]) == ["math", "sql"]
    math_fail = views["by_env"]["math"][FAIL]
    math_excl = views["by_env"]["math"][EXCL]
    assert (math_fail["episodes"], math_excl["episodes"]) == (5, 4)
    assert math_fail["mean_reward"] == pytest.approx(0.46)  # (2.0 + 0.3 + 0) / 5
    assert math_excl["mean_reward"] == pytest.approx(0.575)  # (2.0 + 0.3) / 4
    _assert_agg(math_fail["pass@k"]["1"], _agg(1 / 3, 2, 0))  # (2/3 + 0) / 2
    _assert_agg(math_excl["pass@k"]["2"], _agg(1.0, 1, 1))  # m1 only; m2 n=1<2
    sql = views["by_env"]["sql"]
    assert sql[FAIL] == sql[EXCL]  # no drops in sql
    assert sql[FAIL]["episodes"] == 6
    # correct over sql's 5 graded episodes: s1 0+1, s2 3 => 4/5; no "format" component in sql
    assert sql[FAIL]["component_means"] == pytest.approx({"correct": 0.8})
    _assert_agg(sql[FAIL]["pass@k"]["1"], _agg(2 / 3, 2, 0))  # (1/3 + 1) / 2


def test_by_difficulty(views: dict[str, Any]) -> None:
    assert list(views["by_difficulty"]) == ["easy", "hard", "none"]  # s1's None becomes "none"
    easy = views["by_difficulty"]["easy"][FAIL]
    assert (easy["episodes"], easy["tasks"]) == (6, 2)  # m1 + s2
    _assert_agg(easy["pass@k"]["1"], _agg(5 / 6, 2, 0))  # (2/3 + 1) / 2
    none = views["by_difficulty"]["none"][EXCL]
    assert none["episodes"] == 3
    _assert_agg(none["pass@k"]["1"], _agg(1 / 3, 1, 0))
    # hard holds only m2: n=1 under errors_excluded, so every k >= 2 has no task to count
    hard = views["by_difficulty"]["hard"]
    _assert_agg(hard[EXCL]["pass@k"]["2"], _agg(None, 0, 1))
    _assert_agg(hard[FAIL]["pass@k"]["2"], _agg(0.0, 1, 0))
    assert hard[EXCL]["per_task_n"] == {"min": 1, "max": 1}


def test_by_tag(views: dict[str, Any]) -> None:
    assert list(views["by_tag"]) == ["algebra", "join", "word"]  # s2 has no tags and is in none
    # m2 counts under both of its tags
    assert views["by_tag"]["word"][FAIL]["episodes"] == 2
    assert views["by_tag"]["word"][EXCL]["episodes"] == 1
    assert views["by_tag"]["algebra"][FAIL]["episodes"] == 5
    assert views["by_tag"]["algebra"][FAIL]["mean_reward"] == views["by_env"]["math"][FAIL]["mean_reward"]
    join = views["by_tag"]["join"][FAIL]
    _assert_agg(join["maj@k"]["3"], _agg(0.0, 1, 0))  # s1: "b"/"a" tie -> "b", which failed


def test_slice_with_only_excluded_drops_is_listed_empty() -> None:
    views = views_of(EPISODES, [*DROPS, _drop("tools", "t9", 0, "skipped")], [1])
    tools = views["by_env"]["tools"]
    for rule in (FAIL, EXCL):
        m = tools[rule]
        assert (m["episodes"], m["tasks"], m["per_task_n"], m["mean_reward"]) == (0, 0, None, None)
        assert m["component_means"] == {}
        _assert_agg(m["pass@k"]["1"], _agg(None, 0, 0))
        assert m["best_of_n"] == {"value": None, "tasks_counted": 0, "pass_any": None}
    assert views["overall"][FAIL]["episodes"] == 11


def test_empty_run() -> None:
    views = views_of([], [], [1])
    assert views["overall"][FAIL]["episodes"] == 0
    assert views["by_env"] == {} and views["by_tag"] == {}


# ---------------------------------------------------------------------------------------------
# Invalid inputs


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (-1, 0, 1), (3, 1, 0), (3, 1, -2)])
def test_estimators_reject_bad_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match=r"c <= n|k must be"):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError, match=r"c <= n|k must be"):
        pass_hat_k(n, c, k)


@pytest.mark.parametrize("ks", [[0], [1, -2], [True], [1.5], ["2"]])
def test_compute_views_rejects_bad_ks(ks: list[Any]) -> None:
    with pytest.raises(ValueError, match="positive int"):
        views_of(EPISODES, DROPS, ks)


@pytest.mark.parametrize("samples", [0, -3, True])
def test_default_ks_rejects_bad_samples(samples: int) -> None:
    with pytest.raises(ValueError, match="positive int"):
        default_ks(samples)


def test_counted_as_contradicting_the_class_is_rejected() -> None:
    with pytest.raises(ValueError, match="counted_as"):
        views_of(EPISODES, [{**_drop("math", "m2", 1, "agent_error"), "counted_as": "excluded"}], [1])


def test_sample_recorded_twice_is_rejected() -> None:
    with pytest.raises(ValueError, match="more than once"):
        views_of(EPISODES, [_drop("math", "m1", 0, "agent_error")], [1])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"reward": None}, "reward"),
        ({"reward": math.nan}, "reward"),
        ({"reward": True}, "reward"),
        ({"tags": "algebra"}, "tags"),
        ({"sample": -1}, "sample"),
        ({"task_id": 7}, "task_id"),
        ({"grade": {**_grade(1.0, "4"), "components": {"correct": "1"}}}, "component 'correct'"),
        ({"grade": {**_grade(1.0, "4"), "required": ["missing"]}}, "required component"),
        ({"grade": {**_grade(1.0, "4"), "details": {"answer_key": 4}}}, "answer_key"),
    ],
)
def test_malformed_episode_head_is_rejected(change: dict[str, Any], match: str) -> None:
    """What the views rely on is checked once, when a record is decoded, never in the views."""
    with pytest.raises(ValueError, match=match):
        views_of([{**EPISODES[0], **change}], [], [1])
    no_reward = {k: v for k, v in EPISODES[0].items() if k != "reward"}
    with pytest.raises(ValueError, match="no 'reward'"):
        views_of([no_reward], [], [1])


@pytest.mark.parametrize(
    ("ks", "headers"), [([1], ["pass@1", "pass^1", "maj@1"]), ([1, 4], ["pass@1", "pass@4", "pass^4", "maj@4"])]
)
def test_summary_table_shows_each_view_once(ks: list[int], headers: list[str]) -> None:
    episodes = [_episode("e", "t", s, 1.0, _grade(1.0, "4")) for s in range(max(ks))]
    table = views_table({"views": views_of(episodes, [], ks)})
    assert [str(c.header) for c in table.columns][5:] == [*headers, "no answer", "selective acc", "unsafe"]


def test_maj_at_k_in_one_pass_matches_majority_vote_at_every_k() -> None:
    """The one-pass maj@k agrees with majority_vote on the first k votes, ties included."""
    rng = np.random.default_rng(15)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        votes = [(None if a == 0 else "abc"[a - 1], bool(p)) for a, p in rng.integers(0, [4, 2], size=(n, 2))]
        heads = [_episode("e", "t", i, 0.0, _grade(float(p), a)) for i, (a, p) in enumerate(votes)]
        ks = list(range(1, n + 2))
        maj = views_of(heads, [], ks)["overall"][EXCL]["maj@k"]
        for k in ks:
            winner = majority_vote([a for a, _ in votes[:k]])
            expected = None if k > n else float(winner is not None and (winner, True) in votes[:k])
            assert maj[str(k)]["value"] == expected, (votes, k)
