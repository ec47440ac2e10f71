"""The verl adapter (``frostgym.integrations.verl``) against verl 0.9.1's own agent-loop code.

- The adapter contract (``test_adapter_contract.py``'s check, for verl): on two tasks of
  every id, the oracle's and a junk reply's episodes, played by ``FrostgymAgentLoop`` as
  verl's worker builds it, show the agent what ``gym.make`` shows and end with its grade.
- Tokens: every reply is in the response with mask 1 exactly as the server sent it (with
  its logprobs), every env message is there with mask 0, and each turn's prompt to the
  server is the previous one plus the reply and the env's messages (one continuous sequence).
- The run's output through verl's own worker post-processing (padding, ``rm_scores``), the
  dataset rows through verl's ``RLHFDataset`` from Parquet, the YAML registration file,
  ``max_assistant_turns`` and a trajectory cut by ``response_length``.

Run by ``test_verl_adapter.py`` in a process of its own, with verl's packages (installed
apart, in ``.venv/verl-site``) on its path; skipped where verl is not importable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("verl", reason="verl is not installed (docs/trainers/verl.md: Install)")

from frostgym.train.session import TaskRow, messages_text
from tests.integrations.drivers import verl as driver
from tests.integrations.reference import cases, junk_actions, oracle_actions, reference_play

CASES = cases()
MULTI_TURN = next(r for r in CASES if r.env_id == "frostgym/ToolsMultiTurn-v0")


@pytest.mark.slow
@pytest.mark.parametrize("row", CASES, ids=lambda r: r.task_id)
def test_oracle_and_junk_play_the_gym_episode(row: TaskRow) -> None:
    oracle = oracle_actions(row)
    assert driver.play(row, oracle) == reference_play(row, oracle)
    junk = junk_actions(row)
    assert driver.play(row, junk) == reference_play(row, junk)


def spans(mask: list[int]) -> list[tuple[int, int, int]]:
    """``(value, start, end)`` for each run of equal values in ``mask``."""
    out: list[tuple[int, int, int]] = []
    for i, m in enumerate(mask):
        if out and out[-1][0] == m:
            out[-1] = (m, out[-1][1], i + 1)
        else:
            out.append((m, i, i + 1))
    return out


@pytest.mark.slow
def test_the_tokens_are_the_replies_and_the_env_messages_in_one_sequence() -> None:
    actions = oracle_actions(MULTI_TURN)
    output, server = driver.play_output(MULTI_TURN, actions)
    tok = driver.tokenizer()
    ids, mask = output.response_ids, output.response_mask
    assert len(ids) == len(mask) == len(output.response_logprobs)
    runs = spans(mask)
    replies = [ids[a:b] for m, a, b in runs if m == 1]
    assert replies == [driver.reply_ids(str(a)) for a in actions]
    assert [lp for lp, m in zip(output.response_logprobs, mask, strict=True) if m == 1] == [-0.5] * sum(mask)
    assert all(lp == 0.0 for lp, m in zip(output.response_logprobs, mask, strict=True) if m == 0)
    seen = output.extra_fields["frostgym"]
    env_text = [tok.decode(ids[a:b]) for m, a, b in runs if m == 0]
    added = [step for step in seen["added"] if step]
    assert len(env_text) == len(added) == len(actions) - 1
    for text, step in zip(env_text, added, strict=True):
        assert all(content in text for content in messages_text(step))
    prompt_text = tok.decode(output.prompt_ids)
    assert all(content in prompt_text for content in messages_text(seen["first"]))
    # Each prompt the server got is the whole sequence so far: what it generated is never re-tokenised.
    whole = [*output.prompt_ids, *ids]
    assert [len(p) for p in server.prompts] == sorted({len(p) for p in server.prompts})
    assert all(whole[: len(p)] == p for p in server.prompts)
    assert server.prompts[0] == output.prompt_ids
    assert output.reward_score == seen["grade"]["score"] == 1.0
    assert output.num_turns == 1 + len(actions) + (len(actions) - 1)
    assert output.extra_fields["turn_scores"][-1] == 1.0
    assert output.extra_fields["reward_extra_info"] == {"score": 1.0}
    assert seen["metrics"]["score"] == 1.0 and seen["graded"] is True


class _Rollout:
    prompt_length = 4096
    response_length = 4096


@pytest.mark.slow
def test_verls_worker_post_processing_puts_the_score_on_the_last_response_token() -> None:
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from frostgym.integrations.verl import verl_rows

    row = CASES[0]
    output, _ = driver.play_output(row, oracle_actions(row))
    worker: Any = object.__new__(AgentLoopWorker)
    worker.config = driver.config()
    worker.tokenizer, worker.processor, worker.dataset_cls = driver.tokenizer(), None, RLHFDataset
    worker.rollout_config, worker.mm_processor_kwargs = _Rollout(), {}
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    kwargs = driver.dataset_kwargs(verl_rows([row])[0])
    internal = asyncio.run(worker._agent_loop_postprocess(output, False, **kwargs))
    batch = worker._postprocess([internal], input_non_tensor_batch=None, validate=False)
    scores = batch.batch["rm_scores"][0]
    last = int(batch.batch["attention_mask"][0, _Rollout.prompt_length :].sum()) - 1
    assert float(scores[last]) == output.reward_score == 1.0
    assert float(scores.sum()) == 1.0
    assert batch.non_tensor_batch["frostgym"][0]["task_id"] == row.task_id


def test_rows_load_through_verls_dataset(tmp_path: Path) -> None:
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from frostgym.integrations.verl import AGENT_NAME, verl_rows, write_verl_parquet

    rows = [CASES[0], CASES[1]]
    built = verl_rows(rows)
    path = write_verl_parquet(built, tmp_path / "train.parquet")
    config = OmegaConf.create(
        {"cache_dir": str(tmp_path / "cache"), "max_prompt_length": 1 << 16, "filter_overlong_prompts": False}
    )
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=driver.tokenizer(), config=config, processor=None)
    assert len(dataset) == 2
    for i, row in enumerate(rows):
        item = dataset[i]
        assert item["agent_name"] == AGENT_NAME
        assert item["data_source"] == row.env_id
        assert item["index"] == i
        extra = item["extra_info"]
        assert (extra["env_id"], extra["task_id"], int(extra["episode_seed"]), extra["split"]) == (
            row.env_id,
            row.task_id,
            row.episode_seed,
            row.split,
        )
        assert messages_text(item["raw_prompt"]) == _first(row)


def _first(row: TaskRow) -> list[str]:
    return reference_play(row, []).first


def test_task_rows_by_id_match_the_plan() -> None:
    from frostgym.integrations.verl import verl_rows

    rows = verl_rows("frostgym/Arithmetic-v0", split="dev", n=3, seed=0)
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2]
    assert all(r["reward_model"]["ground_truth"] == "" for r in rows)
    assert all(r["extra_info"]["env_kwargs"] == "{}" for r in rows)


def test_the_yaml_file_registers_the_loop_for_verls_workers(tmp_path: Path) -> None:
    import hydra
    from omegaconf import OmegaConf

    from frostgym.integrations.verl import AGENT_NAME, FrostgymAgentLoop, agent_loop_config

    (entry,) = OmegaConf.load(agent_loop_config(tmp_path / "agent_loops.yaml"))
    assert entry.name == AGENT_NAME
    target = hydra.utils.get_class(entry._target_)
    assert target is FrostgymAgentLoop


@pytest.mark.slow
def test_max_assistant_turns_plays_the_shorter_gym_episode() -> None:
    actions = oracle_actions(MULTI_TURN)
    output, server = driver.play_output(MULTI_TURN, actions, max_assistant_turns=2)
    env = gym.make(MULTI_TURN.env_id, split=MULTI_TURN.split, max_turns=2)
    try:
        env.reset(seed=MULTI_TURN.episode_seed, options={"task_id": MULTI_TURN.task_id})
        env.step(actions[0])
        *_, terminated, truncated, info = env.step(actions[1])
    finally:
        env.close()
    assert terminated or truncated
    assert len(server.prompts) == 2
    assert output.extra_fields["frostgym"]["grade"] == info["grade"]
    assert output.reward_score == float(info["grade"]["score"])


@pytest.mark.slow
def test_a_trajectory_cut_by_response_length_is_not_graded() -> None:
    actions = oracle_actions(MULTI_TURN)
    output, server = driver.play_output(MULTI_TURN, actions, response_length=64)
    assert len(server.prompts) == 1
    assert len(output.response_ids) == len(output.response_mask) <= 64
    seen = output.extra_fields["frostgym"]
    assert seen["graded"] is False and seen["grade"] is None
    assert output.reward_score == 0.0
