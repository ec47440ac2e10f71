"""A model frostgym calls itself (a user simulator, an LLM judge), frozen by a cache.

``FrozenModel.call`` answers one chat call with a ``CallOutcome``: the reply and where it
came from, or why there is none. Whether the model is asked depends on the mode
(``CacheMode``):

- ``replay``: only the cache answers. A call it has no reply for is a ``replay_miss``; the
  model is never loaded, never asked.
- ``record``: the cache answers what it has; a miss asks the model and caches its reply.
- ``live``: the model is asked every time, cached or not, and every reply is cached
  (replacing the one before): a run against the model as it is now, which leaves a cache a
  ``replay`` serves.

A model that fails (its reply is a drop, or it raises) gives an ``infra_error`` outcome: an
infrastructure failure of the env or grader that called it, never the agent's fault.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from frostgym.agents.base import Agent, AgentReply, AgentRequest
from frostgym.agents.sampling import SamplingParams
from frostgym.core.hashing import canonical_json
from frostgym.core.messages import Observation
from frostgym.models.cache import CACHE_MODES, CacheMode, ModelCache
from frostgym.models.calls import ModelCall, ModelPin, call_seed, pin_model

CallSource = Literal["cache", "live"]
CallDropClass = Literal["replay_miss", "infra_error"]


@dataclass(frozen=True)
class CallOutcome:
    """What one model call gave. ``reply`` is the text (None when there is none); ``key``
    the call's key (``ModelCall.key``); ``source`` where the reply came from (None without
    one); ``error`` and ``drop_class`` why there is no reply: ``replay_miss`` (replay mode,
    not cached) or ``infra_error`` (the model failed). A caller that cannot go on without
    the reply drops its episode with that class."""

    reply: str | None
    key: str
    source: CallSource | None = None
    error: str | None = None
    drop_class: CallDropClass | None = None

    @property
    def ok(self) -> bool:
        """Whether there is a reply."""
        return self.reply is not None


class FrozenModel:
    """The model ``spec`` names (``smollm2``, ``hf:DIR``, ``openai:BASE_URL#MODEL``), called
    through ``cache`` in ``mode`` with decoding parameters ``sampling``.

    Construction pins the model (``pin_model``; ``ModelSpecError`` for a spec that is not a
    model) but does not load it: the agent is built with ``make_agent(spec,
    sampling=...)`` when a call first needs the model, once, and ``loaded`` says whether it
    has been. Calls may come from several threads; those that reach the model are made one
    at a time (an in-process model is not thread-safe). Errors building the agent (a
    missing extra, an unreachable file) are raised from ``call``: a setup failure, not one
    call's."""

    def __init__(self, spec: str, *, cache: ModelCache, mode: CacheMode, sampling: SamplingParams) -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"unknown cache mode {mode!r}; expected one of {', '.join(CACHE_MODES)}")
        self.spec = spec
        self.pin: ModelPin = pin_model(spec)
        self.cache = cache
        self.mode: CacheMode = mode
        self.sampling = sampling
        self._cache_sha256 = cache.sha256
        self._agent: Agent | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the model has been built (a call has asked it)."""
        return self._agent is not None

    def prepare(
        self, messages: Sequence[Mapping[str, Any]], *, seed: int, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> ModelCall:
        """The ``ModelCall`` that ``call`` with these arguments makes (its key, its request)."""
        return ModelCall.build(self.pin, messages, sampling=self.sampling, seed=seed, tools=tools)

    def call(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        seed: int,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> CallOutcome:
        """The model's reply to ``messages`` (chat dicts with ``role`` and ``content``),
        offered ``tools`` (OpenAI function schemas), sampled with ``seed`` when sampling
        (a greedy call's seed changes nothing, its key included). Never raises for a
        miss or a failing model: see ``CallOutcome``. A reply that is not text (an
        OpenAI tool call) is kept as its canonical JSON."""
        call = self.prepare(messages, seed=seed, tools=tools)
        if self.mode != "live" and (cached := self.cache.get(call)) is not None:
            return CallOutcome(reply=cached, key=call.key, source="cache")
        if self.mode == "replay":
            return CallOutcome(
                reply=None,
                key=call.key,
                error=f"no cached reply for model call {call.key[:16]} (replay mode)",
                drop_class="replay_miss",
            )
        request = AgentRequest(
            observation=cast(Observation, [dict(message) for message in call.messages]),
            episode_id=f"model-call-{call.key[:16]}",
            turn=0,
            seed=call_seed(self.sampling, seed),
            tools=None if call.tools is None else [dict(tool) for tool in call.tools],
        )
        with self._lock:
            agent = self._agent_or_build()
            try:
                replies = agent.act([request])
            except Exception as error:  # any failure of the model is infrastructure
                return _failed(call, f"{type(error).__name__}: {error}")
        reply = _only(replies)
        if reply is None:
            return _failed(call, f"the model gave {len(replies)} replies to one request")
        if reply.drop is not None:
            return _failed(call, reply.drop.error)
        text = reply.action if isinstance(reply.action, str) else canonical_json(reply.action)
        self.cache.put(call, text)
        return CallOutcome(reply=text, key=call.key, source="live")

    def _agent_or_build(self) -> Agent:
        if self._agent is None:
            from frostgym.agents.spec import make_agent

            self._agent = make_agent(self.spec, sampling=dataclasses.replace(self.sampling, seed=0))
        return self._agent

    def describe(self) -> dict[str, Any]:
        """``{"model": pin, "mode", "cache_sha256", "cache_path"}``: the model, the mode, the
        cache's content hash when this model was made (``ModelCache.sha256``) and its file
        (None in memory). What a card records of the model an env or grader called."""
        return {
            "model": dict(self.pin),
            "mode": self.mode,
            "cache_sha256": self._cache_sha256,
            "cache_path": None if self.cache.path is None else str(self.cache.path),
        }


def _only(replies: Sequence[AgentReply]) -> AgentReply | None:
    return replies[0] if len(replies) == 1 else None


def _failed(call: ModelCall, error: str) -> CallOutcome:
    return CallOutcome(reply=None, key=call.key, error=error, drop_class="infra_error")
