"""What a trainer adapter adds to a step, as a ratio to ``env.step`` on the same episodes.

For each id (``frostgym/Arithmetic-v0`` and ``frostgym/SQL-v0`` by default) the oracle's
episodes of ``--tasks`` tasks (``task_rows``, dev split; the oracle's replies as the text a
model would produce, computed once) are played, interleaved, by each side:

1. direct: the frozen env itself (``make_env``'s unwrapped env, made once), ``reset`` on the
   task, then ``env.step(text)`` per reply;
2. one line per adapter, the episode as its trainer plays it: ``skyrl_gym`` makes a
   ``FrozenTextEnv`` through ``skyrl_gym.make`` with the row's extras, ``init``, then
   ``step(text)`` (SkyRL's generator makes one env per trajectory).
   ``verifiers`` takes each step as ``FrostgymEnv.run`` does, less the model call and
   verifiers' turn machinery (``play_verifiers``).

Only the steps are timed (``perf_counter`` around each call, summed); the per-episode
figure (make + reset/init + steps) is printed beside it. Each side runs ``--repeats`` times
after a warm-up, each run after ``gc.collect()``; the table shows the median run, and the
ratio is the median of the per-run ratios (each adapter run against the direct run just
before it, which share the machine's state of the moment). The target (issue 37) is an
overhead under 10% per step. An adapter is one entry of ``ADAPTERS``: a function that plays
the episodes and returns (step seconds, episode seconds, steps).

Run from the repository root: ``python benchmarks/adapter_overhead.py [--tasks 100] [--repeats 9] [--json PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, write_json

from frostgym.envs.registry import make_env
from frostgym.tools.calls import structured_to_text
from frostgym.train.session import TaskRow, task_rows

IDS = ("frostgym/Arithmetic-v0", "frostgym/SQL-v0")


@dataclass(frozen=True)
class Episode:
    row: TaskRow
    actions: list[str]


Timing = tuple[float, float, int]  # step seconds, episode seconds, steps


def oracle_episodes(env_id: str, n: int) -> list[Episode]:
    env = make_env(env_id, "dev", {})
    episodes = []
    for row in task_rows(env_id, split="dev", n=n, seed=0):
        env.reset(seed=row.episode_seed, options={"task_id": row.task_id})
        actions: list[str] = []
        done = False
        while not done:
            action = env.oracle_action()
            text = action if isinstance(action, str) else structured_to_text(action)
            actions.append(text)
            _, _, done, _, _ = env.step(text)
        episodes.append(Episode(row, actions))
    env.close()
    return episodes


def play_direct(env_id: str, episodes: list[Episode]) -> Timing:
    env = make_env(env_id, "dev", {})
    stepping = total = 0.0
    steps = 0
    for episode in episodes:
        began = time.perf_counter()
        env.reset(seed=episode.row.episode_seed, options={"task_id": episode.row.task_id})
        for text in episode.actions:
            t = time.perf_counter()
            env.step(text)
            stepping += time.perf_counter() - t
            steps += 1
        total += time.perf_counter() - began
    env.close()
    return stepping, total, steps


def play_skyrl_gym(env_id: str, episodes: list[Episode]) -> Timing:
    import skyrl_gym

    from frostgym.integrations.skyrl_gym import register_skyrl_envs, skyrl_row

    register_skyrl_envs()
    rows = []
    for episode in episodes:  # the dataset rows, built before timing (they are written once, offline)
        data = skyrl_row(episode.row)
        rows.append((data.pop("prompt"), data.pop("env_class"), data))
    stepping = total = 0.0
    steps = 0
    for episode, (prompt, env_class, extras) in zip(episodes, rows, strict=True):
        began = time.perf_counter()
        env = skyrl_gym.make(env_class, env_config={}, extras=dict(extras))
        env.init(prompt)
        for text in episode.actions:
            t = time.perf_counter()
            env.step(text)
            stepping += time.perf_counter() - t
            steps += 1
        env.close()
        total += time.perf_counter() - began
    return stepping, total, steps


def play_verifiers(env_id: str, episodes: list[Episode]) -> Timing:
    """Each step as ``FrostgymEnv.run`` takes it (verifiers 0.4.0), less the model call and
    verifiers' own turn machinery: the segment's assistant message to an action
    (``last_assistant``, ``assistant_action``), ``TrainingEpisode.step``, and the added
    messages back to verifiers messages for the next turn; each episode borrows its
    ``TrainingEpisode`` from the env and gives it back, as ``run`` does."""
    import verifiers.v1 as vf

    from frostgym.integrations.verifiers import last_assistant, load_environment, vf_message
    from frostgym.train.session import assistant_action

    env = load_environment(env_id, split="dev", n=len(episodes), seed=0)
    info = {"env_id": env_id, "split": "dev", "env_kwargs": {}}
    replies = [[[vf.AssistantMessage(content=text)] for text in episode.actions] for episode in episodes]
    stepping = total = 0.0
    steps = 0
    for episode, segments in zip(episodes, replies, strict=True):
        began = time.perf_counter()
        frozen = env.borrow(info)
        frozen.start(episode.row.task_id, episode.row.episode_seed)
        for segment in segments:
            t = time.perf_counter()
            result = frozen.step(assistant_action(last_assistant(segment)))
            if not result.done:
                _ = [vf_message(m) for m in result.messages]
            stepping += time.perf_counter() - t
            steps += 1
        env.give_back(frozen)
        total += time.perf_counter() - began
    asyncio.run(env.stop())  # closes the frozen envs it lent
    return stepping, total, steps


def play_trl(env_id: str, episodes: list[Episode]) -> Timing:
    """Each episode as TRL's ``GRPOTrainer`` plays it through ``frostgym.train.trl``. A
    single-turn id: the score reward function on one batch of every episode's reply (it
    resets an env per completion, so compare its *episode* ratio). An id with an
    ``environment_factory``: the factory object's ``reset(**row)``, then per reply its tool
    methods, gathered on one event loop as TRL's tool loop runs them (the calls parsed
    before timing: TRL's own parser does that), or, for a reply without calls, the score
    reward function reading ``final_grade`` from the object."""
    import asyncio

    from frostgym.tools.calls import parse_reply
    from frostgym.train.trl import TOOL_ENVS, environment_factory, reward_functions, rows_dataset

    score = reward_functions(env_id)[-1]
    data = [dict(row) for row in rows_dataset([episode.row for episode in episodes])]
    columns = {key: [row[key] for row in data] for key in ("task_id", "episode_seed", "split")}
    if env_id not in TOOL_ENVS:
        completions = [[{"role": "assistant", "content": episode.actions[0]}] for episode in episodes]
        prompts = [row["prompt"] for row in data]
        began = time.perf_counter()
        score(prompts=prompts, completions=completions, **columns)
        took = time.perf_counter() - began
        return took, took, len(episodes)
    factory = environment_factory(env_id)
    loop = asyncio.new_event_loop()
    stepping = total = 0.0
    steps = 0
    for episode, row in zip(episodes, data, strict=True):
        calls = [[(c.name, dict(c.arguments)) for c in parse_reply(text).calls] for text in episode.actions]
        one = {key: [row[key]] for key in columns}
        began = time.perf_counter()
        env = (factory[row["environment"]] if isinstance(factory, dict) else factory)()
        env.reset(**{k: v for k, v in row.items() if k != "environment"})
        for text, reply_calls in zip(episode.actions, calls, strict=True):
            t = time.perf_counter()
            if reply_calls:
                methods = [getattr(env, name) for name, _ in reply_calls]
                gathered = asyncio.gather(*(m(**args) for m, (_, args) in zip(methods, reply_calls, strict=True)))
                loop.run_until_complete(gathered)
            else:
                completion = [[{"role": "assistant", "content": text}]]
                score(prompts=[row["prompt"]], completions=completion, environments=[env], **one)
            stepping += time.perf_counter() - t
            steps += 1
        total += time.perf_counter() - began
    loop.close()
    return stepping, total, steps


#: One entry per adapter: plays the episodes as its trainer does.
ADAPTERS: dict[str, Callable[[str, list[Episode]], Timing]] = {
    "skyrl_gym": play_skyrl_gym,
    "verifiers": play_verifiers,
    "trl": play_trl,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", nargs="+", default=list(IDS))
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--adapters", nargs="+", default=list(ADAPTERS), choices=list(ADAPTERS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    rows: list[list[str]] = []
    results: dict[str, Any] = {}
    for env_id in args.ids:
        episodes = oracle_episodes(env_id, args.tasks)
        runs: dict[str, list[Timing]] = {"direct": [], **{name: [] for name in args.adapters}}
        play_direct(env_id, episodes)  # warm-up: imports, task materialisation, fixture check
        for name in args.adapters:
            ADAPTERS[name](env_id, episodes)
        for _ in range(args.repeats):
            for name, play in [("direct", play_direct), *((n, ADAPTERS[n]) for n in args.adapters)]:
                gc.collect()
                runs[name].append(play(env_id, episodes))
        steps = runs["direct"][0][2]
        direct_step = statistics.median(r[0] for r in runs["direct"])
        direct_episode = statistics.median(r[1] for r in runs["direct"])
        rows.append([env_id, "env.step (direct)", f"{direct_step / steps * 1e6:.1f}", "1.000", "", ""])
        results[env_id] = {"episodes": len(episodes), "steps": steps, "direct": runs["direct"]}
        for name in args.adapters:
            step_ratio = statistics.median(a[0] / d[0] for a, d in zip(runs[name], runs["direct"], strict=True))
            episode_ratio = statistics.median(a[1] / d[1] for a, d in zip(runs[name], runs["direct"], strict=True))
            adapter_step = statistics.median(r[0] for r in runs[name])
            adapter_episode = statistics.median(r[1] for r in runs[name])
            rows.append(
                [
                    "",
                    name,
                    f"{adapter_step / steps * 1e6:.1f}",
                    f"{step_ratio:.3f}",
                    f"{(adapter_episode - direct_episode) / len(episodes) * 1e6:+.1f}",
                    f"{episode_ratio:.3f}",
                ]
            )
            results[env_id][name] = {"runs": runs[name], "step_ratio": step_ratio, "episode_ratio": episode_ratio}
    print(f"oracle episodes, {args.tasks} dev tasks per id; median of {args.repeats} interleaved runs per side")
    print(
        format_table(
            ["id", "side", "us/step", "step ratio", "us/episode extra", "episode ratio"],
            rows,
            [False, False, True, True, True, True],
        )
    )
    print("target: step ratio < 1.10 (overhead under 10%)")
    if args.json:
        write_json(args.json, {"machine": machine_info(["skyrl-gym", "gymnasium"]), "results": results})


if __name__ == "__main__":
    main()
