"""The one episode record type, and its twin for episodes that were not scored.

Envs do not build these (their ``info`` must stay free of timings to be frozen); the
runner does, adding what only it can see: agent traces, seeds it handed out and
wall-clock times. Replay and regrade read the same records back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from frostgym.core.messages import Action, Message, Observation

#: Why an episode was not scored normally. Closed: views and tests rely on the list.
DropClass = Literal[
    "agent_error",  # the policy raised or returned an error instead of an action
    "grader_error",  # the grader raised (our bug, not the agent's)
    "infra_error",  # env construction or an unexpected env exception
    "sandbox_timeout",  # untrusted code hit its time limit
    "sandbox_oom",  # untrusted code hit its memory limit
    "replay_miss",  # a replay agent had no recorded action for this step
    "skipped",  # the runner chose not to run it (e.g. dropped in the card being regraded)
    "cancelled",  # the run was stopped on purpose (``max_drops``) before this episode ran
]
DROP_CLASSES: tuple[DropClass, ...] = (
    "agent_error",
    "grader_error",
    "infra_error",
    "sandbox_timeout",
    "sandbox_oom",
    "replay_miss",
    "skipped",
    "cancelled",
)
CountedAs = Literal["failure", "excluded"]
#: How the ``errors_as_failures`` views count each drop: every error is a failed
#: sample (the pessimistic bound); episodes that never ran are left out. The
#: ``errors_excluded`` views leave every drop out.
COUNTED_AS: dict[DropClass, CountedAs] = {
    name: ("excluded" if name in ("skipped", "cancelled") else "failure") for name in DROP_CLASSES
}
#: Classes worth another attempt from reset: the others are deterministic, so a retry
#: would fail the same way.
RETRYABLE: frozenset[DropClass] = frozenset({"agent_error", "infra_error"})
Stage = Literal["env", "reset", "agent", "step", "grade", "runner"]


@dataclass
class ObservationDelta:
    """The observation after a step as an edit of the one before it: keep the first
    ``keep`` messages, then append ``new``. Conversations grow by appending, so this
    stores each message once instead of the whole history at every step."""

    keep: int
    new: list[Message]

    @staticmethod
    def between(before: Observation, after: Observation) -> ObservationDelta:
        keep = 0
        for old, now in zip(before, after, strict=False):
            if old != now:
                break
            keep += 1
        return ObservationDelta(keep, list(after[keep:]))

    def apply(self, before: Observation) -> Observation:
        return [*before[: self.keep], *self.new]


@dataclass
class StepRecord:
    turn: int
    agent_seed: int  # the sampling seed handed to the agent for this call
    action: Action  # exactly what the agent returned, before any env coercion
    agent: dict[str, Any]  # prompt/completion tokens, finish reason, logprobs, ...
    tool_calls: list[dict[str, Any]]  # as the env parsed them from the action
    tool_results: list[dict[str, Any]]  # what each call returned
    grade: dict[str, Any] | None  # the final grade, or a graded intermediate turn
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]  # the env's info minus the fields above
    observation: ObservationDelta  # the observation after this step
    agent_seconds: float  # this episode's share of the batched agent call
    env_seconds: float


#: ``info`` keys that ``FrozenEnv`` keeps constant through an episode: the episode
#: record holds them once, so step records leave them out.
EPISODE_INFO_KEYS = (
    "task_id",
    "episode_id",
    "env_version",
    "fixture_sha256",
    "task_sha256",
    "split",
    "difficulty",
    "tags",
)


def split_step_info(info: dict[str, Any]) -> tuple[dict[str, Any], list[Any], list[Any], dict[str, Any] | None]:
    """(rest of info, tool calls, tool results, grade) from an env's step ``info``: the
    one place that decides which info fields a step record lifts out or leaves out, for
    both the runner and replay."""
    rest = {k: v for k, v in info.items() if k not in EPISODE_INFO_KEYS}
    calls = rest.pop("tool_calls", [])
    results = rest.pop("tool_results", [])
    grade = rest.pop("grade", None)
    turn_grade = rest.pop("turn_grade", None)
    return rest, calls, results, grade if grade is not None else turn_grade


@dataclass
class EpisodeRecord:
    """A completed episode: the full trajectory and its grade."""

    plan_id: str
    episode_id: str
    env_id: str
    task_id: str
    sample: int
    split: str
    difficulty: str | None
    tags: list[str]
    seed: int  # the seed passed to env.reset
    seed_derivation: list[str | int]  # the derive_seed parts that gave ``seed``
    env_version: str
    fixture_sha256: str
    task_sha256: str
    observation: Observation  # at reset
    steps: list[StepRecord] = field(default_factory=list)
    reward: float = 0.0
    grade: dict[str, Any] | None = None
    attempts: int = 1
    started_at: float = 0.0  # unix time
    wall_seconds: float = 0.0


@dataclass
class DropRecord:
    """An episode that was not scored normally, with what is known of it: where it
    failed, why, the partial trajectory, and how views count it."""

    plan_id: str
    env_id: str
    task_id: str
    sample: int
    difficulty: str | None
    tags: list[str]
    seed: int
    seed_derivation: list[str | int]
    drop_class: DropClass
    counted_as: CountedAs
    stage: Stage
    error: str  # one line
    traceback: str | None
    attempts: int
    earlier_errors: list[str] = field(default_factory=list)  # one line per failed earlier attempt
    episode_id: str | None = None  # None when the episode never reset
    observation: Observation = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    started_at: float = 0.0
    wall_seconds: float = 0.0
