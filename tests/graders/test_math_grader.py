"""The math grader as a pure function: numbers, extraction, weights, purity; and what every
grader declares of itself (``GraderSpec``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest

from frostgym.core.errors import GraderError
from frostgym.core.grade import Grade, GraderSpec, call_grader
from frostgym.graders import code_tests, math_answer, sql_execution, tool_ast, tool_http, tool_state
from frostgym.graders.adversarial import run_suite
from frostgym.graders.equations import Chain, read_chain
from frostgym.graders.extraction import extract_answers
from frostgym.graders.math_answer import GRADER, MathGraderConfig, grade_math
from frostgym.graders.numbers import NotANumber, ParsedNumber, parse_number

T = "<think>ok</think>"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,073", Fraction(1073)),
        ("1073.0", Fraction(1073)),
        ("-12.5", Fraction(-25, 2)),
        (".5", Fraction(1, 2)),
        ("3/4", Fraction(3, 4)),
        ("\\frac{3}{4}", Fraction(3, 4)),
        ("\\dfrac34", Fraction(3, 4)),
        ("2 1/2", Fraction(5, 2)),
        ("$1,234.50", Fraction(246900, 200)),
        ("18 dollars", Fraction(18)),
        ("\\boxed{18}", Fraction(18)),
        ("$\\boxed{18}$", Fraction(18)),
        ("x = -3", Fraction(-3)),
        ("1.8e1", Fraction(18)),
    ],
)
def test_numbers_parse_exactly(text: str, value: Fraction) -> None:
    parsed = parse_number(text)
    assert isinstance(parsed, ParsedNumber) and parsed.value == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("none", "empty"),
        ("18 19", "multiple_values"),
        ("18,19", "multiple_values"),
        ("١٨", "non_ascii_digits"),
        ("9" * 65, "too_long"),
        ("1/0", "not_numeric"),
    ],
)
def test_numbers_refuse(text: str, reason: str) -> None:
    parsed = parse_number(text)
    assert isinstance(parsed, NotANumber) and parsed.reason == reason


def test_extraction_ignores_reasoning_and_reads_every_statement() -> None:
    e = extract_answers("<think>the answer is 5</think>The answer is 18. <answer>18</answer>")
    assert e.candidates == ("18", "18") and e.where == "answer_tag" and e.format_score == 0.5
    assert extract_answers("<think>x</think><answer>18</answer>").format_score == 1.0
    assert extract_answers("<answer>18</answer><think>x</think>").format_score == 0.5
    assert extract_answers("text <answer>18").candidates == ()


@pytest.mark.parametrize(
    ("text", "value", "holds"),
    [
        ("5 + 2 = 7", Fraction(7), True),
        ("the final answer is 120 - 39 = 81", Fraction(81), True),
        ("4 + 5 = 10", Fraction(10), False),  # a false chain states its last value
        ("So, 5 + 2 = 7.", Fraction(7), True),
        ("Jack has 9 - 7 = 2 balls left.", Fraction(2), True),
        ("4 boxes * 6 cookies = 24 cookies", Fraction(24), True),
        ("3 * 4 = 12 + 6 = 18", Fraction(18), False),
        ("2 x 8 = 16", Fraction(16), True),
        ("(2 + 3) \\times 4 \\div 2 = 10", Fraction(10), True),
        ("$\\frac{1}{2} + \\frac{1}{4} = \\frac{3}{4}$", Fraction(3, 4), True),
        ("1,000 + 2,000 = 3,000", Fraction(3000), True),
        ("9 \u2212 7 = 2", Fraction(2), True),
        ("12 + 6 is 18", Fraction(18), True),
        ("x = 5 + 2 = 7", Fraction(7), True),
    ],
)
def test_an_equation_chain_states_its_last_value(text: str, value: Fraction, holds: bool) -> None:
    assert read_chain(text) == Chain(value, holds)


@pytest.mark.parametrize(
    "text",
    [
        "12 + 6",  # no equation: a sum to compute, not a value
        "12 + 6 = 6 + 12",  # ends in a computation
        "19 = 12 + 6",
        "x + 2 = 9",  # a variable
        "2x = 18",
        "18 / 0 = 18",
        "12 + 6 = 18 or 19",
        "12 + 6 = 18, 19",
        "12 + 6 = 18?",
        "2^4 + 2 = 18",  # powers are not read: their size is not bounded by the text's
        "Tom has 18 apples",  # a lone number after words
        "seventeen, or 12 + 6 = 18",  # words leading in name a value
        "__import__('os') = 1",
        "(" * 20 + "18" + ")" * 20 + " = 18",  # nested deeper than 16
        "0 + " * 50 + "18 = 18",  # longer than 200 characters
    ],
)
def test_what_is_not_an_equation_chain(text: str) -> None:
    assert read_chain(text) is None


def test_a_chain_naming_two_values_states_none() -> None:
    for text in ("18 = 19", "18 = 12 + 6 = 19", "5 + 2 = 7 = 8"):
        assert read_chain(text) == NotANumber("multiple_values")


def test_equation_reading_is_bounded() -> None:
    import time

    worst = " * ".join(["9" * 14] * 11) + " = 1"  # about the largest product 200 characters hold
    assert len(worst) <= 200 and read_chain(worst) == Chain(Fraction(1), False)
    started = time.perf_counter()
    for _ in range(200):
        read_chain(worst)
        grade_math("<answer>" + "(" * 2_000 + "18" + ")" * 2_000 + " = 18</answer>", "18")
    assert time.perf_counter() - started < 1.0


def test_grades_say_whether_the_equation_held() -> None:
    held, false = grade_math(T + "<answer>12 + 6 = 18</answer>", "18"), grade_math("4 + 5 = 10", "9")
    assert (held.score, held.details["equation"], held.details["answer_key"]) == (1.0, "holds", "18")
    assert (false.label, false.details["equation"], false.details["answer_key"]) == ("wrong_answer", "false", "10")
    assert grade_math(T + "<answer>18</answer>", "18").details["equation"] is None


def test_an_unmarked_reply_is_read_only_as_its_one_statement_with_a_number() -> None:
    read = extract_answers("2 * 7 = 14\n\nI'm ready to help. What's your next question?")
    assert (read.candidates, read.where, read.format_score) == (("2 * 7 = 14",), "bare", 0.0)
    for reply in (
        "Maybe 6. Maybe 7.",
        "17\n18",
        "Is it seven? Is it 8?",
        "Tom has 5. He gets 2. He has 7.",
        "No idea.",
    ):
        assert extract_answers(reply).candidates == (), reply
    assert extract_answers("1 2 3 4 5 6 7 8 9 10").candidates == ("1 2 3 4 5 6 7 8 9 10",)  # then ambiguous
    assert grade_math("1 2 3 4 5 6 7 8 9 10", "10").label == "ambiguous_answer"


def test_extraction_is_linear_on_pathological_input() -> None:
    import time

    reply = "<answer><think>" * 10_000 + "\\boxed{" * 10_000
    started = time.perf_counter()
    grade_math(reply, "18")
    assert time.perf_counter() - started < 1.0


def test_weights_and_gate_are_recorded() -> None:
    g = grade_math(T + "<answer>19</answer>", "18")
    assert g.score == 0.0 and g.components["format"] == 1.0  # format alone earns nothing
    assert g.weights == {"correctness": 0.8, "format": 0.1, "language": 0.1}
    assert g.required == ("correctness",) and g.grader_version == GRADER.version
    custom = MathGraderConfig(weights={"correctness": 1.0}, required=())
    assert grade_math("18", "18", custom).score == 1.0


def test_grade_round_trips_as_plain_data() -> None:
    g = grade_math(T + "<answer>18</answer>", "18")
    assert Grade.from_dict(g.to_dict()) == g
    with pytest.raises(ValueError, match="score"):
        Grade(1.5, {}, {}, (), "x", "1", None)


def test_every_grader_declares_itself_once() -> None:
    graders = [m.GRADER for m in (math_answer, sql_execution, code_tests, tool_ast, tool_http, tool_state)]
    assert len({g.name for g in graders}) == len(graders)
    configs: list[tuple[GraderSpec, Any]] = [
        (math_answer.GRADER, math_answer.DEFAULT_CONFIG),
        (sql_execution.GRADER, sql_execution.DEFAULT_CONFIG),
        (tool_ast.GRADER, tool_ast.DEFAULT_CONFIG),
        (tool_http.GRADER, tool_http.DEFAULT_CONFIG),
    ]
    for grader, config in configs:  # a config's defaults are the declaration's
        assert dict(config.weights) == dict(grader.weights) and config.required == grader.required
    g = grade_math(T + "<answer>19</answer>", "18")
    assert (g.grader, g.grader_version, g.label) == (GRADER.name, GRADER.version, "wrong_answer")


def test_a_grade_takes_only_a_label_its_grader_declares() -> None:
    spec = GraderSpec(name="demo", version="1", labels=("wrong",), weights={"correctness": 1.0}, required=())
    grade = Grade.weighted(spec, components={"correctness": 0.0}, label="wrong", details={})
    assert (grade.grader, grade.grader_version, grade.required) == ("demo", "1", ())
    assert grade.weights == {"correctness": 1.0}
    with pytest.raises(ValueError, match="undeclared label 'typo'"):
        Grade.weighted(spec, components={"correctness": 0.0}, label="typo", details={})

    def typo_grader() -> Grade:
        return Grade.weighted(spec, components={"correctness": 0.0}, label="typo", details={})

    with pytest.raises(GraderError, match="undeclared label"):  # the grader's failure, never the agent's
        call_grader(typo_grader)
    with pytest.raises(ValueError, match="positive"):
        GraderSpec(name="demo", version="1", labels=(), weights={"correctness": 0.0}, required=())
    with pytest.raises(TypeError):
        spec.weights["correctness"] = 2.0  # type: ignore[index]


@pytest.mark.slow
def test_grader_is_pure_and_thread_safe() -> None:
    replies = [T + f"<answer>{a}</answer>" for a in ("18", "\\sqrt{324}", "19", "18 or 19")]
    expected = [grade_math(r, "18") for r in replies]
    results: list[list[Grade]] = []

    def worker() -> None:  # math-verify's SIGALRM timeout only works on the main thread
        results.append([grade_math(r, "18") for r in replies])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)


def test_adversarial_suite_passes_and_reports_coverage(record_property: Callable[[str, object], None]) -> None:
    report = run_suite("math", lambda case: grade_math(case.reply, case.gold), GRADER)
    record_property("adversarial_report", report.render())  # printed in the run's summary (conftest.py)
    assert report.passed, report.render()
    assert report.label_coverage == 1.0
    assert report.cases >= 80
