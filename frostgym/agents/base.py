"""The one agent interface: a batch of requests in, one reply per request out.

Every policy (scripted, Hugging Face, OpenAI-compatible, replay) implements ``act``
over a batch, so a runner can batch model calls across episodes without knowing
which policy it drives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from frostgym.core.episode import Drop, DropClass
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
    ``failed``). A dropped reply drops its episode only; the env is not stepped with it."""

    action: Action
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Why there is no action: how a runner files the episode (stage ``"agent"``).
    drop: Drop | None = None

    @classmethod
    def failed(cls, error: str, drop_class: DropClass = "agent_error", **trace: Any) -> AgentReply:
        """The reply for a request the policy could not answer: ``error`` says why (its
        first line is kept), ``drop_class`` how the episode is filed (``replay_miss`` for a
        replay with no recorded action), ``trace`` any other field (``extra``, ...)."""
        return cls(action="", drop=Drop(drop_class, "agent", error), **trace)

    def trace(self) -> dict[str, Any]:
        """Everything but the action, for the episode record."""
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


@runtime_checkable
class Agent(Protocol):
    name: str

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        """One reply per request, in order."""
        ...

    def describe(self) -> dict[str, Any]:
        """The agent's spec and parameters, recorded with every evaluation."""
        ...
