"""A trainer's per-step log: KL to the reference and policy entropy per step, and two flags.

Why: a checkpoint's card says what the policy does; the trainer's log says how it got there.
Two failures of RL fine-tuning show in the log before they show in a card: the policy's
entropy collapsing (it stops exploring: every sample of a group is the same reply, the
advantages vanish and learning stalls) and the KL to the reference model blowing up (the
policy has run away from the model it started as, which is where reward hacking and broken
language live). ``read_training_log`` reads TRL-style logs into typed steps;
``training_flags`` applies the rules below; ``training_diagnostics`` does both, and
``frostgym trend --training-log`` and ``frostgym report --training-log`` show the result.

Inputs: a JSONL file with one object per step (``steps.jsonl`` as ``examples/grpo_math.py``
writes it: ``step``, ``reward``, ``kl`` when ``--beta`` > 0, ``entropy``, ``loss``, ...), or
a ``.json`` file holding TRL's ``log_history`` (``trainer_state.json`` in a checkpoint, or the
example's ``summary.json``), or a directory holding either (``steps.jsonl`` first). Values are
TRL's: ``kl`` is the mean per-token KL estimate to the reference (nats/token), ``entropy``
the mean per-token entropy of the policy on its completions (nats/token).

The rules (each threshold an argument of ``TrainingRules``, defaults below). A metric's
*trailing mean* at a step is the mean of its last ``window`` (5) finite values up to and
including that step; it exists from the step that brings the ``window``-th value.

- **Entropy collapse** at the first step where the trailing mean entropy falls below
  ``entropy_fraction`` (0.1) times the *baseline* (the mean of the first ``window`` entropy
  values, the policy before training moved it), or below ``entropy_floor`` (0.05 nats/token)
  whatever the baseline. A tenth of where it started, averaged over five steps, is far below
  the step-to-step noise of a healthy run (the committed ``benchmarks/results/grpo-l1`` run's
  trailing mean never goes below 0.6 of its baseline).
- **KL blow-up** at the first step where the KL is not finite, or its trailing mean exceeds
  ``kl_max`` (1.0 nats/token: an order of magnitude above what a GRPO run with a KL penalty
  normally reaches), or the trailing mean is at least ``kl_growth_floor`` (0.1 nats/token)
  and more than ``kl_growth`` (10) times the mean of the ``window`` values before it. The
  floor keeps the first steps, where KL grows from exactly 0 by construction, from tripping
  the growth rule. A log without ``kl`` (``--beta 0``: no reference model) raises no KL flag.

Each flag is raised once, at the first step its rule holds. Non-finite entropy values (and
the non-finite KL that raises the flag) are left out of the means.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from frostgym.core.errors import TrainingLogError

#: The per-step keys read (TRL's names); any other key in a step is ignored.
STEP_KEYS = ("reward", "kl", "entropy", "loss")
#: Looked for, in this order, when the log given is a directory.
LOG_FILES = ("steps.jsonl", "trainer_state.json")
#: Display windows: at most this many rows, however long the run.
MAX_WINDOWS = 20

FlagKind = Literal["entropy_collapse", "kl_blowup"]


@dataclass(frozen=True)
class TrainingStep:
    """One logged optimizer step: TRL's values, None where the log does not carry them."""

    step: int
    reward: float | None = None
    kl: float | None = None
    entropy: float | None = None
    loss: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, **{key: _finite(getattr(self, key)) for key in STEP_KEYS}}


@dataclass(frozen=True)
class TrainingRules:
    """The thresholds of the two flags (see the module's docstring for the rules).

    Raises ValueError on a window below 1, a fraction outside (0, 1), or a negative floor,
    maximum or growth factor at or below 1."""

    window: int = 5
    entropy_fraction: float = 0.1
    entropy_floor: float = 0.05
    kl_max: float = 1.0
    kl_growth: float = 10.0
    kl_growth_floor: float = 0.1

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window must be at least 1, got {self.window}")
        if not 0 < self.entropy_fraction < 1:
            raise ValueError(f"entropy_fraction must be in (0, 1), got {self.entropy_fraction}")
        if self.entropy_floor < 0 or self.kl_max <= 0 or self.kl_growth_floor < 0:
            raise ValueError("entropy_floor and kl_growth_floor must be at least 0, kl_max above 0")
        if self.kl_growth <= 1:
            raise ValueError(f"kl_growth must be above 1, got {self.kl_growth}")


@dataclass(frozen=True)
class TrainingFlag:
    """A rule that held: its kind, the first step it held at, and why in one line."""

    kind: FlagKind
    step: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrainingWindow:
    """Consecutive logged steps ``first``..``last`` (``steps`` of them): the means of their
    finite values (None where none has one) and the flags raised inside."""

    first: int
    last: int
    steps: int
    reward: float | None
    kl: float | None
    entropy: float | None
    flags: tuple[TrainingFlag, ...]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "flags": [flag.kind for flag in self.flags]}


@dataclass(frozen=True)
class TrainingLog:
    """A read log, the rules applied to it and the flags they raised."""

    source: str
    steps: tuple[TrainingStep, ...]
    rules: TrainingRules = field(default_factory=TrainingRules)
    flags: tuple[TrainingFlag, ...] = ()

    def windows(self) -> list[TrainingWindow]:
        """The steps in consecutive windows of ``rules.window`` steps, or of more where that
        would give over ``MAX_WINDOWS`` rows (the last window may be shorter)."""
        size = max(self.rules.window, math.ceil(len(self.steps) / MAX_WINDOWS))
        windows = []
        for start in range(0, len(self.steps), size):
            chunk = self.steps[start : start + size]
            first, last = chunk[0].step, chunk[-1].step
            windows.append(
                TrainingWindow(
                    first=first,
                    last=last,
                    steps=len(chunk),
                    reward=_mean([s.reward for s in chunk]),
                    kl=_mean([s.kl for s in chunk]),
                    entropy=_mean([s.entropy for s in chunk]),
                    flags=tuple(flag for flag in self.flags if first <= flag.step <= last),
                )
            )
        return windows

    def has(self, metric: Literal["kl", "entropy"]) -> bool:
        """Whether any step logs ``metric``."""
        return any(getattr(step, metric) is not None for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rules": asdict(self.rules),
            "flags": [flag.to_json() for flag in self.flags],
            "windows": [window.to_json() for window in self.windows()],
            "steps": [step.to_json() for step in self.steps],
        }


def training_diagnostics(path: Path, rules: TrainingRules | None = None) -> TrainingLog:
    """Read the log at ``path`` and flag it by ``rules`` (the defaults when None).
    Raises ``TrainingLogError`` as ``read_training_log`` does."""
    rules = rules or TrainingRules()
    steps = read_training_log(path)
    return TrainingLog(source=str(path), steps=steps, rules=rules, flags=tuple(training_flags(steps, rules)))


def read_training_log(path: Path) -> tuple[TrainingStep, ...]:
    """The steps of a JSONL log (one object per line, blank lines skipped), of a ``.json``
    file's ``log_history`` (entries carrying none of ``STEP_KEYS``, such as the run's closing
    summary or an evaluation, are skipped), or of the first of ``LOG_FILES`` in a directory.

    Raises ``TrainingLogError`` naming the file and the line (or entry) for a file that is
    not there, a line that is not a JSON object, a step without a non-negative integer
    ``step``, a value of ``STEP_KEYS`` that is neither a number nor null, steps that do not
    increase, or a log with no step at all."""
    path = Path(path)
    if path.is_dir():
        found = next((path / name for name in LOG_FILES if (path / name).is_file()), None)
        if found is None:
            raise TrainingLogError(f"{path}: no training log in it (looked for {', '.join(LOG_FILES)})")
        path = found
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TrainingLogError(f"{path}: cannot read the training log: {error}") from None
    entries = _history(path, text) if path.suffix == ".json" else _lines(path, text)
    steps: list[TrainingStep] = []
    for where, entry in entries:
        step = _step(path, where, entry)
        if steps and step.step <= steps[-1].step:
            raise TrainingLogError(
                f"{path}: {where}: step {step.step} after step {steps[-1].step} (steps must increase)"
            )
        steps.append(step)
    if not steps:
        raise TrainingLogError(f"{path}: the training log holds no step")
    return tuple(steps)


def training_flags(steps: Sequence[TrainingStep], rules: TrainingRules | None = None) -> list[TrainingFlag]:
    """The flags ``rules`` raise on ``steps`` (in step order), each kind at most once: at the
    first step its rule holds (the module's docstring states the rules)."""
    rules = rules or TrainingRules()
    flags = [flag for flag in (_entropy_collapse(steps, rules), _kl_blowup(steps, rules)) if flag is not None]
    return sorted(flags, key=lambda flag: flag.step)


def _entropy_collapse(steps: Sequence[TrainingStep], rules: TrainingRules) -> TrainingFlag | None:
    w = rules.window
    seen: list[tuple[int, float]] = []
    for step in steps:
        if step.entropy is None or not math.isfinite(step.entropy):
            continue
        seen.append((step.step, step.entropy))
        if len(seen) < w:
            continue
        baseline = sum(value for _, value in seen[:w]) / w
        recent = seen[-w:]
        mean = sum(value for _, value in recent) / w
        span = _span(recent)
        if mean < rules.entropy_fraction * baseline:
            why = (
                f"mean entropy of {span} {mean:.3g} is below {rules.entropy_fraction:g} x the first "
                f"{w} steps' {baseline:.3g}"
            )
        elif mean < rules.entropy_floor:
            why = f"mean entropy of {span} {mean:.3g} is below the floor {rules.entropy_floor:g} nats/token"
        else:
            continue
        return TrainingFlag("entropy_collapse", step.step, f"entropy collapse at step {step.step}: {why}")
    return None


def _kl_blowup(steps: Sequence[TrainingStep], rules: TrainingRules) -> TrainingFlag | None:
    w = rules.window
    seen: list[tuple[int, float]] = []
    for step in steps:
        if step.kl is None:
            continue
        if not math.isfinite(step.kl):
            return TrainingFlag("kl_blowup", step.step, f"KL blow-up at step {step.step}: KL is {step.kl}")
        seen.append((step.step, step.kl))
        if len(seen) < w:
            continue
        recent = seen[-w:]
        mean = sum(value for _, value in recent) / w
        span = _span(recent)
        if mean > rules.kl_max:
            why = f"mean KL of {span} {mean:.3g} is above {rules.kl_max:g} nats/token"
        elif len(seen) >= 2 * w and mean >= rules.kl_growth_floor:
            before = seen[-2 * w : -w]
            earlier = sum(value for _, value in before) / w
            if mean <= rules.kl_growth * earlier:
                continue
            why = f"mean KL of {span} {mean:.3g} is over {rules.kl_growth:g} x that of {_span(before)} {earlier:.3g}"
        else:
            continue
        return TrainingFlag("kl_blowup", step.step, f"KL blow-up at step {step.step}: {why}")
    return None


def _span(values: Sequence[tuple[int, float]]) -> str:
    return f"steps {values[0][0]}-{values[-1][0]}"


def _lines(path: Path, text: str) -> list[tuple[str, Any]]:
    entries: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as error:
            raise TrainingLogError(f"{path}: line {number}: not JSON: {error.msg} (column {error.colno})") from None
    return entries


def _history(path: Path, text: str) -> list[tuple[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TrainingLogError(f"{path}: not JSON: {error.msg} (line {error.lineno}, column {error.colno})") from None
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        raise TrainingLogError(f"{path}: a .json training log needs a 'log_history' list (TRL's trainer_state.json)")
    return [
        (f"log_history[{index}]", entry)
        for index, entry in enumerate(history)
        if not isinstance(entry, dict) or any(key in entry for key in STEP_KEYS)
    ]


def _step(path: Path, where: str, entry: Any) -> TrainingStep:
    if not isinstance(entry, dict):
        raise TrainingLogError(f"{path}: {where}: not a JSON object")
    step = entry.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise TrainingLogError(f"{path}: {where}: no non-negative integer 'step' (got {step!r})")
    return TrainingStep(step=step, **{key: _number(path, where, entry, key) for key in STEP_KEYS})


def _number(path: Path, where: str, entry: Mapping[str, Any], key: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TrainingLogError(f"{path}: {where}: {key!r} is not a number (got {value!r})")
    return float(value)


def _mean(values: Sequence[float | None]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: such a value is written as null."""
    return value if value is not None and math.isfinite(value) else None
