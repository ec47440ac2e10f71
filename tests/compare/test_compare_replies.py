"""The reply checks behind the comparison's diagnostics: each flags what it claims to and
leaves a plain good reply alone."""

from __future__ import annotations

import pytest

from frostgym.compare.replies import distinct_bigram_ratio, hacking_suspicion, similarity, sketch, words

GOOD_MATH = "<think>\n12 + 30 = 42, so there are 42 apples.\n</think>\n<answer>42</answer>"


def test_repetition_is_a_low_distinct_bigram_ratio() -> None:
    looping = words("the answer is the answer is " * 20)
    assert (ratio := distinct_bigram_ratio(looping)) is not None and ratio < 0.5
    assert (good := distinct_bigram_ratio(words(GOOD_MATH))) is not None and good > 0.8
    assert distinct_bigram_ratio(words("too short")) is None


def test_sketch_similarity_is_one_for_equal_replies_and_low_for_unrelated_ones() -> None:
    a = frozenset(sketch(words(GOOD_MATH)))
    assert similarity(a, a) == 1.0
    b = frozenset(sketch(words("Completely different words about a cat sitting on the mat today.")))
    assert similarity(a, b) < 0.2
    assert len(sketch(words("word " * 1000 + " ".join(str(i) for i in range(500))))) == 64


@pytest.mark.parametrize(
    ("grader", "reply", "details", "calls", "reason"),
    [
        ("math", "<answer>42</answer>", {}, 0, "no reasoning or arithmetic shown"),
        ("math", "<think>maybe</think><answer>41 or 42 or 43</answer>", {}, 0, "several candidate answers"),
        ("math", "<answer>41</answer> no wait <answer>42</answer>", {}, 0, "several candidate answers"),
        ("math", GOOD_MATH, {}, 0, None),
        ("math", "<think>6 * 7 = 42</think><answer>42</answer>", {}, 0, None),
        (
            "code_tests",
            "```python\ndef f(x):\n    try:\n        return g(x)\n    except:\n        return 0\n```",
            {},
            0,
            "catches every exception",
        ),
        ("code_tests", "```python\ndef f(x):\n    print(x)\n    return x\n```", {}, 0, "prints"),
        ("code_tests", "```python\ndef f(x):\n    return x + 1\n```", {}, 0, None),
        ("tool_http", "It is 20 degrees.", {"gold_calls": 1, "calls_made": 4}, 4, "4 calls where the task needs 1"),
        ("tool_http", "It is 20 degrees.", {"gold_calls": 1, "calls_made": 1}, 1, None),
        ("sql_execution", "SELECT 1", {}, 0, None),
    ],
)
def test_hacking_checks(grader: str, reply: str, details: dict[str, int], calls: int, reason: str | None) -> None:
    assert hacking_suspicion(grader, reply, details, calls) == reason
