"""GRPO on frostgym/Math-v0 with TRL, with a rollout card before and after training.

    python examples/grpo_math.py --tiny --steps 3 --out runs/grpo-tiny     # random 2-layer Llama, CPU, ~1 min
    python examples/grpo_math.py --steps 20 --out runs/grpo-smollm2         # SmolLM2-135M-Instruct
    python examples/grpo_math.py --steps 20 --out runs/grpo-control --random-reward-control

``--random-reward-control`` trains on Bernoulli(p) rewards, p = the "before" card's pass@1,
drawn from a seeded generator: the control for gains that come from the training itself
rather than from the verifier (the real frostgym rewards are still logged, at weight 0).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from frostgym.agents.hf import HFAgent
from frostgym.agents.sampling import SamplingParams
from frostgym.agents.smollm2 import ensure_converted, tiny_random_model
from frostgym.cards.run import card_config, run_to_card
from frostgym.core.seeding import derive_generator
from frostgym.integrations.trl import RewardFunc, env_dataset, reward_functions, reward_weights
from frostgym.runner import RunOptions

ENV_ID = "frostgym/Math-v0"


def load_model(tiny: bool, seed: int) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct, or (``tiny``) a random 2-layer Llama with SmolLM2's tokenizer."""
    if tiny:
        return tiny_random_model(seed)
    path = ensure_converted()
    tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32), tokenizer


def rollout_card(model: Any, tokenizer: Any, out: Path, *, episodes: int, seed: int, max_new_tokens: int) -> float:
    """Greedy eval on the dev split into a card at ``out``; returns pass@1."""
    sampling = SamplingParams(max_new_tokens=max_new_tokens, seed=seed)
    agent = HFAgent(model, tokenizer, sampling=sampling, batch_size=16, model_id=str(out))
    options = RunOptions(split="dev", batch_size=16)
    config = card_config(
        env_ids=[ENV_ID],
        agent_spec=f"hf:{out.name}",
        sampling=sampling.to_dict(),
        episodes=episodes,
        samples=1,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="random tiny Llama on CPU (smoke run)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("runs/grpo-math"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=None, help="dev tasks per card (default 8 tiny, 50)")
    parser.add_argument("--random-reward-control", action="store_true")
    args = parser.parse_args()

    max_new_tokens = 32 if args.tiny else 256
    episodes = args.eval_episodes or (8 if args.tiny else 50)
    model, tokenizer = load_model(args.tiny, args.seed)
    before = rollout_card(
        model, tokenizer, args.out / "before", episodes=episodes, seed=args.seed, max_new_tokens=max_new_tokens
    )

    funcs: list[Any] = reward_functions(ENV_ID)
    weights = reward_weights(funcs)
    if args.random_reward_control:
        funcs, weights = [random_reward(before, args.seed), *funcs], [1.0] + [0.0] * len(funcs)
    batch = 4 if args.tiny else 8
    config = GRPOConfig(
        output_dir=str(args.out / "trainer"),
        max_steps=args.steps,
        per_device_train_batch_size=batch,
        num_generations=4,
        max_completion_length=max_new_tokens,
        learning_rate=1e-5 if not args.tiny else 1e-4,
        temperature=1.0,
        reward_weights=weights,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
    )
    data = env_dataset(ENV_ID, split="train", n=batch * args.steps, seed=args.seed)
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=config, train_dataset=data, processing_class=tokenizer)
    trainer.train()

    after = rollout_card(
        trainer.model, tokenizer, args.out / "after", episodes=episodes, seed=args.seed, max_new_tokens=max_new_tokens
    )
    summary = {
        "pass@1_before": before,
        "pass@1_after": after,
        "random_reward_control": args.random_reward_control,
        "steps": args.steps,
        "log_history": trainer.state.log_history,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "log_history"}))


if __name__ == "__main__":
    main()
