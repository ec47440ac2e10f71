"""GRPO on a frostgym math env with TRL, with a rollout card before and after training.

    python examples/grpo_math.py --tiny --steps 3 --out runs/grpo-tiny     # random 1-layer Llama, CPU, ~1 min
    python examples/grpo_math.py --env 'frostgym/Arithmetic-v0[level=1]' --steps 60 --out runs/grpo-smollm2
    python examples/grpo_math.py --env 'frostgym/Arithmetic-v0[level=1]' --steps 60 --out runs/grpo-control \
        --random-reward-control
    python examples/grpo_math.py --env frostgym/Arithmetic-v0 --curriculum 1,2,3 --steps 60 --out runs/grpo-curriculum

``--env`` takes the same spelling as ``frostgym eval`` (a level in brackets). The cards
(``before/``, ``after/``) are greedy runs on the dev split of that env, the same plan both
times, so ``frostgym compare OUT/before OUT/after`` pairs them task by task.

``--random-reward-control`` trains on Bernoulli(p) rewards, p = the "before" card's pass@1,
drawn from a seeded generator: the control for gains that come from the training itself
rather than from the verifier (the real frostgym rewards are still logged, at weight 0).

``--curriculum LEVELS`` draws the training prompts from ``frostgym.train.curriculum`` instead of
one level: it starts at the first level given and moves to keep the running pass rate in
30-70%; the level of every step is logged.

Each step's mean reward, reward standard deviation, share of groups with no reward variance,
mean completion length, policy entropy and (with ``--beta`` above 0) KL to the reference model
go to ``OUT/steps.jsonl``; ``OUT/summary.json`` holds the training split (``train_split``), pass@1
before and after and the trainer's whole log.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from grpo_common import STEP_KEYS, load_model, random_reward, rollout_card, step_records, write_steps
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from frostgym.core.splits import Split
from frostgym.envs.specs import parse_env_specs
from frostgym.train.curriculum import CurriculumConfig, CurriculumSampler
from frostgym.train.trl import (
    curriculum_dataset,
    env_dataset,
    reward_functions,
    reward_weights,
)

#: The split the model trains on, recorded in summary.json (``train_split``): never
#: ``private`` (the helpers refuse it without ``allow_private=True``), so its cards need no
#: ``--trained-on-private``.
TRAIN_SPLIT: Split = "train"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env", default="frostgym/Math-v0", help="one env spec, e.g. 'frostgym/Arithmetic-v0[level=1]'"
    )
    parser.add_argument("--tiny", action="store_true", help="random tiny Llama on CPU (smoke run)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("runs/grpo-math"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--eval-episodes", type=int, default=None, help="dev tasks per card (default 8 tiny, 50; 0: all)"
    )
    parser.add_argument("--eval-samples", type=int, default=1, help="episodes per dev task in each card")
    parser.add_argument("--eval-temperature", type=float, default=0.0, help="sampling temperature of the cards")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="per completion (default 32 tiny, 256)")
    parser.add_argument("--batch", type=int, default=None, help="completions per step (default 4 tiny, 8)")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt (a GRPO group)")
    parser.add_argument("--learning-rate", type=float, default=None, help="default 1e-4 tiny, 1e-5")
    parser.add_argument("--random-reward-control", action="store_true")
    parser.add_argument(
        "--beta", type=float, default=0.0, help="KL coefficient (TRL's default 0: no reference model, no KL logged)"
    )
    parser.add_argument("--curriculum", default=None, help="levels to move between, easiest first: '1,2,3'")
    args = parser.parse_args()

    (spec,) = parse_env_specs(args.env)
    max_new_tokens = args.max_new_tokens or (32 if args.tiny else 256)
    episodes = None if args.eval_episodes == 0 else args.eval_episodes or (8 if args.tiny else 50)
    model, tokenizer = load_model(args.tiny, args.seed, args.out)

    def card(trained: Any, name: str) -> float:  # the same plan and sampling before and after
        return rollout_card(
            trained,
            tokenizer,
            spec,
            args.out / name,
            episodes=episodes,
            seed=args.seed,
            max_new_tokens=max_new_tokens,
            samples=args.eval_samples,
            temperature=args.eval_temperature,
        )

    before = card(model, "before")

    batch = args.batch or (4 if args.tiny else 8)
    sampler = None
    if args.curriculum:
        levels = tuple(int(x) for x in args.curriculum.split(","))
        kwargs = {k: v for k, v in spec.kwargs.items() if k != "level"}
        sampler = CurriculumSampler(
            spec.env_id,
            CurriculumConfig(levels, levels[0], window=4 * batch),
            seed=args.seed,
            split=TRAIN_SPLIT,
            env_kwargs=kwargs,
        )
        funcs: list[Any] = reward_functions(spec.env_id, curriculum=sampler)
        data = curriculum_dataset(sampler, batch=max(1, batch // args.generations))
    else:
        funcs = reward_functions(spec.env_id, **spec.kwargs)
        data = env_dataset(spec.env_id, split=TRAIN_SPLIT, n=batch * args.steps, seed=args.seed, **spec.kwargs)
    weights = reward_weights(funcs)
    if args.random_reward_control:
        funcs, weights = [random_reward(before, args.seed), *funcs], [1.0] + [0.0] * len(funcs)
    config = GRPOConfig(
        output_dir=str(args.out / "trainer"),
        max_steps=args.steps,
        per_device_train_batch_size=batch,
        num_generations=args.generations,
        max_completion_length=max_new_tokens,
        learning_rate=args.learning_rate or (1e-4 if args.tiny else 1e-5),
        shuffle_dataset=sampler is None,  # a curriculum's stream is already in the order it chose
        temperature=1.0,
        beta=args.beta,
        reward_weights=weights,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=False,  # 135M parameters fit; recomputing activations only costs time
        bf16=False,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=config, train_dataset=data, processing_class=tokenizer)
    trainer.train()

    steps = step_records(trainer.state.log_history, STEP_KEYS)
    if sampler is not None:  # the levels each step trained on (one reward call per step)
        for step, levels in zip(steps, sampler.batches, strict=False):
            step["levels"] = list(levels)
    write_steps(args.out / "steps.jsonl", steps)

    after = card(trainer.model, "after")
    summary = {
        "env": str(spec),
        # What the model trained on: a card of this model must say --trained-on-private if this is "private".
        "train_split": TRAIN_SPLIT,
        "pass@1_before": before,
        "pass@1_after": after,
        "random_reward_control": args.random_reward_control,
        "curriculum": None if sampler is None else sampler.curriculum.log_records(),
        "steps": args.steps,
        "log_history": trainer.state.log_history,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "log_history"}))


if __name__ == "__main__":
    main()
