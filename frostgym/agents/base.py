"""The one agent interface: a batch of requests in, one reply per request out.

Every policy (scripted, Hugging Face, OpenAI-compatible, replay) implements ``act``
over a batch, and says how it wants to be fed (``scheduling``): an in-process model
batches the requests that are ready into one forward pass, so the runner advances its
episodes in turns; a model server batches across requests itself, so the runner sends
each episode's request as soon as that episode needs it and steps the episode as soon as
its own reply arrives (``frostgym.run.runner``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from frostgym.core.episode import Drop, DropClass, TokenTrace
from frostgym.core.messages import Action, Observation


@dataclass(frozen=True)
class AgentRequest:
    """One call for the next action of one episode.

    ``seed`` is the sampling seed for this call, derived by the runner from the
    episode seed and the turn, so sampled policies are reproducible per call.
    ``oracle`` gives privileged access to the gold action; only scripted agents use it.
    ``tools`` are the env's tool schemas, for chat templates that render them.
    """

    observation: Observation
    episode_id: str
    turn: int
    seed: int
    oracle: Callable[[], Action] | None = None
    tools: list[dict[str, Any]] | None = None  # OpenAI-format function schemas the env offers


@dataclass(frozen=True)
class AgentReply:
    """One action, or ``drop`` when the policy could not produce one for this request
    (a server that kept failing, a replay with no recorded action; build it with
    ``failed``). A dropped reply drops its episode only; the env is not stepped with it.

    ``tokens``, when the agent can give them, are the ids the model was fed and generated and
    the completion's logprobs (``TokenTrace``): the runner puts them on the step record as
    they are, with ``prefix_mismatch`` set against the episode's previous step."""

    action: Action
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Why there is no action: how a runner files the episode (stage ``"agent"``).
    drop: Drop | None = None
    #: Whether the runner may try the episode again (``RunOptions.retries``): False when the
    #: request may still be at work on the server (it timed out waiting for the reply), so
    #: that sending it again would only queue a second generation behind the first.
    retryable: bool = True
    tokens: TokenTrace | None = None

    @classmethod
    def failed(
        cls, error: str, drop_class: DropClass = "agent_error", *, retryable: bool = True, **trace: Any
    ) -> AgentReply:
        """The reply for a request the policy could not answer: ``error`` says why (its
        first line is kept), ``drop_class`` how the episode is filed (``replay_miss`` for a
        replay with no recorded action), ``retryable`` whether the episode may be tried
        again, ``trace`` any other field (``extra``, ...)."""
        return cls(action="", drop=Drop(drop_class, "agent", error), retryable=retryable, **trace)

    def trace(self) -> dict[str, Any]:
        """Everything but the action and the tokens, for the step record's ``agent``."""
        return {
            **self.extra,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
        }


#: Called as a model agent works, with the tokens it generated and the replies it finished
#: since the last call: each decoding step's new tokens, then ``(0, rows)`` once a batch's
#: replies are done (the HF agent), or each reply's completion tokens and 1 (the OpenAI
#: agent). It runs on the thread that generates, so it must be cheap and thread-safe.
TokenHook = Callable[[int, int], None]


@runtime_checkable
class CountsTokens(Protocol):
    """An agent that reports the tokens it generates while it generates them, to
    ``on_tokens`` when that is set (None: nothing is counted, nothing changes). The CLI
    sets it to show tokens/s while a batch is still generating: the runner's per-episode
    hook fires only when a whole batch of episodes has its replies."""

    on_tokens: TokenHook | None


#: How a runner feeds an agent. ``"batched"``: one ``act`` call with every request that is
#: ready (an in-process model's forward pass; scripted agents). ``"per_request"``: ``act``
#: with one request at a time, up to ``concurrency`` of them in flight on their own threads,
#: each episode stepped as soon as its reply arrives (a model server, which queues and
#: batches requests itself: one slow reply must not hold the others).
Scheduling = Literal["batched", "per_request"]


def scheduling_of(agent: object) -> Scheduling:
    """How ``agent`` declares it is fed (its ``scheduling`` attribute; ``"batched"`` for an
    agent that declares nothing)."""
    declared = getattr(agent, "scheduling", "batched")
    return "per_request" if declared == "per_request" else "batched"


def abort_agent(agent: object) -> None:
    """Stop whatever ``agent`` has in flight, now (its ``abort``, when it has one): what a
    runner calls when the run is interrupted, so no request outlives it."""
    abort = getattr(agent, "abort", None)
    if callable(abort):
        abort()


def concurrency_of(agent: object, default: int) -> int:
    """The most requests a ``per_request`` agent takes in flight at once (its
    ``concurrency``), or ``default`` when it declares none."""
    declared = getattr(agent, "concurrency", None)
    return declared if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0 else default


@runtime_checkable
class Agent(Protocol):
    """A policy. Optional attributes a runner reads: ``scheduling`` (``Scheduling``,
    default ``"batched"``) and, for a ``"per_request"`` agent, ``concurrency`` (the most
    requests in flight; a thread each) and ``abort()`` (stop every request in flight at
    once, each answered as failed: a run that is interrupted calls it)."""

    name: str

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        """One reply per request, in order."""
        ...

    def describe(self) -> dict[str, Any]:
        """The agent's spec and parameters, recorded with every evaluation."""
        ...
