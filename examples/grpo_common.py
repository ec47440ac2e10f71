"""What the GRPO examples share (``grpo_math.py``, ``grpo_tools.py``): the model, the
before/after rollout cards, the random-reward control and the per-step log."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from frostgym.agents.hf import HFAgent
from frostgym.agents.sampling import SamplingParams
from frostgym.agents.smollm2 import ensure_converted, tiny_random_model
from frostgym.core.seeding import derive_generator
from frostgym.envs.specs import EnvSpec
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.run.runner import RunOptions
from frostgym.train.trl import RewardFunc

#: What each step's log line keeps (TRL's names).
#: ``kl`` (to the reference model) is only computed by TRL when ``--beta`` is above 0;
#: ``entropy`` is the policy's mean per-token entropy on the step's completions.
STEP_KEYS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "kl",
    "entropy",
    "loss",
    "learning_rate",
)


def load_model(
    tiny: bool, seed: int, out: Path, *, chat_template: str | None = None, max_positions: int = 2048
) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct, or (``tiny``) a random 2-layer Llama with SmolLM2's tokenizer
    (``max_positions`` long), saved under ``out`` first: TRL loads its reference model
    (``--beta`` above 0) from the directory the policy was loaded from. ``chat_template``,
    when given, replaces the tokenizer's."""
    if tiny:
        model, tokenizer = tiny_random_model(seed, max_positions=max_positions)
        path = out / "tiny-model"
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    else:
        path = ensure_converted()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32), tokenizer


def rollout_card(
    model: Any,
    tokenizer: Any,
    spec: EnvSpec,
    out: Path,
    *,
    episodes: int | None,
    seed: int,
    max_new_tokens: int,
    samples: int = 1,
    temperature: float = 0.0,
) -> float:
    """Eval on the dev split of ``spec`` (``episodes`` tasks, None: all) into a card at
    ``out``, ``samples`` per task at ``temperature`` (greedy by default), ``max_new_tokens``
    per reply; returns pass@1."""
    sampling = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    agent = HFAgent(model, tokenizer, sampling=sampling, batch_size=16, model_id=str(out))
    options = RunOptions(
        split="dev", batch_size=16, env_options={spec.env_id: dict(spec.kwargs)} if spec.kwargs else {}
    )
    config = card_config(
        env_ids=[spec.env_id],
        agent_spec=f"hf:{out.name}",
        sampling=sampling.to_dict(),
        episodes=episodes,
        samples=samples,
        seed=seed,
        options=options,
    )
    card = run_to_card(out, agent, config, options)
    model.train()  # HFAgent put it in eval mode
    return float(card["views"]["overall"]["errors_as_failures"]["pass@k"]["1"]["value"] or 0.0)


def random_reward(p: float, seed: int) -> RewardFunc:
    """Rewards drawn at the verifier's base rate, ignoring the completions (seeded, own generator)."""
    rng = derive_generator("random-reward-control", seed)

    def frostgym_random_control(prompts: list[Any], completions: list[Any], **_: Any) -> list[float | None]:
        return [float(x) for x in (rng.random(len(completions)) < p)]

    return frostgym_random_control


def step_records(log_history: Sequence[dict[str, Any]], keys: Sequence[str] = STEP_KEYS) -> list[dict[str, Any]]:
    """One record per training step of TRL's log (the entries with a ``reward``): its
    ``step`` and whichever of ``keys`` it logged."""
    return [
        {"step": entry["step"], **{key: entry[key] for key in keys if key in entry}}
        for entry in log_history
        if "reward" in entry
    ]


def write_steps(path: Path, steps: Sequence[dict[str, Any]]) -> None:
    """``steps`` as JSON lines."""
    with path.open("w") as f:
        f.writelines(json.dumps(step) + "\n" for step in steps)
