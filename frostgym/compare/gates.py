"""Promotion gates: a release rule written as TOML, read into typed gates, judged to a decision.

Why a file and not flags: a release rule is reviewed and versioned beside the training
code, and CI applies the same file to every checkpoint. Every gate names one metric, the
slice it looks at, and one threshold; its kind follows from the threshold it sets:

- ``min`` / ``max``: absolute, on the candidate's value (a view, a cost or a diagnostic),
  judged on the point estimate. With ``significant = true`` they are judged on the
  candidate's own 95% interval (``frostgym.compare.intervals``: Wilson's for a rate view
  whose every task is 0 or 1, else the bootstrap clustered by task): ``min`` passes only
  when the lower bound is at least ``min``, ``max`` only when the upper bound is at most
  ``max``. Views and costs have that interval; a diagnostic or ``private_gap`` does not, and
  its significant gate fails saying so;
- ``max_drop``: a regression against the baseline, on the paired delta. Judged on the point
  estimate (``delta >= -max_drop``); with ``significant = true`` it fails only when the whole
  paired interval lies below ``-max_drop`` (the drop is real, not noise);
- ``min_gain``: an improvement over the baseline, on the paired delta: the point estimate at
  least ``min_gain`` (0 or more); with ``significant = true`` the paired interval's lower bound
  at least ``min_gain`` (the whole interval at or above it: the gain is real);
- ``max_increase``: a cost ratio, ``cand / base - 1`` at most this (0.3 is +30%), on the
  point estimates.

Where confidence is needed to *pass* (``min_gain``, ``min`` or ``max``, each with ``significant``),
a bootstrap interval over fewer than ``views.MIN_TASKS`` tasks is no claim (a percentile
bootstrap over so few clusters undercovers), so the gate fails; ``max_drop`` needs confidence
to *fail* and keeps judging such an interval. Every verdict carries the interval it was judged
on (``GateResult.interval``; none for a point-estimate gate).

``per = "env" | "difficulty" | "tag"`` applies a gate to every member of that slice (one
verdict each, named ``NAME [member]``); ``env = ID`` looks at one env. A metric, slice or
interval the comparison does not have fails its gate with the reason in ``detail``: a release
rule that silently passes on missing data is worse than none. A negative ``min_gain`` is
refused (a tolerated drop is ``max_drop``'s), as is ``significant`` on ``max_increase``.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from frostgym.cards.views import RULE_NAMES, Rule
from frostgym.core.errors import GateFileError

GateKind = Literal["absolute", "regression", "gain", "cost"]
SliceName = Literal["overall", "env", "difficulty", "tag"]
PER_VALUES: tuple[str, ...] = ("env", "difficulty", "tag")
Decision = Literal["promote", "block"]
_THRESHOLDS = ("min", "max", "max_drop", "min_gain", "max_increase")
_KIND: Mapping[str, GateKind] = {
    "min": "absolute",
    "max": "absolute",
    "max_drop": "regression",
    "min_gain": "gain",
    "max_increase": "cost",
}
#: How each interval a verdict can be judged on is named in its output.
PAIRED = "paired bootstrap"
_KEYS = frozenset({"name", "metric", "env", "per", "rule", "significant", *_THRESHOLDS})
#: What a metric that only some comparisons have needs, said when a gate finds none.
_NEEDS: Mapping[str, str] = {
    "cost_per_episode": " (money needs a price table: frostgym compare --prices FILE)",
    **dict.fromkeys(
        ("ttft_seconds_p50", "ttft_seconds_p95", "seconds_per_output_token_p50", "seconds_per_output_token_p95"),
        " (neither card's agent recorded ttft_s/tpot_s: the hf agent does, the openai agent cannot)",
    ),
}


@dataclass(frozen=True)
class Gate:
    """One rule of a gates file, as written (see the module docstring)."""

    name: str
    metric: str
    kind: GateKind
    threshold: float
    #: For absolute gates: True when the value must be at least ``threshold`` (``min``).
    at_least: bool = False
    env: str | None = None
    per: SliceName | None = None
    rule: Rule = "errors_as_failures"
    significant: bool = False


@dataclass(frozen=True)
class Measure:
    """What a comparison knows of one metric on one slice: each side's value, the paired
    delta and its interval where the metric is a view."""

    base: float | None
    cand: float | None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    #: Fewer tasks than ``views.MIN_TASKS`` behind the paired interval: it is no claim.
    too_small: bool = False


@dataclass(frozen=True)
class OwnInterval:
    """The candidate's own 95% interval for a metric of one slice, how it was drawn
    (``"Wilson"`` or ``"bootstrap by task"``) and over how many tasks."""

    low: float
    high: float
    method: str
    tasks: int


class Measured(Protocol):
    """What gates read from a comparison (``frostgym.compare.compare.Comparison``)."""

    def measure(self, metric: str, slice_name: SliceName, key: str, rule: Rule) -> Measure | None:
        """The metric on one slice member (``key`` is "" for overall), or None if unknown."""
        ...

    def slice_keys(self, slice_name: SliceName) -> Sequence[str]:
        """The members of a slice both cards have, in a fixed order."""
        ...

    def cand_interval(self, metric: str, slice_name: SliceName, key: str, rule: Rule) -> OwnInterval | str:
        """The candidate's own 95% interval for the metric on one slice member, or why
        there is none (one line)."""
        ...


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict on one slice member: what was compared with what."""

    name: str
    metric: str
    kind: GateKind
    slice: str
    value: float | None
    threshold: float
    passed: bool
    detail: str
    #: Whether the gate was judged on an interval (``significant = true``).
    significant: bool = False
    #: The 95% interval it was judged on, None for a point estimate or where there is none.
    interval: tuple[float, float] | None = None
    #: How that interval was drawn: ``"paired bootstrap"`` (of the delta), ``"Wilson"`` or
    #: ``"bootstrap by task"`` (of the candidate's value).
    interval_method: str | None = None

    def interval_text(self) -> str:
        """The interval as the gates table prints it beside the verdict: ``[low, high]
        method``, ``point`` for a point-estimate gate, ``none`` where it had none."""
        if self.interval is None:
            return "none" if self.significant else "point"
        low, high = self.interval
        signed = "+" if self.kind in ("regression", "gain") else ""
        return f"[{low:{signed}.3f}, {high:{signed}.3f}] {self.interval_method}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "kind": self.kind,
            "slice": self.slice,
            "value": self.value,
            "threshold": self.threshold,
            "passed": self.passed,
            "detail": self.detail,
            "significant": self.significant,
            "interval": None
            if self.interval is None
            else {"low": self.interval[0], "high": self.interval[1], "method": self.interval_method},
        }


def read_gates(path: Path) -> list[Gate]:
    """The gates of a TOML file: ``[[gate]]`` tables (see ``examples/gates.toml``).
    Raises ``GateFileError`` naming the file and the gate for anything it cannot read:
    an unknown key, no or several thresholds, a threshold that is not a number."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise GateFileError(f"{path}: cannot read gates: {error}") from None
    return parse_gates(data, str(path))


def parse_gates(data: Mapping[str, Any], where: str = "gates") -> list[Gate]:
    """Gates from parsed TOML (``{"gate": [{...}, ...]}``); see ``read_gates``."""
    unknown = set(data) - {"gate"}
    if unknown:
        raise GateFileError(f"{where}: unknown top-level keys {sorted(unknown)}; gates are [[gate]] tables")
    tables = data.get("gate", [])
    if not isinstance(tables, list) or not tables:
        raise GateFileError(f"{where}: no [[gate]] tables")
    gates = [_gate(table, f"{where}: gate {number + 1}") for number, table in enumerate(tables)]
    names = [gate.name for gate in gates]
    if len(set(names)) != len(names):
        raise GateFileError(
            f"{where}: gate names must be unique; repeated: {sorted({n for n in names if names.count(n) > 1})}"
        )
    return gates


def _gate(table: Any, where: str) -> Gate:
    if not isinstance(table, dict):
        raise GateFileError(f"{where}: not a table")
    unknown = set(table) - _KEYS
    if unknown:
        raise GateFileError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    metric = table.get("metric")
    if not isinstance(metric, str) or not metric:
        raise GateFileError(f"{where}: 'metric' must be a non-empty string")
    name = table.get("name", metric)
    if not isinstance(name, str) or not name:
        raise GateFileError(f"{where}: 'name' must be a non-empty string")
    where = f"{where} ({name!r})"
    given = [key for key in _THRESHOLDS if key in table]
    if len(given) != 1:
        raise GateFileError(f"{where}: set exactly one of {', '.join(_THRESHOLDS)} (got {given or 'none'})")
    threshold = table[given[0]]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise GateFileError(f"{where}: {given[0]} must be a finite number, got {threshold!r}")
    if given[0] in ("max_drop", "min_gain", "max_increase") and threshold < 0:
        hint = " (a tolerated drop is max_drop's)" if given[0] == "min_gain" else ""
        raise GateFileError(f"{where}: {given[0]} must be >= 0, got {threshold!r}{hint}")
    env, per = table.get("env"), table.get("per")
    if env is not None and not isinstance(env, str):
        raise GateFileError(f"{where}: 'env' must be an env id string")
    if per is not None and per not in PER_VALUES:
        raise GateFileError(f"{where}: 'per' must be one of {list(PER_VALUES)}, got {per!r}")
    if env is not None and per is not None:
        raise GateFileError(f"{where}: set 'env' or 'per', not both")
    rule = table.get("rule", "errors_as_failures")
    if rule not in RULE_NAMES:
        raise GateFileError(f"{where}: 'rule' must be one of {list(RULE_NAMES)}, got {rule!r}")
    significant = table.get("significant", False)
    if not isinstance(significant, bool):
        raise GateFileError(f"{where}: 'significant' must be true or false")
    kind = _KIND[given[0]]
    if significant and kind == "cost":
        raise GateFileError(f"{where}: 'significant' applies to min, max, max_drop and min_gain, not max_increase")
    return Gate(
        name=name,
        metric=metric,
        kind=kind,
        threshold=float(threshold),
        at_least=given[0] == "min",
        env=env,
        per=per,
        rule=rule,
        significant=significant,
    )


def judge(gates: Sequence[Gate], comparison: Measured) -> tuple[Decision, list[GateResult]]:
    """Every gate's verdicts in file order, and the decision: ``promote`` only when every
    verdict passed."""
    results = [result for gate in gates for result in _judge_gate(gate, comparison)]
    decision: Decision = "promote" if all(r.passed for r in results) else "block"
    return decision, results


def _judge_gate(gate: Gate, comparison: Measured) -> list[GateResult]:
    if gate.per is not None:
        keys = comparison.slice_keys(gate.per)
        if not keys:
            return [_result(gate, gate.per, None, False, f"the cards have no {gate.per} slices")]
        return [_judge_one(gate, comparison, gate.per, key) for key in keys]
    if gate.env is not None:
        return [_judge_one(gate, comparison, "env", gate.env)]
    return [_judge_one(gate, comparison, "overall", "")]


def _judge_one(gate: Gate, comparison: Measured, slice_name: SliceName, key: str) -> GateResult:
    where = "overall" if slice_name == "overall" else f"{slice_name}={key}"
    measure = comparison.measure(gate.metric, slice_name, key, gate.rule)
    if measure is None:
        hint = _NEEDS.get(gate.metric, "")
        return _result(gate, where, None, False, f"no metric {gate.metric!r} on {where}{hint}")
    if gate.kind == "absolute":
        return _judge_absolute(gate, comparison, measure, slice_name, key, where)
    if gate.kind == "cost":
        if measure.base is None or measure.cand is None or measure.base <= 0:
            return _result(gate, where, None, False, "no positive base value to take a ratio to")
        increase = measure.cand / measure.base - 1.0
        return _result(
            gate,
            where,
            increase,
            increase <= gate.threshold,
            f"cand/base - 1 = {increase:+.4g}, at most {gate.threshold:+g}",
        )
    if measure.delta is None:
        return _result(gate, where, None, False, "no paired delta here")
    if gate.kind == "gain":
        return _judge_gain(gate, measure, measure.delta, where)
    if not gate.significant:
        passed = measure.delta >= -gate.threshold
        return _result(
            gate, where, measure.delta, passed, f"delta {measure.delta:+.4g}, allowed drop {gate.threshold:g}"
        )
    if measure.ci_low is None or measure.ci_high is None:
        return _result(
            gate, where, measure.delta, False, "no paired interval here (too few tasks) to judge significance"
        )
    passed = measure.ci_high >= -gate.threshold
    interval = f"[{measure.ci_low:+.4g}, {measure.ci_high:+.4g}]"
    detail = f"delta {measure.delta:+.4g}, 95% CI {interval}, allowed drop {gate.threshold:g}"
    return _result(gate, where, measure.delta, passed, detail, (measure.ci_low, measure.ci_high), PAIRED)


def _judge_absolute(
    gate: Gate, comparison: Measured, measure: Measure, slice_name: SliceName, key: str, where: str
) -> GateResult:
    value = measure.cand
    if value is None:
        return _result(gate, where, None, False, "the candidate has no value here")
    need = ">=" if gate.at_least else "<="
    if not gate.significant:
        passed = value >= gate.threshold if gate.at_least else value <= gate.threshold
        return _result(gate, where, value, passed, f"cand {value:.4g}, need {need} {gate.threshold:g}")
    own = comparison.cand_interval(gate.metric, slice_name, key, gate.rule)
    if isinstance(own, str):
        return _result(gate, where, value, False, f"cand {value:.4g}; no interval to judge significance: {own}")
    bound, name = (own.low, "lower") if gate.at_least else (own.high, "upper")
    passed = bound >= gate.threshold if gate.at_least else bound <= gate.threshold
    detail = (
        f"cand {value:.4g}, {own.method} 95% interval [{own.low:.4g}, {own.high:.4g}] over {own.tasks} tasks, "
        f"need {name} bound {need} {gate.threshold:g}"
    )
    return _result(gate, where, value, passed, detail, (own.low, own.high), own.method)


def _judge_gain(gate: Gate, measure: Measure, delta: float, where: str) -> GateResult:
    if not gate.significant:
        return _result(gate, where, delta, delta >= gate.threshold, f"delta {delta:+.4g}, need >= {gate.threshold:+g}")
    if measure.ci_low is None or measure.ci_high is None:
        return _result(gate, where, delta, False, "no paired interval here (too few tasks) to judge significance")
    interval = f"[{measure.ci_low:+.4g}, {measure.ci_high:+.4g}]"
    if measure.too_small:
        detail = f"delta {delta:+.4g}, 95% CI {interval} over too few tasks to be a claim: a gain cannot be shown"
        return _result(gate, where, delta, False, detail, (measure.ci_low, measure.ci_high), PAIRED)
    detail = f"delta {delta:+.4g}, 95% CI {interval}, need lower bound >= {gate.threshold:+g}"
    return _result(
        gate, where, delta, measure.ci_low >= gate.threshold, detail, (measure.ci_low, measure.ci_high), PAIRED
    )


def _result(
    gate: Gate,
    where: str,
    value: float | None,
    passed: bool,
    detail: str,
    interval: tuple[float, float] | None = None,
    method: str | None = None,
) -> GateResult:
    name = gate.name if gate.per is None else f"{gate.name} [{where.split('=', 1)[-1]}]"
    return GateResult(
        name, gate.metric, gate.kind, where, value, gate.threshold, passed, detail, gate.significant, interval, method
    )
