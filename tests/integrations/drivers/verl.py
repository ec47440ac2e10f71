"""The verl adapter's driver for the adapter contract: a row's episode played by verl's own
agent-loop machinery.

The loop is built as verl's ``AgentLoopWorker`` builds it (``hydra.utils.instantiate`` of
the registry entry ``AGENT_NAME`` names, with verl's ``DictConfigWrap``/``ToolListWrap``
arguments and ``RLHFDataset``), from a real tokenizer (SmolLM2's, offline), and run with the
fields verl's ``RLHFDataset`` gives ``run`` for a ``verl_rows`` row. The one stand-in is the
model server: ``ScriptedServer.generate`` returns the given actions, one per call, as that
tokenizer's ids (then the end-of-turn token), as a server returns what the model sampled.
What the agent saw is what the loop tokenised: the first messages and the messages each step
added (``extra_fields["frostgym"]``); the grade is the env's.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

from frostgym.core.messages import Action
from frostgym.train.session import TaskRow, messages_text
from tests.integrations.reference import Played

PACKAGE = "verl"
#: Long enough that no contract episode is cut by verl's length limits.
MAX_LENGTH = 1 << 17


@functools.cache
def tokenizer() -> Any:
    import transformers

    from frostgym.agents.smollm2 import ensure_converted

    return transformers.AutoTokenizer.from_pretrained(ensure_converted(), local_files_only=True)


def reply_ids(text: str) -> list[int]:
    tok = tokenizer()
    return [*tok.encode(text, add_special_tokens=False), tok.eos_token_id]


class ScriptedServer:
    """verl's ``LLMServerClient.generate`` contract, answering with scripted replies; it
    records each prompt it was sent (``prompts``)."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.prompts: list[list[int]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        if len(self.prompts) >= len(self.replies):
            raise AssertionError("the agent loop asked for more replies than the episode has")
        self.prompts.append(list(prompt_ids))
        ids = reply_ids(self.replies[len(self.prompts) - 1])
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def config(*, max_assistant_turns: int | None = None, response_length: int = MAX_LENGTH) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": MAX_LENGTH,
                    "response_length": response_length,
                    "multi_turn": {"max_assistant_turns": max_assistant_turns, "tool_config_path": None},
                },
                "model": {"path": "smollm2", "tokenizer_path": "smollm2"},
            },
            "data": {"apply_chat_template_kwargs": {}},
        }
    )


def dataset_kwargs(row: dict[str, Any]) -> dict[str, Any]:
    """What verl's ``RLHFDataset.__getitem__`` and ``AgentLoopWorker`` pass ``run`` for a row
    (``agent_name`` is consumed by the worker to pick the loop)."""
    extra = dict(row["extra_info"])
    kwargs = {k: v for k, v in row.items() if k != "agent_name"}
    kwargs.update(
        raw_prompt=row["prompt"],
        index=extra.get("index", 0),
        tools_kwargs=extra.get("tools_kwargs", {}),
        interaction_kwargs=extra.get("interaction_kwargs", {}),
    )
    return kwargs


def build_loop(agent_name: str, server: Any, trainer_config: Any) -> Any:
    """The agent loop registered as ``agent_name``, built as verl's ``AgentLoopWorker`` builds
    it (one per row), with ``server`` as its server manager."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    import frostgym.integrations.verl  # noqa: F401  (registers the loop)

    return hydra.utils.instantiate(
        config=_agent_loop_registry[agent_name],
        trainer_config=DictConfigWrap(config=trainer_config),
        server_manager=server,
        tokenizer=tokenizer(),
        processor=None,
        hf_model_type="llama",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(trainer_config.data),
        tools=ToolListWrap([]),
    )


async def run_loop(row: dict[str, Any], server: ScriptedServer, trainer_config: Any) -> Any:
    """Build the row's agent loop as verl's worker does and await its ``run``."""
    loop = build_loop(row["agent_name"], server, trainer_config)
    return await loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}, **dataset_kwargs(row))


def play_output(row: TaskRow, actions: Sequence[Action], **config_kwargs: Any) -> tuple[Any, ScriptedServer]:
    from frostgym.integrations.verl import verl_rows

    if not all(isinstance(a, str) for a in actions):
        raise TypeError("verl's agent loop replies in text: the driver plays text actions only")
    server = ScriptedServer([str(a) for a in actions])
    output = asyncio.run(run_loop(verl_rows([row])[0], server, config(**config_kwargs)))
    return output, server


def play(row: TaskRow, actions: list[Action]) -> Played:
    output, _ = play_output(row, actions)
    seen = output.extra_fields["frostgym"]
    return Played.of(messages_text(seen["first"]), [messages_text(step) for step in seen["added"]], seen["grade"])
