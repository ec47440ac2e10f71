"""HFAgent on real transformers models: a tiny random Llama for the mechanics, and the
embedded SmolLM2 for loading offline and answering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra (torch, transformers) is not installed")

from frostgym.agents.base import AgentRequest  # noqa: E402
from frostgym.agents.hf import HFAgent, StepClock  # noqa: E402
from frostgym.agents.sampling import SamplingParams  # noqa: E402
from frostgym.agents.smollm2 import ensure_converted, tiny_random_model  # noqa: E402
from frostgym.agents.spec import make_agent  # noqa: E402
from frostgym.cards.card import load_card  # noqa: E402
from frostgym.core.errors import (  # noqa: E402
    FrostgymError,
    ModelNotFoundError,
)
from frostgym.evaluate.run_to_card import card_config, run_to_card  # noqa: E402
from frostgym.integrations import card_token_turns  # noqa: E402
from frostgym.run.runner import RunOptions  # noqa: E402
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


# -- token traces ---------------------------------------------------------------------------


def _template_ids(tokenizer: Any, observation: Any, tools: Any = None) -> list[int]:
    """The tokenizer's own chat-template rendering of an observation, as ids."""
    kwargs = {"tools": tools} if tools else {}
    rendered = tokenizer.apply_chat_template(observation, add_generation_prompt=True, tokenize=True, **kwargs)
    ids = rendered["input_ids"] if hasattr(rendered, "keys") else rendered
    return list(ids)


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.8, "top_p": 0.9, "seed": 5}], ids=["greedy", "sampled"])
def test_token_ids_are_the_templated_prompt_and_what_decodes_to_the_reply(
    tiny_model: tuple[Any, Any], sampling: dict[str, Any]
) -> None:
    _, tokenizer = tiny_model
    replies = agent(tiny_model, max_new_tokens=16, **sampling).act(requests())  # batched, so padded
    for request, reply in zip(requests(), replies, strict=True):
        tokens = reply.tokens
        assert tokens is not None and tokens.completion_ids is not None and tokens.logprobs is not None
        assert tokens.prompt_ids == _template_ids(tokenizer, request.observation)  # no padding
        assert tokens.prompt_ids is not None and len(tokens.prompt_ids) == reply.prompt_tokens
        assert tokenizer.decode(tokens.completion_ids, skip_special_tokens=True) == reply.action
        assert len(tokens.completion_ids) == len(tokens.logprobs) == reply.completion_tokens
        assert tokens.logprobs_of == ("sampling" if sampling else "model")
        if reply.finish_reason == "stop":  # ended by its end-of-sequence token, which is kept
            assert tokens.completion_ids[-1] == tokenizer.eos_token_id


@pytest.mark.parametrize(
    ("temperature", "top_p"), [(0.0, 1.0), (1.0, 1.0), (0.7, 1.0), (1.3, 0.8)], ids=["greedy", "t1", "t0.7", "top-p"]
)
def test_token_logprobs_are_of_the_distribution_each_token_was_drawn_from(
    tiny_model: tuple[Any, Any], temperature: float, top_p: float
) -> None:
    """Each recorded logprob, against the model run once over prompt + completion ids (teacher
    forcing, no padding): log-softmax of its logits at ``temperature``, with top-p's kept
    tokens renormalised; greedy at temperature 1."""
    model, _ = tiny_model
    sampled = agent(tiny_model, max_new_tokens=10, temperature=temperature, top_p=top_p, seed=2).act(requests())
    for reply in sampled:
        tokens = reply.tokens
        assert tokens is not None and tokens.prompt_ids is not None and tokens.completion_ids is not None
        prompt, completion = tokens.prompt_ids, tokens.completion_ids
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].double()
        log_probs = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
        expected = []
        for position, token in enumerate(completion):
            value = float(log_probs[position, token])
            if top_p < 1.0:
                probs, _ = torch.sort(log_probs[position].exp(), descending=True)
                kept = probs[torch.cumsum(probs, dim=0) - probs < top_p]
                value -= float(torch.log(kept.sum()))
            expected.append(value)
        assert tokens.logprobs == pytest.approx(expected, abs=1e-4)


def test_with_a_stop_string_the_ids_end_at_the_token_that_completed_it(tiny_model: tuple[Any, Any]) -> None:
    _, tokenizer = tiny_model
    free = agent(tiny_model, max_new_tokens=20).act(requests(1))[0]
    assert free.tokens is not None and free.tokens.completion_ids is not None
    stop = free.action[len(free.action) // 2 :][:3]
    cut = agent(tiny_model, max_new_tokens=20, stop=(stop,)).act(requests(3))[0]  # batched: rows pad after stopping
    assert cut.tokens is not None and cut.tokens.completion_ids is not None
    ids = cut.tokens.completion_ids
    assert stop in tokenizer.decode(ids, skip_special_tokens=True)
    assert stop not in tokenizer.decode(ids[:-1], skip_special_tokens=True)
    assert ids == free.tokens.completion_ids[: len(ids)]  # what was generated, no padding read as an EOS
    assert cut.completion_tokens == len(ids) and cut.action == free.action[: free.action.find(stop)]


def test_a_multi_turn_card_of_hf_turns_reads_back_with_the_prefix_check(tmp_path: Path) -> None:
    """SQL-v0, three turns an episode, written to a card by ``run_to_card`` and read back
    with the trainers' reader: each turn's prompt ids are the chat template's rendering of
    the observation it was asked about, and ``prefix_mismatch`` says whether it extends the
    turn before (a random model's replies often re-tokenise differently: both happen here)."""
    model, tokenizer = tiny_random_model(1, max_positions=4096)
    hf = HFAgent(model, tokenizer, sampling=SamplingParams(max_new_tokens=8), batch_size=4)
    options = RunOptions(env_kwargs={"max_turns": 3}, batch_size=4)
    sql = "frostgym/SQL-v0"
    config = card_config(
        env_ids=[sql],
        agent_spec="hf:tiny",
        sampling=hf.sampling.to_dict(),
        episodes=2,
        samples=1,
        seed=0,
        options=options,
    )
    run_to_card(tmp_path / "card", hf, config, options)
    _, episodes, drops = load_card(tmp_path / "card")
    assert len(episodes) == 2 and not drops
    tools = make_env(sql).tools
    flags: list[bool | None] = []
    for record, turns in zip(episodes, card_token_turns(tmp_path / "card"), strict=True):
        assert len(turns) == len(record.steps) == 3
        observation = record.observation
        previous: list[int] | None = None
        for turn, step in zip(turns, record.steps, strict=True):
            assert turn.prompt_ids == _template_ids(tokenizer, observation, tools)
            flags.append(turn.prefix_mismatch)
            assert tokenizer.decode(turn.completion_ids, skip_special_tokens=True) == step.action
            if previous is None:
                assert turn.prefix_mismatch is None
            else:
                assert turn.prefix_mismatch is (turn.prompt_ids[: len(previous)] != previous)
            previous = turn.input_ids
            observation = step.observation.apply(observation)
    assert flags.count(None) == 2 and {True, False} <= set(flags)


def test_step_clock_times_a_row_from_its_steps() -> None:
    clock = StepClock()
    clock.put(torch.zeros(2, 3))  # the prompt: not a step
    clock.stamps.extend([1.5, 1.7, 2.1])
    ttft, tpot = clock.timings(1.0, 3)
    assert ttft == 0.5 and tpot == pytest.approx(0.3)
    assert clock.timings(1.0, 1) == (0.5, None)  # one token: no time per output token
    assert clock.timings(1.0, 4) == (None, None)  # more tokens than steps: the steps do not tell


def test_replies_record_time_to_first_token_and_per_output_token(tiny_model: tuple[Any, Any]) -> None:
    """``ttft_s`` and ``tpot_s`` on every reply: within its batch's latency, shared by the rows
    of one batch (their first step is one), and no ``tpot_s`` for a one-token reply; an eval
    card then has the percentiles in ``frostgym compare``."""
    replies = agent(tiny_model).act(requests())  # 5 requests, batch_size 3: two batches
    for reply in replies:
        extra, count = reply.extra, reply.completion_tokens
        assert count is not None and count >= 1
        assert 0 < extra["ttft_s"] <= extra["latency_s"]
        if count > 1:
            assert extra["tpot_s"] > 0 and extra["ttft_s"] + extra["tpot_s"] * (count - 1) <= extra["latency_s"]
        else:
            assert extra["tpot_s"] is None
    assert len({reply.extra["ttft_s"] for reply in replies}) == 2
    [short] = agent(tiny_model, max_new_tokens=1).act(requests(1))
    assert short.completion_tokens == 1 and short.extra["tpot_s"] is None and short.extra["ttft_s"] > 0


def test_an_hf_card_compares_with_token_timings(tiny_model: tuple[Any, Any], tmp_path: Path) -> None:
    from frostgym.compare.compare import compare_cards

    model, tokenizer = tiny_model
    hf = HFAgent(model, tokenizer, sampling=SamplingParams(max_new_tokens=6), batch_size=4)
    options = RunOptions(batch_size=4)
    config = card_config(
        env_ids=["frostgym/Arithmetic-v0"], agent_spec="hf:tiny", sampling=hf.sampling.to_dict(), episodes=4,
        samples=1, seed=0, options=options,
    )  # fmt: skip
    run_to_card(tmp_path / "card", hf, config, options)
    _, episodes, _ = load_card(tmp_path / "card")
    ttfts = sorted(step.agent["ttft_s"] for record in episodes for step in record.steps)
    costs = {c.metric: c for c in compare_cards(tmp_path / "card", tmp_path / "card").costs if c.slice == "overall"}
    assert costs["ttft_seconds_p95"].cand == pytest.approx(float(np.percentile(ttfts, 95)))
    assert costs["seconds_per_output_token_p50"].cand is not None
