"""The LLM-judge grader (``llm_judge``): a model's verdict on replies no rule can check.

Some replies (an explanation, a summary, an email to a customer) have no answer a rule can
compare with. A judge model reads the reply against a rubric and says, criterion by
criterion, whether it meets it. The judge is called through the frozen model layer
(``frostgym.models.FrozenModel``), so a judged card replays from the judge's cache like any
other episode, with no model loaded.

Rubric grading (``judge_rubric``): the judge is shown the rubric (each criterion's name and
description), the question when there is one, and the text to judge, and must answer with
exactly one JSON object naming every criterion once, each ``"yes"`` or ``"no"``
(``parse_verdict``: surrounding whitespace and one Markdown code fence around the object are
allowed, nothing else). Components: one per criterion (1 for ``yes``) and ``judge``
(required): 1 when the weighted share of criteria met reaches the rubric's threshold. The
score is that share when ``judge`` is 1 and 0 otherwise; passed means ``judge`` is 1.

Pairwise grading (``judge_pairwise``): the judge sees two replies to one question as "A" and
"B", in an order drawn from the episode's seed (``pairwise_swapped``), and answers exactly
``A``, ``B`` or ``tie``. The verdict is mapped back to the original order and scores
``reply_a``: 1 when it wins, 0 when it loses, and a tie by the declared ``TiePolicy``
(``"half"``: 0.5, ``"loss"``: 0). Passed means ``reply_a`` won.

A judge that gives no verdict is never a 0 for the agent: an unparseable reply, a replay
miss or a failed call raises ``JudgeError`` with its drop class (``grader_error``,
``replay_miss``, ``infra_error``), and a runner files the episode as a drop of that class.

Every grade's details keep the judge call (``judge_key``, ``judge_model`` (the pin),
``judge_request``, ``judge_reply``: the raw verdict text, ``judge_source``), so a card
stores every judge call and its reply (``ModelCache.from_replies`` serves them again). The
prompt templates are part of the grader: a change to them is a new ``GRADER.version``.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from frostgym.core.errors import JudgeError, RubricError
from frostgym.core.grade import SAFETY, Grade, GraderSpec
from frostgym.core.hashing import sha256_json
from frostgym.core.seeding import derive_random
from frostgym.models.frozen import CallOutcome, FrozenModel

GRADER = GraderSpec(
    name="llm_judge",
    version="1.0.0",  # the prompt templates and the verdict formats below; what each version changed: CHANGELOG.md
    labels=(
        "judge_fail",  # rubric: the weighted share of criteria met is below the threshold
        "criteria_missed",  # rubric: passed, but some criterion was not met
        "pairwise_loss",  # pairwise: the other reply won
        "pairwise_tie",  # pairwise: a tie
    ),
    weights={"judge": 1.0},
    required=("judge",),
)
#: The component every judge grade carries: 1 when the judge passes the reply.
JUDGE = "judge"
#: How a pairwise tie scores: ``"half"`` 0.5, ``"loss"`` 0 (either way a tie is not passed).
TiePolicy = Literal["half", "loss"]
TIE_POLICIES: tuple[TiePolicy, ...] = ("half", "loss")
#: The values a criterion's verdict takes.
YES, NO = "yes", "no"
#: The pairwise verdicts, as the judge writes them (``tie`` in any case).
PairwiseVerdict = Literal["A", "B", "tie"]

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)

RUBRIC_SYSTEM = (
    "You are a strict grader. You judge a reply against a rubric, criterion by criterion, "
    "and answer with one JSON object and nothing else."
)
RUBRIC_TEMPLATE = """Rubric: {name}

Criteria:
{criteria}
{question}
Reply to judge:
<<<
{text}
>>>

For each criterion, decide whether the reply meets it. Answer with exactly one JSON object whose \
keys are the criterion names above, each exactly once, and whose values are "yes" or "no", for \
example:
{example}
Write nothing else."""
PAIRWISE_SYSTEM = "You are a strict grader. You compare two replies to one question and name the better one."
PAIRWISE_TEMPLATE = """Question:
<<<
{question}
>>>

Reply A:
<<<
{first}
>>>

Reply B:
<<<
{second}
>>>

Which reply answers the question better? Answer with exactly one word: A, B or tie. Write nothing else."""


@dataclass(frozen=True)
class Criterion:
    """One thing the judge checks: its ``name`` (the key of the verdict object), what it
    means (``description``, shown to the judge) and its ``weight`` (positive, finite)."""

    name: str
    description: str
    weight: float = 1.0


@dataclass(frozen=True)
class Rubric:
    """What the judge grades a reply against: a ``name``, ``criteria`` (at least one, names
    unique, none named ``judge`` or ``safety``), and ``threshold``, the weighted share of
    criteria a reply must meet to pass, in (0, 1]. Raises ``RubricError`` otherwise."""

    name: str
    criteria: tuple[Criterion, ...]
    threshold: float = 1.0

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise RubricError("a rubric needs a name")
        if not self.criteria:
            raise RubricError(f"rubric {self.name!r} has no criteria")
        names = [c.name for c in self.criteria]
        for criterion in self.criteria:
            if not criterion.name.strip() or criterion.name != criterion.name.strip():
                raise RubricError(f"rubric {self.name!r}: a criterion name must be non-empty, without outer spaces")
            if criterion.name in (JUDGE, SAFETY):
                raise RubricError(f"rubric {self.name!r}: {criterion.name!r} is a component name frostgym keeps")
            if names.count(criterion.name) > 1:
                raise RubricError(f"rubric {self.name!r}: criterion {criterion.name!r} is named twice")
            if not criterion.description.strip():
                raise RubricError(f"rubric {self.name!r}: criterion {criterion.name!r} has no description")
            if not (math.isfinite(criterion.weight) and criterion.weight > 0):
                raise RubricError(f"rubric {self.name!r}: criterion {criterion.name!r} needs a positive weight")
        if not (0.0 < self.threshold <= 1.0):
            raise RubricError(f"rubric {self.name!r}: threshold must be in (0, 1], got {self.threshold}")

    def to_dict(self) -> dict[str, Any]:
        """The rubric as JSON data (what ``sha256`` hashes)."""
        return {
            "name": self.name,
            "threshold": self.threshold,
            "criteria": [{"name": c.name, "description": c.description, "weight": c.weight} for c in self.criteria],
        }

    @property
    def sha256(self) -> str:
        """SHA-256 of the rubric's canonical JSON: grades name the rubric they were judged by."""
        return sha256_json(self.to_dict())


def load_rubric(path: Path) -> Rubric:
    """The rubric in the TOML file at ``path``: top-level ``name`` (string) and ``threshold``
    (number, default 1.0), and one ``[[criteria]]`` table per criterion with ``name``,
    ``description`` and ``weight`` (number, default 1.0). Any other key is refused. Raises
    ``RubricError`` naming the file for a file that is missing, is not TOML, or does not
    make a ``Rubric``."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise RubricError(f"{path}: cannot read the rubric ({error.strerror or error})") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise RubricError(f"{path}: not TOML: {error}") from error
    try:
        return rubric_from_dict(data)
    except RubricError as error:
        raise RubricError(f"{path}: {error}") from error


def rubric_from_dict(data: Mapping[str, Any]) -> Rubric:
    """The rubric ``data`` describes, in ``load_rubric``'s format (``Rubric.to_dict``'s too).
    Raises ``RubricError`` for a missing, unknown or mistyped key."""
    _only_keys(data, {"name", "threshold", "criteria"}, "the rubric")
    name = data.get("name")
    if not isinstance(name, str):
        raise RubricError("'name' must be a string")
    threshold = _number(data.get("threshold", 1.0), "'threshold'")
    raw = data.get("criteria")
    if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
        raise RubricError("'criteria' must be a list of tables ([[criteria]] with name, description, weight)")
    criteria = []
    for number, entry in enumerate(raw, start=1):
        where = f"criterion {number}"
        _only_keys(entry, {"name", "description", "weight"}, where)
        if not isinstance(entry.get("name"), str) or not isinstance(entry.get("description"), str):
            raise RubricError(f"{where}: 'name' and 'description' must be strings")
        criteria.append(Criterion(entry["name"], entry["description"], _number(entry.get("weight", 1.0), where)))
    return Rubric(name, tuple(criteria), threshold)


def _only_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise RubricError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RubricError(f"{where}: a number is needed, got {value!r}")
    return float(value)


# -- prompts and strict verdicts ---------------------------------------------------------------


def rubric_messages(rubric: Rubric, text: str, *, question: str | None = None) -> list[dict[str, str]]:
    """The judge's chat messages for ``text`` (and the ``question`` it answers, when given)
    under ``rubric``: the system message and the prompt (``RUBRIC_TEMPLATE``)."""
    criteria = "\n".join(f"- {json.dumps(c.name)}: {c.description}" for c in rubric.criteria)
    example = json.dumps({c.name: YES if i % 2 == 0 else NO for i, c in enumerate(rubric.criteria)})
    shown = "" if question is None else f"\nQuestion:\n<<<\n{question}\n>>>\n"
    prompt = RUBRIC_TEMPLATE.format(name=rubric.name, criteria=criteria, question=shown, text=text, example=example)
    return [{"role": "system", "content": RUBRIC_SYSTEM}, {"role": "user", "content": prompt}]


def _unfenced(reply: str) -> str:
    """``reply`` without surrounding whitespace and without one Markdown code fence around it."""
    stripped = reply.strip()
    fenced = _FENCE.match(stripped)
    return fenced.group("body").strip() if fenced else stripped


def parse_verdict(reply: str, rubric: Rubric) -> dict[str, bool]:
    """Each criterion's verdict (True for ``yes``) from the judge's ``reply``, read strictly:
    the reply must be one JSON object, optionally wrapped in whitespace and one Markdown code
    fence (three backticks, an optional language tag, a newline; closing backticks), whose
    keys are exactly the rubric's criterion names, each once, and whose values are the
    strings ``"yes"`` or ``"no"`` (lowercase). Anything else (prose around the object, a
    missing, unknown or repeated criterion, another value) raises ``ValueError`` saying what."""
    body = _unfenced(reply)
    try:
        pairs = json.loads(body, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ValueError(f"the verdict is not one JSON object: {error.msg} at character {error.pos}") from error
    if not isinstance(pairs, _Pairs):
        raise ValueError(f"the verdict must be a JSON object, not {type(pairs).__name__}")
    names = [c.name for c in rubric.criteria]
    verdict: dict[str, bool] = {}
    for key, value in pairs.items:
        if key not in names:
            raise ValueError(f"the verdict names {key!r}, which is no criterion of the rubric")
        if key in verdict:
            raise ValueError(f"the verdict names {key!r} twice")
        if value not in (YES, NO):
            raise ValueError(f'criterion {key!r} must be "yes" or "no", not {value!r}')
        verdict[key] = value == YES
    missing = [name for name in names if name not in verdict]
    if missing:
        raise ValueError(f"the verdict lacks criterion {missing[0]!r}")
    return verdict


@dataclass(frozen=True)
class _Pairs:
    """A JSON object as its key-value pairs in order (so a repeated key is seen)."""

    items: tuple[tuple[str, Any], ...]


def _pairs(items: list[tuple[str, Any]]) -> _Pairs:
    return _Pairs(tuple(items))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def pairwise_messages(question: str, first: str, second: str) -> list[dict[str, str]]:
    """The judge's chat messages comparing ``first`` (shown as A) and ``second`` (as B)."""
    prompt = PAIRWISE_TEMPLATE.format(question=question, first=first, second=second)
    return [{"role": "system", "content": PAIRWISE_SYSTEM}, {"role": "user", "content": prompt}]


def parse_pairwise(reply: str) -> PairwiseVerdict:
    """The pairwise verdict in the judge's ``reply``, read strictly: after stripping
    surrounding whitespace (and one Markdown code fence), exactly ``A``, ``B`` or ``tie``
    (``tie`` in any case; ``A`` and ``B`` upper case). Anything else raises ``ValueError``."""
    body = _unfenced(reply)
    if body in ("A", "B"):
        return "A" if body == "A" else "B"
    if body.lower() == "tie":
        return "tie"
    shown = body if len(body) <= 60 else body[:57] + "..."
    raise ValueError(f"the verdict must be exactly A, B or tie, not {shown!r}")


def pairwise_swapped(seed: int) -> bool:
    """Whether the judge is shown ``reply_b`` first (as A): a pure function of the
    episode's ``seed`` (``derive_random``), true for about half of all seeds, so a judge that
    prefers the first position favours neither side."""
    return derive_random("llm_judge.pairwise.order", seed).random() < 0.5


# -- grading -----------------------------------------------------------------------------------


def _answer(outcome: CallOutcome) -> str:
    """The judge's reply, or ``JudgeError`` with the call's drop class when there is none."""
    if outcome.reply is None:
        drop_class = outcome.drop_class or "infra_error"
        raise JudgeError(f"the judge gave no reply ({drop_class}): {outcome.error}", drop_class, key=outcome.key)
    return outcome.reply


def _call_details(
    model: FrozenModel, messages: Sequence[Mapping[str, str]], seed: int, outcome: CallOutcome
) -> dict[str, Any]:
    return {
        "judge_key": outcome.key,
        "judge_model": dict(model.pin),
        "judge_request": model.prepare(messages, seed=seed).request(),
        "judge_reply": outcome.reply,
        "judge_source": outcome.source,
        "prompt_version": GRADER.version,
    }


def _unparseable(error: ValueError, outcome: CallOutcome) -> JudgeError:
    reply = outcome.reply or ""
    shown = reply if len(reply) <= 120 else reply[:117] + "..."
    return JudgeError(
        f"the judge's verdict does not parse ({error}); call {outcome.key[:16]} replied {shown!r}",
        "grader_error",
        key=outcome.key,
        reply=outcome.reply,
    )


def judge_rubric(rubric: Rubric, text: str, model: FrozenModel, *, seed: int, question: str | None = None) -> Grade:
    """The judge's grade of ``text`` (a reply, or a transcript rendered as text) under
    ``rubric``, with the ``question`` it answers shown when given. ``seed`` is the episode's
    judge seed (it keys the call only when the model samples).

    Components: each criterion (1 when met) and ``judge`` (required, 1 when the weighted
    share met reaches ``rubric.threshold``); weights are the criteria's. Label: None at a
    full score, ``criteria_missed`` when passed with some criterion unmet, else
    ``judge_fail``. Details: ``kind`` ("rubric"), ``rubric``, ``rubric_sha256``,
    ``threshold``, ``share``, ``verdict`` (criterion -> "yes"/"no") and the judge call
    (see the module docstring).

    Raises ``JudgeError``: ``grader_error`` when the reply is not a verdict
    (``parse_verdict``), ``replay_miss`` or ``infra_error`` when the call gave no reply."""
    messages = rubric_messages(rubric, text, question=question)
    outcome = model.call(messages, seed=seed)
    reply = _answer(outcome)
    try:
        verdict = parse_verdict(reply, rubric)
    except ValueError as error:
        raise _unparseable(error, outcome) from error
    weights = {c.name: c.weight for c in rubric.criteria}
    share = sum(weights[name] for name, met in verdict.items() if met) / sum(weights.values())
    passed = share >= rubric.threshold - 1e-12
    components = {name: float(verdict[name]) for name in weights} | {JUDGE: float(passed)}
    label = None if all(verdict.values()) else ("criteria_missed" if passed else "judge_fail")
    details = {
        "kind": "rubric",
        "rubric": rubric.name,
        "rubric_sha256": rubric.sha256,
        "threshold": rubric.threshold,
        "share": round(share, 12),
        "verdict": {name: YES if verdict[name] else NO for name in weights},
        **_call_details(model, messages, seed, outcome),
    }
    return Grade.weighted(GRADER, components=components, label=label, details=details, weights=weights)


def judge_pairwise(
    question: str, reply_a: str, reply_b: str, model: FrozenModel, *, seed: int, tie_policy: TiePolicy = "half"
) -> Grade:
    """The judge's grade of ``reply_a`` against ``reply_b`` as answers to ``question``.

    The judge sees them in the order ``pairwise_swapped(seed)`` draws (details ``swapped``:
    True when ``reply_b`` was shown first, as A); its verdict (``parse_pairwise``) is mapped
    back to the original order (details ``shown_verdict`` as the judge wrote it, ``winner``:
    "a", "b" or "tie"). The one component, ``judge`` (required), is 1 when ``reply_a`` wins,
    0 when it loses, and for a tie 0.5 under ``tie_policy="half"`` and 0 under ``"loss"``;
    passed means ``reply_a`` won. Labels: ``pairwise_loss``, ``pairwise_tie``.

    Raises ``ValueError`` for an unknown ``tie_policy``, and ``JudgeError`` as
    ``judge_rubric`` does."""
    if tie_policy not in TIE_POLICIES:
        raise ValueError(f"unknown tie policy {tie_policy!r}; one of {', '.join(TIE_POLICIES)}")
    swapped = pairwise_swapped(seed)
    first, second = (reply_b, reply_a) if swapped else (reply_a, reply_b)
    messages = pairwise_messages(question, first, second)
    outcome = model.call(messages, seed=seed)
    reply = _answer(outcome)
    try:
        shown = parse_pairwise(reply)
    except ValueError as error:
        raise _unparseable(error, outcome) from error
    winner = "tie" if shown == "tie" else ("a" if (shown == "A") != swapped else "b")
    value = {"a": 1.0, "b": 0.0, "tie": 0.5 if tie_policy == "half" else 0.0}[winner]
    label = {"a": None, "b": "pairwise_loss", "tie": "pairwise_tie"}[winner]
    details = {
        "kind": "pairwise",
        "swapped": swapped,
        "shown_verdict": shown,
        "winner": winner,
        "tie_policy": tie_policy,
        **_call_details(model, messages, seed, outcome),
    }
    return Grade.weighted(GRADER, components={JUDGE: value}, label=label, details=details)
