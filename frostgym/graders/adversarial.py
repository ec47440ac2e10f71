"""Adversarial suites: replies a grader must score 0 (``bad``) or must accept (``good``).

Each suite is a JSON file in ``frostgym/fixtures/adversarial/``. A reply is a string
or, for inputs too large to ship, a recipe ``{"prefix", "repeat", "times", "suffix"}``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

from frostgym.core.grade import Grade, GraderSpec

Expectation = Literal["bad", "good"]


@dataclass(frozen=True)
class AdversarialCase:
    id: str
    gold: str
    reply: str
    expect: Expectation
    label: str | None = None  # the failure label a bad case must get, when pinned
    score: float | None = None  # the exact score a good case must get, when pinned
    why: str = ""
    context: dict[str, Any] = field(default_factory=dict)  # grader-specific fields (e.g. the database)


@dataclass
class SuiteReport:
    grader: str
    cases: int
    failures: list[str] = field(default_factory=list)
    labels_seen: Counter[str] = field(default_factory=Counter)
    labels_declared: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def label_coverage(self) -> float:
        declared = set(self.labels_declared)
        return len(declared & set(self.labels_seen)) / len(declared) if declared else 1.0

    def render(self) -> str:
        lines = [
            f"adversarial suite '{self.grader}': {self.cases - len(self.failures)}/{self.cases} cases pass",
            f"label coverage: {self.label_coverage:.0%} of declared labels "
            f"({', '.join(f'{k}={v}' for k, v in sorted(self.labels_seen.items()))})",
        ]
        uncovered = sorted(set(self.labels_declared) - set(self.labels_seen))
        if uncovered:
            lines.append(f"labels never produced: {', '.join(uncovered)}")
        lines.extend(f"FAIL {f}" for f in self.failures)
        return "\n".join(lines)


_CASE_FIELDS = frozenset({"id", "gold", "reply", "expect", "label", "score", "why"})


def _materialise(reply: str | dict[str, Any]) -> str:
    if isinstance(reply, str):
        return reply
    return str(reply.get("prefix", "")) + str(reply["repeat"]) * int(reply["times"]) + str(reply.get("suffix", ""))


def _materialise_replies(key: str, value: Any) -> Any:
    """A multi-step case's ``replies`` may hold recipes too (dicts with ``repeat``)."""
    if key != "replies" or not isinstance(value, list):
        return value
    return [_materialise(r) if isinstance(r, dict) and "repeat" in r else r for r in value]


def load_suite(name: str) -> tuple[str, list[AdversarialCase]]:
    """The grader name and the cases of suite ``name``."""
    path = resources.files("frostgym") / "fixtures" / "adversarial" / f"{name}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    cases = [
        AdversarialCase(
            id=c["id"],
            gold=c["gold"],
            reply=_materialise(c["reply"]),
            expect=c["expect"],
            label=c.get("label"),
            score=c.get("score"),
            why=c.get("why", ""),
            context={k: _materialise_replies(k, v) for k, v in c.items() if k not in _CASE_FIELDS},
        )
        for c in data["cases"]
    ]
    return data["grader"], cases


def run_suite(name: str, grade: Callable[[AdversarialCase], Grade], grader: GraderSpec) -> SuiteReport:
    """Grade every case of suite ``name`` with ``grade`` (which reads what it needs from
    the case: reply, gold, context) and check each expectation; the report's label
    coverage is over ``grader.labels``. Raises ``ValueError`` when the suite is for
    another grader than ``grader`` or has duplicate case ids."""
    suite_grader, cases = load_suite(name)
    if suite_grader != grader.name:
        raise ValueError(f"suite {name!r} is for grader {suite_grader!r}, not {grader.name!r}")
    ids = [c.id for c in cases]
    if len(ids) != len(set(ids)):
        raise ValueError(f"suite {name!r} has duplicate case ids")
    report = SuiteReport(grader=grader.name, cases=len(cases), labels_declared=grader.labels)
    for case in cases:
        result = grade(case)
        if result.label is not None:
            report.labels_seen[result.label] += 1
        problem = _check(case, result)
        if problem:
            report.failures.append(f"{case.id}: {problem}")
    return report


def _check(case: AdversarialCase, result: Grade) -> str | None:
    correctness = result.components.get("correctness", result.score)
    if case.expect == "bad":
        if result.score != 0.0 or correctness != 0.0:
            return f"known-bad reply scored {result.score} (correctness {correctness}, label {result.label})"
        if case.label is not None and result.label != case.label:
            return f"expected label {case.label!r}, got {result.label!r}"
        return None
    if correctness != 1.0:
        return f"known-good reply got correctness {correctness} (label {result.label})"
    if case.score is not None and abs(result.score - case.score) > 1e-9:
        return f"expected score {case.score}, got {result.score}"
    return None
