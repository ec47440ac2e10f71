"""The customer: the second party of a customer-service episode, scripted or a model.

Why here: the env owns its customer as it owns its database; the agent sees the customer's
messages as the user turns of its conversation. Two kinds, one interface (``Customer``):

- ``ScriptedCustomer`` answers by rule from the task's scenario
  (``frostgym.customer.scripted_user``): no model, for the oracle and the tests.
- ``ModelCustomer`` is an LLM told tau2's user-simulation guidelines and the task's
  scenario (tau2's simulator prompt: the guidelines, then the scenario in ``<scenario>``
  tags), called through the frozen model layer (``frostgym.models``): every call is keyed
  on its canonical request and served from a content-addressed cache, so a replay gets the
  customer's words byte for byte, and a call the cache lacks in ``replay`` mode is a
  ``replay_miss`` drop, never a silent live call. From the customer's side the roles are
  swapped: the agent's messages are its ``user`` turns, its own are ``assistant`` turns.
  The agent's tool calls and their results are not shown to it. Like tau2's, it is first
  greeted by the agent (``GREETING``), and answers with its opening.

A model customer's sampling is greedy unless told otherwise; a sampled call's seed is
derived from the episode and the turn, so the same episode asks the same question.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from frostgym.agents.sampling import SamplingParams
from frostgym.core.errors import SecondPartyError
from frostgym.core.messages import Message, message
from frostgym.core.seeding import derive_seed
from frostgym.customer import scripted_user
from frostgym.customer.tau2_data import STOP, scenario_text, simulation_guidelines
from frostgym.models.cache import CACHE_MODES, CacheMode, ModelCache
from frostgym.models.frozen import FrozenModel

#: What the agent says first, to which a model customer answers with its opening (tau2's).
GREETING: Final = "Hi! How can I help you today?"
SCRIPTED: Final = "scripted"
#: The committed cache of the embedded model as the customer (``frostgym/fixtures``).
PACKAGED_CACHE_NAME: Final = "frostgym/fixtures/customer_service/customer_cache.jsonl"
PACKAGED_CACHE: Final = Path(__file__).resolve().parents[3] / PACKAGED_CACHE_NAME


@dataclass(frozen=True)
class CustomerTurn:
    """One thing the customer said, and the model call behind it (None when scripted):
    ``{"key", "source", "reply"}``, stored on the step so a card holds every call."""

    text: str
    call: Mapping[str, Any] | None = None


class Customer(Protocol):
    """The customer of one env; ``opening`` at reset, ``answer`` to each message the agent
    writes to it. Both raise ``SecondPartyError`` when a model customer has no reply."""

    def opening(self, scenario: Mapping[str, Any], episode: str) -> CustomerTurn: ...

    def answer(
        self, scenario: Mapping[str, Any], episode: str, agent_messages: Sequence[str], own: Sequence[str]
    ) -> CustomerTurn: ...

    def describe(self) -> dict[str, Any]: ...


class ScriptedCustomer:
    """The rule-bound customer (``frostgym.customer.scripted_user``)."""

    def opening(self, scenario: Mapping[str, Any], episode: str) -> CustomerTurn:
        return CustomerTurn(scripted_user.opening(scenario))

    def answer(
        self, scenario: Mapping[str, Any], episode: str, agent_messages: Sequence[str], own: Sequence[str]
    ) -> CustomerTurn:
        return CustomerTurn(scripted_user.answer(scenario, agent_messages[-1], len(own) - 1))

    def describe(self) -> dict[str, Any]:
        return {"kind": SCRIPTED}


def system_prompt(scenario: Mapping[str, Any]) -> str:
    """A model customer's instructions: tau2's guidelines, then the task's scenario."""
    return f"{simulation_guidelines().strip()}\n\n<scenario>\n{scenario_text(scenario)}\n</scenario>"


class ModelCustomer:
    """An LLM customer through the frozen model layer (module docstring)."""

    def __init__(self, model: FrozenModel) -> None:
        self.model = model

    def _call(self, messages: list[Message], episode: str, turn: int) -> CustomerTurn:
        outcome = self.model.call(messages, seed=derive_seed("customer", episode, turn))
        if outcome.reply is None:
            raise SecondPartyError(
                f"the customer model gave no reply: {outcome.error}", outcome.drop_class or "infra_error"
            )
        text = outcome.reply.strip() or STOP
        return CustomerTurn(text, {"key": outcome.key, "source": outcome.source, "reply": outcome.reply})

    def opening(self, scenario: Mapping[str, Any], episode: str) -> CustomerTurn:
        return self._call([message("system", system_prompt(scenario)), message("user", GREETING)], episode, 0)

    def answer(
        self, scenario: Mapping[str, Any], episode: str, agent_messages: Sequence[str], own: Sequence[str]
    ) -> CustomerTurn:
        messages = [message("system", system_prompt(scenario)), message("user", GREETING)]
        for said, heard in zip(own, agent_messages, strict=False):
            messages += [message("assistant", said), message("user", heard)]
        return self._call(messages, episode, len(own))

    def describe(self) -> dict[str, Any]:
        """``FrozenModel.describe`` with the packaged cache named by its place in the
        package, not by this machine's path to it."""
        described = {"kind": "model", **self.model.describe()}
        if described.get("cache_path") == str(PACKAGED_CACHE):
            described["cache_path"] = PACKAGED_CACHE_NAME
        return described


_MODELS: dict[tuple[str, str, str, int], FrozenModel] = {}
_MODELS_LOCK = threading.Lock()


def make_customer(spec: str, cache: str | None, mode: str, max_new_tokens: int) -> Customer:
    """The customer ``spec`` names: ``scripted``, or a model spec (``smollm2``, ``hf:DIR``,
    ``openai:BASE_URL#MODEL``) served through the cache at ``cache`` (None: the packaged
    one, which only ``replay`` reads) in ``mode``. Model customers are shared per process
    and settings, so envs of one run load a model once. ``ValueError`` for a bad mode, a
    ``record`` or ``live`` mode on the packaged cache, or what ``frostgym.models`` refuses."""
    if spec == SCRIPTED:
        return ScriptedCustomer()
    if mode not in CACHE_MODES:
        raise ValueError(f"cache_mode must be one of {list(CACHE_MODES)}, got {mode!r}")
    if cache is None and mode != "replay":
        raise ValueError(f"cache_mode={mode!r} writes to its cache: give customer_cache=PATH")
    path = str(PACKAGED_CACHE if cache is None else Path(cache))
    key = (spec, path, mode, max_new_tokens)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            sampling = SamplingParams(max_new_tokens=max_new_tokens)
            cached: CacheMode = mode  # checked above
            model = FrozenModel(spec, cache=ModelCache(path), mode=cached, sampling=sampling)
            _MODELS[key] = model
    return ModelCustomer(model)
