"""The multi-turn tool grader: BFCL's per-turn checks on the state the agent left behind.

After each user turn, the turn passes when (as in BFCL's ``multi_turn_checker``):

- the turn's gold is empty (a miss_param / miss_func turn the model should decline:
  BFCL does not check it, and any call the agent makes there shows in the next turn's
  state), or
- the agent made at least one call in the turn, its instances have the same public
  state as a parallel set that ran only the gold calls (``state_mismatch``), and every
  gold result of the turn is among the results of all the agent's calls so far, as a
  multiset and in any order (``missing_results``).

A turn that runs out of its step budget fails (``turn_limit``), as BFCL's force-quit does,
and so does a turn with a reply over ``frostgym.tools.calls.MAX_CALL_TEXT`` characters,
which is not read (``too_long``).
The episode is correct only when every turn passes. ``tool_format`` is 0 when any
attempted call could not be read; a failed turn with unreadable calls is labelled
``malformed_call``, since that is what most likely went wrong.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from frostgym.core.grade import Grade, GraderSpec
from frostgym.core.hashing import canonical_json
from frostgym.tools.bfcl_multi_turn import state_differences
from frostgym.tools.calls import MAX_CALL_TEXT

GRADER = GraderSpec(
    name="tool_state",
    version="1.2.0",  # what each version changed: CHANGELOG.md
    labels=("state_mismatch", "missing_results", "malformed_call", "no_call", "turn_limit", "too_long"),
    # ``turns_passed`` is reported for analysis; it cannot move the score, which the
    # required ``correctness`` gates (BFCL scores an entry all or nothing).
    weights={"correctness": 0.9, "tool_format": 0.1},
    required=("correctness",),
)


@dataclass(frozen=True)
class TurnEvidence:
    """What one finished user turn left: the agent's and the gold's state and results."""

    turn: int
    gold_calls: int
    gold_results: tuple[str, ...]
    gold_state: Mapping[str, Any] = field(repr=False)
    agent_state: Mapping[str, Any] = field(repr=False)
    #: Results of every call the agent made so far, this turn and the earlier ones.
    agent_results_so_far: tuple[str, ...] = field(repr=False)
    agent_calls: int = 0
    malformed: int = 0
    hit_step_limit: bool = False
    #: A reply of the turn was over ``MAX_CALL_TEXT`` characters (it ended the turn unread).
    too_long: bool = False


@dataclass(frozen=True)
class TurnVerdict:
    turn: int
    passed: bool
    label: str | None
    reason: str
    malformed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "passed": self.passed,
            "label": self.label,
            "reason": self.reason,
            "malformed": self.malformed,
        }


def missing_results(gold: Sequence[str], agent: Sequence[str]) -> list[str]:
    """Gold results not found among the agent's (multiset, any order), as BFCL checks."""
    left = Counter(agent)
    missing = []
    for item in gold:
        if left[item] > 0:
            left[item] -= 1
        else:
            missing.append(item)
    return missing


def check_turn(evidence: TurnEvidence) -> TurnVerdict:
    """Whether one user turn passed, and why not."""
    verdict = _check(evidence)
    if not verdict[0] and evidence.malformed and verdict[1] not in ("turn_limit", "too_long"):
        verdict = (False, "malformed_call", f"{verdict[2]}; {evidence.malformed} call(s) could not be read")
    passed, label, reason = verdict
    return TurnVerdict(evidence.turn, passed, label, reason, evidence.malformed)


def _check(evidence: TurnEvidence) -> tuple[bool, str | None, str]:
    if evidence.too_long:
        return False, "too_long", f"a reply was over {MAX_CALL_TEXT:,} characters and was not read"
    if evidence.hit_step_limit:
        return False, "turn_limit", "the turn used its whole step budget without a closing reply"
    if evidence.gold_calls == 0:
        return True, None, "nothing to do in this turn (not checked, as in BFCL)"
    if evidence.agent_calls == 0:
        return False, "no_call", "no function was called in this turn"
    differences = state_differences(evidence.agent_state, evidence.gold_state)
    if differences:
        shown = ", ".join(differences[:10]) + (" …" if len(differences) > 10 else "")
        return False, "state_mismatch", f"state differs from the gold state in {shown}"
    missing = missing_results(evidence.gold_results, evidence.agent_results_so_far)
    if missing:
        return False, "missing_results", f"{len(missing)} gold result(s) not among the agent's results"
    return True, None, "state and results match"


def grade_turn(verdict: TurnVerdict, total_turns: int) -> Grade:
    """The grade of one user turn (``info["turn_grade"]``)."""
    return _grade(
        [verdict], total_turns=1, malformed=verdict.malformed, extra={"turn": verdict.turn, "of": total_turns}
    )


def grade_episode(verdicts: Sequence[TurnVerdict], total_turns: int, malformed: int, final_state: Any = None) -> Grade:
    """The grade of the whole episode: correct only when all ``total_turns`` passed (a turn
    never reached, after a failure or the env's step cap, counts as failed). maj@k votes
    with a hash of ``final_state``, the tool world the agent left behind."""
    # surrogatepass: the state may hold a lone surrogate the agent wrote (the env cleans what it shows).
    state = None if final_state is None else canonical_json(final_state).encode("utf-8", "surrogatepass")
    key = None if state is None else hashlib.sha256(state).hexdigest()[:16]
    return _grade(verdicts, total_turns=total_turns, malformed=malformed, extra={"answer_key": key})


def _grade(verdicts: Sequence[TurnVerdict], *, total_turns: int, malformed: int, extra: dict[str, Any]) -> Grade:
    passed = sum(v.passed for v in verdicts)
    correct = passed == total_turns and len(verdicts) == total_turns
    failed = next((v for v in verdicts if not v.passed), None)
    if failed is not None:
        label: str | None = failed.label
    elif not correct:
        label = "turn_limit"  # the episode ran out of steps before its last turn
    elif malformed:
        label = "malformed_call"
    else:
        label = None
    components = {
        "correctness": 1.0 if correct else 0.0,
        "turns_passed": passed / total_turns if total_turns else 0.0,
        "tool_format": 0.0 if malformed else 1.0,
    }
    details: dict[str, Any] = {
        **extra,
        "turns_total": total_turns,
        "turns_played": len(verdicts),
        "turns_passed": passed,
        "malformed_calls": malformed,
        "turns": [v.to_dict() for v in verdicts],
    }
    if failed is not None:
        details["first_failure"] = failed.to_dict()
    return Grade.weighted(GRADER, components=components, label=label, details=details)
