"""Agent specs: the strings the CLI accepts for ``--agent``.

- ``oracle``, ``random``: scripted;
- ``smollm2``: the embedded default model (SmolLM2-135M-Instruct, converted on first use);
- ``hf:PATH``: any local transformers model directory;
- ``openai:BASE_URL#MODEL``: an OpenAI-compatible chat-completions server;
- ``replay:DIR``: the actions recorded in a rollout card directory.
"""

from __future__ import annotations

from frostgym.agents.base import Agent
from frostgym.agents.oracle import OracleAgent
from frostgym.agents.random_agent import RandomAgent
from frostgym.agents.sampling import SamplingParams

AGENT_SPECS = ("oracle", "random", "smollm2", "hf:PATH", "openai:BASE_URL#MODEL", "replay:DIR")


def make_agent(
    spec: str,
    *,
    seed: int = 0,
    sampling: SamplingParams | None = None,
    batch_size: int = 16,
    request_timeout_s: float | None = None,
) -> Agent:
    """Build an agent from its spec; ``seed`` and ``sampling`` configure agents that sample.
    ``request_timeout_s`` is the openai agent's whole-request deadline (its default when
    None); other agents make no requests and refuse it. Model-backed agents import their
    heavy dependencies only when asked for."""
    if request_timeout_s is not None and not spec.startswith("openai:"):
        raise ValueError(f"a request timeout applies to the openai agent only, not to {spec!r}")
    sampling = sampling or SamplingParams(seed=seed)
    if spec == "oracle":
        return OracleAgent()
    if spec == "random":
        return RandomAgent(seed=seed)
    if spec == "smollm2":
        from frostgym.agents.hf import HFAgent
        from frostgym.agents.smollm2 import ensure_converted

        agent = HFAgent.from_pretrained(ensure_converted(), sampling=sampling, batch_size=batch_size)
        agent.model_id = "smollm2"
        return agent
    if spec.startswith("hf:"):
        from frostgym.agents.hf import HFAgent

        return HFAgent.from_pretrained(spec[3:], sampling=sampling, batch_size=batch_size)
    if spec.startswith("openai:"):
        from frostgym.agents.openai_compat import DEFAULT_TIMEOUT_S, OpenAIAgent

        base_url, sep, model = spec[len("openai:") :].partition("#")
        if not sep or not base_url or not model:
            raise ValueError(f"openai agent spec must be openai:BASE_URL#MODEL, got {spec!r}")
        timeout_s = DEFAULT_TIMEOUT_S if request_timeout_s is None else request_timeout_s
        return OpenAIAgent(base_url, model, sampling=sampling, concurrency=batch_size, timeout_s=timeout_s)
    if spec.startswith("replay:"):
        from frostgym.agents.replay import ReplayAgent

        return ReplayAgent.from_card(spec[len("replay:") :])
    raise ValueError(f"unknown agent spec {spec!r}; expected one of {', '.join(AGENT_SPECS)}")
