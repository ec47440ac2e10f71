"""HFAgent on real transformers models: a tiny random Llama for the mechanics, and the
embedded SmolLM2 for loading offline and answering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra (torch, transformers) is not installed")

from frostgym.agents.base import AgentRequest  # noqa: E402
from frostgym.agents.hf import HFAgent  # noqa: E402
from frostgym.agents.sampling import SamplingParams  # noqa: E402
from frostgym.agents.smollm2 import ensure_converted, tiny_random_model  # noqa: E402
from frostgym.agents.spec import make_agent  # noqa: E402
from frostgym.core.errors import (  # noqa: E402
    FrostgymError,
    ModelNotFoundError,
)
from tests.conftest import make_env  # noqa: E402

pytestmark = pytest.mark.slow

QUESTIONS = [
    "What is 2 + 3?",
    "Name a colour.",
    "Write one sentence about the sea, please, and keep it short.",
    "Hi",
    "Count from one to five in words.",
]


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    return ensure_converted()  # ~25 s the first time on a machine, then cached


@pytest.fixture(scope="session")
def tiny_model(smollm2_dir: Path) -> tuple[Any, Any]:
    """A 2-layer, 64-wide Llama with SmolLM2's tokenizer (and chat template), random weights."""
    model, tokenizer = tiny_random_model(0, max_positions=512)
    return model.to(torch.float64), tokenizer


def requests(n: int = len(QUESTIONS)) -> list[AgentRequest]:
    return [
        AgentRequest([{"role": "user", "content": q}], f"ep{i}", 0, seed=100 + i) for i, q in enumerate(QUESTIONS[:n])
    ]


def agent(tiny: tuple[Any, Any], **sampling: Any) -> HFAgent:
    model, tokenizer = tiny
    return HFAgent(model, tokenizer, sampling=SamplingParams(**{"max_new_tokens": 12, **sampling}), batch_size=3)


def test_batching_with_padding_matches_one_at_a_time(tiny_model: tuple[Any, Any]) -> None:
    batched = agent(tiny_model).act(requests())
    single = [agent(tiny_model).act([r])[0] for r in requests()]
    assert [r.action for r in batched] == [r.action for r in single]
    assert [r.prompt_tokens for r in batched] == [r.prompt_tokens for r in single]
    assert len({r.prompt_tokens for r in batched}) > 1  # prompts of different lengths were padded together


def test_seeded_sampling_is_reproducible_and_batch_independent(tiny_model: tuple[Any, Any]) -> None:
    sampler = agent(tiny_model, temperature=1.0, top_p=0.9, seed=7)
    global_state = torch.get_rng_state()
    first = [r.action for r in sampler.act(requests())]
    assert torch.equal(torch.get_rng_state(), global_state)  # own generators only; the global RNG is untouched
    again = [r.action for r in sampler.act(requests())]
    reordered = [r.action for r in sampler.act(requests()[::-1])][::-1]
    assert first == again == reordered
    other = [r.action for r in agent(tiny_model, temperature=1.0, top_p=0.9, seed=8).act(requests())]
    assert other != first


def test_stop_strings_and_finish_reasons(tiny_model: tuple[Any, Any]) -> None:
    free = agent(tiny_model, max_new_tokens=20).act(requests(1))[0]
    assert free.finish_reason == "length" and free.completion_tokens == 20
    stop = free.action[len(free.action) // 2 :][:3]
    assert stop.strip()
    cut = agent(tiny_model, max_new_tokens=20, stop=(stop,)).act(requests(1))[0]
    assert cut.finish_reason == "stop"
    assert cut.action == free.action[: free.action.find(stop)]


def test_logprobs_are_per_token_and_recorded(tiny_model: tuple[Any, Any]) -> None:
    replies = agent(tiny_model, logprobs=True, max_new_tokens=8).act(requests(2))
    for reply in replies:
        logprobs = reply.extra["logprobs"]
        assert len(logprobs) == reply.completion_tokens
        assert all(lp <= 0.0 for lp in logprobs)
        assert reply.extra["sampling"]["max_new_tokens"] == 8
        assert reply.extra["latency_s"] > 0


def test_tools_reach_the_chat_template(tiny_model: tuple[Any, Any]) -> None:
    tools = [{"type": "function", "function": {"name": "run_sql", "parameters": {"type": "object"}}}]
    request = AgentRequest([{"role": "user", "content": "q"}], "e", 0, 1, tools=tools)
    assert agent(tiny_model).act([request])[0].finish_reason in ("stop", "length")


def test_missing_model_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="local paths only"):
        HFAgent.from_pretrained(tmp_path / "nope")
    with pytest.raises(FrostgymError):
        make_agent("hf:HuggingFaceTB/SmolLM2-135M-Instruct")  # a hub id is never downloaded


def test_smollm2_loads_offline_from_the_package_and_answers(smollm2_dir: Path) -> None:
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    smol = make_agent("smollm2", sampling=SamplingParams(max_new_tokens=24))
    reply = smol.act([AgentRequest([{"role": "user", "content": "What is 2 + 3?"}], "e", 0, 0)])[0]
    assert "5" in str(reply.action)
    assert reply.finish_reason == "stop" and reply.prompt_tokens and reply.completion_tokens
    assert smol.describe()["spec"] == "hf:smollm2"


def test_smollm2_plays_a_math_episode(smollm2_dir: Path) -> None:
    env = make_env("frostgym/Arithmetic-v0")
    obs, info = env.reset(seed=0)
    smol = make_agent("smollm2", sampling=SamplingParams(max_new_tokens=64))
    reply = smol.act([AgentRequest(obs, info["episode_id"], 0, 0)])[0]
    _, reward, terminated, _, info = env.step(reply.action)
    assert terminated and 0.0 <= float(reward) <= 1.0 and "grade" in info


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device on this machine; the GPU path runs where one is"
)
def test_cuda_bf16_batched_generation_is_deterministic(smollm2_dir: Path) -> None:
    gpu = HFAgent.from_pretrained(smollm2_dir, sampling=SamplingParams(max_new_tokens=16, temperature=0.7, seed=3))
    assert gpu.device.type == "cuda" and gpu.describe()["dtype"] == "torch.bfloat16"
    first = [r.action for r in gpu.act(requests())]
    assert first == [r.action for r in gpu.act(requests())]
