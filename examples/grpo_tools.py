"""GRPO on a multi-turn frostgym tool id through TRL's tool loop (``environment_factory``).

    python examples/grpo_tools.py --tiny --steps 2 --out runs/grpo-tools-tiny     # random tiny Llama, CPU
    python examples/grpo_tools.py --env 'frostgym/ToolsHTTP-v0[level=1]' --steps 12 --out runs/grpo-tools-l1
    python examples/grpo_tools.py --env 'frostgym/ToolsHTTP-v0[level=1]' --steps 12 --out runs/grpo-tools-l1-control \
        --random-reward-control
    python examples/grpo_tools.py --env 'frostgym/SQL-v0[level=1]' --steps 12 --out runs/grpo-sql-l1

``--env`` takes the same spelling as ``frostgym eval`` (one of SQL-v0, Code-v0, ToolsHTTP-v0,
ToolsMultiTurn-v0, with its arguments in brackets). The model is SmolLM2-135M-Instruct (or
``--tiny``) with TRL's copy of Qwen2.5's chat template in place of its own: SmolLM2's template
drops tool calls, which TRL refuses, and SmolLM2's tokenizer has the ChatML tokens
(``<|im_start|>``, ``<|im_end|>``) Qwen's template writes. TRL parses the model's
``<tool_call>`` blocks, calls the env's tools on a ``frostgym.train.trl`` environment object
(one real episode per completion), and the reward is that episode's grade (``frostgym_score``;
the components are logged at weight 0).

Training rows come from the env's train split, or its dev split where it has no train split
(ToolsHTTP-v0): ``--train-split`` says which. ``--max-new-tokens`` is TRL's budget for the
whole completion, the tool results included (a result that would pass it is dropped and the
episode ends unanswered); ``--max-tool-calls`` caps the tool-calling rounds of one completion.

The cards (``before/``, ``after/``) run the same model and template through frostgym's
``HFAgent`` on the dev split (``--eval-episodes`` tasks x ``--eval-samples``, greedy by
default, ``--eval-max-new-tokens`` per reply), the same plan both times, so ``frostgym compare
OUT/before OUT/after`` pairs them; ``--no-cards`` skips them. The agent renders the env's tool
schemas with the same template (``tools=``) and the env reads the ``<tool_call>`` blocks from
the reply text, so a card is the ``gym.make`` episode of the policy TRL trains, up to what
docs/trainers/trl.md lists (TRL's lossy schemas, its own tool-call parser).

``--random-reward-control`` trains on Bernoulli(p) rewards (p = ``--control-p``, by default the
"before" card's pass@1) from a seeded generator, as ``grpo_math.py`` does; the real rewards are
still logged at weight 0.

Per step, ``OUT/steps.jsonl`` holds the mean reward, its standard deviation, the share of groups
with no reward variance (GRPO learns nothing from those), completion length, KL (``--beta`` above
0), entropy, TRL's ``tools/call_frequency`` and ``tools/failure_frequency``, each grade
component's mean and standard deviation over the batch, and the step's wall time;
``OUT/completions.jsonl`` what every completion did (its tool calls, final text, score);
``OUT/summary.json`` the setup, pass@1 before and after and the trainer's log.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import torch
from grpo_common import STEP_KEYS, load_model, random_reward, rollout_card, step_records, write_steps
from transformers import TrainerCallback
from trl.chat_template_utils import qwen2_5_chat_template
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from frostgym.core.splits import Split
from frostgym.envs.specs import EnvSpec, parse_env_specs
from frostgym.run.plan import make_plan
from frostgym.train.trl import (
    PREFIX,
    TOOL_ENVS,
    RewardFunc,
    completion_text,
    env_dataset,
    environment_factory,
    reward_functions,
    reward_weights,
)

#: ``STEP_KEYS`` and what a tool run adds (TRL's names): how many tool calls a completion made
#: on average, the share of them that failed (unknown tool, arguments that do not bind), and
#: the share of completions cut at ``max_completion_length``.
TOOL_STEP_KEYS = (
    *STEP_KEYS,
    "tools/call_frequency",
    "tools/failure_frequency",
    "completions/clipped_ratio",
)


def train_split(spec: EnvSpec, asked: str | None) -> Split:
    """``asked``, else ``train`` where the env has train tasks, else ``dev``."""
    if asked:
        return cast(Split, asked)
    try:
        plan = make_plan([spec.env_id], split="train", episodes=None, samples=1, seed=0, env_kwargs=spec.kwargs)
    except ValueError:  # an unbounded train split ("pass a number of episodes")
        return "train"
    return "train" if plan else "dev"


def split_size(spec: EnvSpec, split: str) -> int | None:
    """How many tasks ``split`` holds, None where it is unbounded."""
    try:
        return len(make_plan([spec.env_id], split=split, episodes=None, samples=1, seed=0, env_kwargs=spec.kwargs))
    except ValueError:
        return None


def recorded(func: RewardFunc, path: Path) -> RewardFunc:
    """``func`` (keeping its name, so its weight stays), writing one line per completion to
    ``path``: the reward call's index (one call per step), the tools it called, the final
    reply's first 300 characters and its reward."""
    calls = 0

    def wrapper(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        nonlocal calls
        calls += 1
        rewards = func(prompts=prompts, completions=completions, **kwargs)
        with path.open("a") as f:
            for i, (completion, reward) in enumerate(zip(completions, rewards, strict=True)):
                messages = completion if isinstance(completion, list) else []
                tool_calls = [
                    call.get("function", call).get("name")
                    for m in messages
                    if m.get("role") == "assistant"
                    for call in m.get("tool_calls") or []
                ]
                record = {
                    "step": calls,
                    "task_id": kwargs["task_id"][i],
                    "tool_calls": tool_calls,
                    "tool_results": sum(1 for m in messages if m.get("role") == "tool"),
                    "final": completion_text(completion)[:300],
                    "reward": reward,
                }
                f.write(json.dumps(record) + "\n")
        return rewards

    wrapper.__name__ = func.__name__
    wrapper.__qualname__ = func.__qualname__
    return wrapper


class StepClock(TrainerCallback):
    """Each optimizer step's wall time, in seconds."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._last = time.perf_counter()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._last = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.seconds.append(time.perf_counter() - self._last)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env",
        default="frostgym/ToolsHTTP-v0[level=1]",
        help="one multi-turn env spec, e.g. 'frostgym/SQL-v0[level=1]'",
    )
    parser.add_argument("--tiny", action="store_true", help="random tiny Llama on CPU (smoke run)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", type=Path, default=Path("runs/grpo-tools"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-split", default=None, help="default: train, or dev where the env has no train split")
    parser.add_argument("--batch", type=int, default=None, help="completions per step (default 4 tiny, 8)")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt (a GRPO group)")
    parser.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="completions per forward/backward pass (default: --batch tiny, 2), the rest accumulated: a batch of 8 "
        "~1,500-token sequences in one pass needs over 20 GB",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="per completion, tool results included (default 32 tiny, 384)"
    )
    parser.add_argument("--max-tool-calls", type=int, default=2, help="tool-calling rounds per completion")
    parser.add_argument("--learning-rate", type=float, default=None, help="default 1e-4 tiny, 1e-5")
    parser.add_argument(
        "--beta", type=float, default=0.0, help="KL coefficient (TRL's default 0: no reference model, no KL logged)"
    )
    parser.add_argument("--random-reward-control", action="store_true")
    parser.add_argument(
        "--control-p", type=float, default=None, help="the control's reward rate (default: pass@1 before)"
    )
    parser.add_argument("--no-cards", action="store_true", help="no before/after cards (per-step rewards only)")
    parser.add_argument(
        "--eval-episodes", type=int, default=None, help="dev tasks per card (default 2 tiny, 8; 0: all)"
    )
    parser.add_argument("--eval-samples", type=int, default=1, help="episodes per dev task in each card")
    parser.add_argument("--eval-temperature", type=float, default=0.0, help="sampling temperature of the cards")
    parser.add_argument("--eval-max-new-tokens", type=int, default=None, help="per reply (default 32 tiny, 128)")
    args = parser.parse_args()

    (spec,) = parse_env_specs(args.env)
    if spec.env_id not in TOOL_ENVS:
        parser.error(f"{spec.env_id} is not a multi-turn tool id ({', '.join(TOOL_ENVS)}): use grpo_math.py")
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    batch = args.batch or (4 if args.tiny else 8)
    micro = args.micro_batch or (batch if args.tiny else min(2, batch))
    if batch % micro:
        parser.error(f"--batch {batch} is not a multiple of --micro-batch {micro}")
    max_new_tokens = args.max_new_tokens or (32 if args.tiny else 384)
    eval_tokens = args.eval_max_new_tokens or (32 if args.tiny else 128)
    episodes = None if args.eval_episodes == 0 else args.eval_episodes or (2 if args.tiny else 8)
    # The tiny model's positions must hold a ToolsHTTP-v0 prompt (up to ~1,500 tokens) and the completion.
    model, tokenizer = load_model(
        args.tiny, args.seed, args.out, chat_template=qwen2_5_chat_template, max_positions=4096
    )

    def card(trained: Any, name: str) -> float | None:  # the same plan and sampling before and after
        if args.no_cards:
            return None
        return rollout_card(
            trained,
            tokenizer,
            spec,
            args.out / name,
            episodes=episodes,
            seed=args.seed,
            max_new_tokens=eval_tokens,
            samples=args.eval_samples,
            temperature=args.eval_temperature,
        )

    before = card(model, "before")
    cards_s = time.perf_counter() - started

    split = train_split(spec, args.train_split)
    prompts = max(1, args.steps * batch // args.generations)  # one row per GRPO group
    size = split_size(spec, split)
    data = env_dataset(
        spec.env_id, split=split, n=prompts if size is None else min(prompts, size), seed=args.seed, **spec.kwargs
    )
    funcs: list[Any] = reward_functions(spec.env_id, **spec.kwargs)
    weights = reward_weights(funcs)
    completions_log = args.out / "completions.jsonl"
    completions_log.unlink(missing_ok=True)
    funcs = [recorded(f, completions_log) if f.__name__ == f"{PREFIX}score" else f for f in funcs]
    control_p = None
    if args.random_reward_control:
        control_p = args.control_p if args.control_p is not None else (before or 0.0)
        funcs, weights = [random_reward(control_p, args.seed), *funcs], [1.0] + [0.0] * len(funcs)
    config = GRPOConfig(
        output_dir=str(args.out / "trainer"),
        max_steps=args.steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=batch // micro,  # one generation of `batch` completions per optimizer step
        num_generations=args.generations,
        max_completion_length=max_new_tokens,
        max_tool_calling_iterations=args.max_tool_calls,
        learning_rate=args.learning_rate or (1e-4 if args.tiny else 1e-5),
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
    clock = StepClock()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        environment_factory=cast(Any, environment_factory(spec.env_id, **spec.kwargs)),  # TRL's protocol: reset()
        callbacks=[clock],
    )
    trained_at = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - trained_at

    components = tuple(
        key
        for entry in trainer.state.log_history
        for key in entry
        if key.startswith("rewards/") and key.endswith(("/mean", "/std"))
    )
    steps = step_records(trainer.state.log_history, (*TOOL_STEP_KEYS, *dict.fromkeys(components)))
    for step, seconds in zip(steps, clock.seconds, strict=False):
        step["wall_s"] = round(seconds, 1)
    write_steps(args.out / "steps.jsonl", steps)

    after_at = time.perf_counter()
    after = card(trainer.model, "after")
    cards_s += time.perf_counter() - after_at
    summary = {
        "env": str(spec),
        "model": "tiny" if args.tiny else "SmolLM2-135M-Instruct",
        "chat_template": "trl.chat_template_utils.qwen2_5_chat_template",
        "train_split": split,
        "train_rows": len(data),
        "steps": args.steps,
        "batch": batch,
        "micro_batch": micro,
        "generations": args.generations,
        "max_completion_length": max_new_tokens,
        "max_tool_calling_iterations": args.max_tool_calls,
        "beta": args.beta,
        "random_reward_control": args.random_reward_control,
        "control_p": control_p,
        "cards": None
        if args.no_cards
        else {
            "split": "dev",
            "episodes": episodes,
            "samples": args.eval_samples,
            "temperature": args.eval_temperature,
            "max_new_tokens": eval_tokens,
        },
        "pass@1_before": before,
        "pass@1_after": after,
        "groups_with_reward_variance": sum(
            round((1 - s.get("frac_reward_zero_std", 1.0)) * (batch // args.generations)) for s in steps
        ),
        "groups": len(steps) * (batch // args.generations),
        "train_s": round(train_s, 1),
        "cards_s": round(cards_s, 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "log_history": trainer.state.log_history,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if k != "log_history"}))


if __name__ == "__main__":
    main()
