"""What a trainer adapter adds to a step, as a ratio to ``env.step`` on the same episodes.

For each id (``frostgym/Arithmetic-v0``, ``frostgym/SQL-v0`` and ``frostgym/SQL-v0+run_sql``,
SQL-v0 with one exploring reply first: ``EXPLORE``, by default) the oracle's episodes of
``--tasks`` tasks (``task_rows``, dev split; the oracle's replies as the text a model would
produce, computed once) are played, interleaved, by each side:

1. direct: the frozen env itself (``make_env``'s unwrapped env, made once), ``reset`` on the
   task, then ``env.step(text)`` per reply;
2. one line per adapter, the episode as its trainer plays it: ``skyrl_gym`` makes a
   ``FrozenTextEnv`` through ``skyrl_gym.make`` with the row's extras, ``init``, then
   ``step(text)`` (SkyRL's generator makes one env per trajectory).
   ``verifiers`` takes each step as ``FrostgymEnv.run`` does, less the model call and
   verifiers' turn machinery (``play_verifiers``). ``trl`` plays it as TRL's
   ``GRPOTrainer`` does (``play_trl``). ``verl`` runs ``FrostgymAgentLoop`` as verl's worker
   builds and awaits it, with a stand-in model server that returns the oracle's replies as
   token ids (encoded before timing); its *step* is the loop's env part of one turn
   (``FrostgymAgentLoop._env_turn``: decode the reply's ids, ``TrainingEpisode.step`` in a
   worker thread, and the env's added messages into ids with verl's token builder,
   ``ct_merge_context_msg``, in a worker thread), its *episode* the whole ``run`` (env from
   the pool, reset, the first messages templated, each turn, the ``AgentLoopOutput``). For a
   single-turn id without tools (``single_turn``: Arithmetic-v0), one more line sets that ``run`` against
   what a hand-written verl integration costs: verl's own ``SingleTurnAgentLoop.run`` on the
   same prompt with the same server, then the reply decoded and the direct env episode
   (``reset``, ``step``) to grade it (``play_verl_single_turn``). verl imports only with
   ``PYTHONPATH=.venv/verl-site`` (docs/trainers/verl.md: Install); without it the default
   ``--adapters`` leaves it out.

Only the steps are timed (``perf_counter`` around each call, summed); the per-episode
figure (make + reset/init + steps) is printed beside it. Each side runs ``--repeats`` times
after a warm-up, each run after ``gc.collect()``; the table shows the median run, and the
ratio is the median of the per-run ratios (each adapter run against the direct run just
before it, which share the machine's state of the moment). The target (issue 37) is an
overhead under 10% per step. An adapter is one entry of ``ADAPTERS``: a function that plays
the episodes and returns (step seconds, episode seconds, steps).

Run from the repository root: ``python benchmarks/adapter_overhead.py [--tasks 100] [--repeats 9] [--json PATH]``
(``PYTHONPATH=.venv/verl-site python benchmarks/...`` to include verl).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import re
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, write_json

from frostgym.envs.registry import make_env
from frostgym.tools.calls import structured_to_text
from frostgym.train.session import TaskRow, TrainingEpisode, task_rows

IDS = ("frostgym/Arithmetic-v0", "frostgym/SQL-v0", "frostgym/SQL-v0+run_sql")
#: ``ID+run_sql``: each oracle episode of ID starts with one exploring reply, the oracle's own
#: query in ``<sql></sql>`` (the env answers with its result; TRL, whose model calls tools,
#: gets it as the same ``run_sql`` call), so that a turn between replies, the adapters' tool
#: paths and verl's encoding of an env message into ids run on every episode (the oracle
#: alone answers SQL-v0 in one reply).
EXPLORE = "+run_sql"
ANSWER = re.compile(r"<answer>(.*)</answer>", re.DOTALL)
EXPLORING = re.compile(r"<sql>(.*)</sql>", re.DOTALL)


@dataclass(frozen=True)
class Episode:
    row: TaskRow
    actions: list[str]


Timing = tuple[float, float, int]  # step seconds, episode seconds, steps


def oracle_episodes(env_id: str, n: int, *, explore: bool = False) -> list[Episode]:
    env = make_env(env_id, "dev", {})
    episodes = []
    for row in task_rows(env_id, split="dev", n=n, seed=0):
        env.reset(seed=row.episode_seed, options={"task_id": row.task_id})
        actions: list[str] = []
        done = False
        if explore:
            answer = ANSWER.search(str(env.oracle_action()))
            if answer is None:
                raise ValueError(f"{env_id}'s oracle gave no <answer> to explore with")
            actions.append(f"<sql>{answer.group(1).strip()}</sql>")
            _, _, done, _, _ = env.step(actions[-1])
            if done:
                raise ValueError(f"{env_id} ended the episode at a run_sql call")
        while not done:
            action = env.oracle_action()
            text = action if isinstance(action, str) else structured_to_text(action)
            actions.append(text)
            _, _, done, _, _ = env.step(text)
        episodes.append(Episode(row, actions))
    env.close()
    return episodes


def single_turn(env_id: str) -> bool:
    """One reply per episode and no tools: what verl's ``SingleTurnAgentLoop`` can play."""
    episode = TrainingEpisode(env_id, "dev")
    try:
        return episode.max_turns == 1 and not episode.tools
    finally:
        episode.close()


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


async def _gather(calls: Iterable[Awaitable[Any]]) -> list[Any]:
    return await asyncio.gather(*calls)  # inside the loop: gather needs a running (or current) loop


def _trl_calls(text: str, parse_reply: Callable[[str], Any]) -> list[tuple[str, dict[str, Any]]]:
    """A reply's tool calls as TRL's parser gives them; an exploring ``<sql>`` reply (the
    ``+run_sql`` episodes) is the ``run_sql`` call a tool-calling model makes instead."""
    calls = [(c.name, dict(c.arguments)) for c in parse_reply(text).calls]
    exploring = EXPLORING.fullmatch(text.strip())
    return calls or ([("run_sql", {"query": exploring.group(1)})] if exploring else [])


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
        calls = [_trl_calls(text, parse_reply) for text in episode.actions]
        one = {key: [row[key]] for key in columns}
        began = time.perf_counter()
        env = (factory[row["environment"]] if isinstance(factory, dict) else factory)()
        env.reset(**{k: v for k, v in row.items() if k != "environment"})
        for text, reply_calls in zip(episode.actions, calls, strict=True):
            t = time.perf_counter()
            if reply_calls:
                methods = [getattr(env, name) for name, _ in reply_calls]
                loop.run_until_complete(_gather(m(**args) for m, (_, args) in zip(methods, reply_calls, strict=True)))
            else:
                completion = [[{"role": "assistant", "content": text}]]
                score(prompts=[row["prompt"]], completions=completion, environments=[env], **one)
            stepping += time.perf_counter() - t
            steps += 1
        total += time.perf_counter() - began
    loop.close()
    return stepping, total, steps


#: What verl's rollout passes ``run`` as sampling parameters (the stand-in server ignores them).
VERL_SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
VERL_HINT = "verl does not import here: run with PYTHONPATH=.venv/verl-site (docs/trainers/verl.md: Install)"


def verl_available() -> bool:
    try:
        import frostgym.integrations.verl  # noqa: F401
    except Exception:  # ImportError without .venv/verl-site; hydra's ANTLR error with the venv's ANTLR
        return False
    return True


class _IdsServer:
    """verl's ``LLMServerClient.generate`` contract, answering with one episode's replies as
    token ids encoded before timing (the driver's ``reply_ids``: the text, then end of turn)."""

    def __init__(self, replies: list[list[int]]) -> None:
        self.replies = replies
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        ids = self.replies[self.calls]
        self.calls += 1
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def _verl_loop(agent_name: str, server: _IdsServer, trainer_config: Any) -> Any:
    """The row's agent loop, built as verl's ``AgentLoopWorker`` builds it (one per row)."""
    from tests.integrations.drivers.verl import build_loop

    return build_loop(agent_name, server, trainer_config)


def _verl_inputs(episodes: list[Episode]) -> tuple[list[dict[str, Any]], list[list[list[int]]], Any]:
    """Before timing: each episode's ``run`` arguments (``verl_rows``, as verl's dataset gives
    them), its replies as ids, and the trainer config (no length cap cuts an episode)."""
    from frostgym.integrations.verl import verl_rows
    from tests.integrations.drivers.verl import config, dataset_kwargs, reply_ids

    # Each loop's builder says, once per loop, that SmolLM2's model_type (llama) has no builder
    # of its own and gets verl's default one, the builder every run here uses.
    logging.getLogger("verl.utils.tokenizer.continuous_token_wiring").setLevel(logging.ERROR)
    rows = verl_rows([episode.row for episode in episodes])
    replies = [[reply_ids(text) for text in episode.actions] for episode in episodes]
    return [dataset_kwargs(row) for row in rows], replies, config()


class _TurnClock:
    """Wraps a loop's ``_env_turn``: sums the time of each call and counts them."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.turns = 0

    def wrap(self, env_turn: Callable[..., Any]) -> Callable[..., Any]:
        async def timed(*args: Any) -> Any:
            began = time.perf_counter()
            try:
                return await env_turn(*args)
            finally:
                self.seconds += time.perf_counter() - began
                self.turns += 1

        return timed


def play_verl(env_id: str, episodes: list[Episode]) -> Timing:
    """Each episode as verl's worker plays it through ``FrostgymAgentLoop`` (one loop object
    per row, built untimed): step = its ``_env_turn`` calls, episode = its whole ``run``."""
    from frostgym.integrations.verl import AGENT_NAME

    inputs, replies, trainer_config = _verl_inputs(episodes)

    async def play() -> Timing:
        clock = _TurnClock()
        total = 0.0
        for kwargs, ids in zip(inputs, replies, strict=True):
            server = _IdsServer(ids)
            loop = _verl_loop(AGENT_NAME, server, trainer_config)
            loop._env_turn = clock.wrap(loop._env_turn)
            began = time.perf_counter()
            out = await loop.run(dict(VERL_SAMPLING), **kwargs)
            total += time.perf_counter() - began
            if server.calls != len(ids) or not out.extra_fields["frostgym"]["graded"]:
                raise AssertionError(f"verl played {kwargs['extra_info']['task_id']} differently from the oracle")
        return clock.seconds, total, clock.turns

    return asyncio.run(play())


def play_verl_single_turn(env_id: str, episodes: list[Episode]) -> Timing:
    """A hand-written verl integration of a one-reply id: verl's ``SingleTurnAgentLoop.run``
    on the row's prompt with the same server, then the reply decoded and graded by the
    direct env (``reset``, ``step``; the env made once, untimed). step = ``env.step``,
    episode = ``run`` + decode + ``reset`` + ``step``."""
    import verl.experimental.agent_loop.single_turn_agent_loop  # noqa: F401  (registers single_turn_agent)

    from tests.integrations.drivers.verl import tokenizer

    inputs, replies, trainer_config = _verl_inputs(episodes)
    tok = tokenizer()
    env = make_env(env_id, "dev", {})

    async def play() -> Timing:
        stepping = total = 0.0
        for episode, kwargs, ids in zip(episodes, inputs, replies, strict=True):
            loop = _verl_loop("single_turn_agent", _IdsServer(ids), trainer_config)
            began = time.perf_counter()
            out = await loop.run(dict(VERL_SAMPLING), **kwargs)
            reply = tok.decode(out.response_ids, skip_special_tokens=True)
            env.reset(seed=episode.row.episode_seed, options={"task_id": episode.row.task_id})
            t = time.perf_counter()
            env.step(reply)
            took = time.perf_counter() - t
            total += time.perf_counter() - began
            stepping += took
        return stepping, total, len(episodes)

    try:
        return asyncio.run(play())
    finally:
        env.close()


#: One entry per adapter: plays the episodes as its trainer does.
ADAPTERS: dict[str, Callable[[str, list[Episode]], Timing]] = {
    "skyrl_gym": play_skyrl_gym,
    "verifiers": play_verifiers,
    "trl": play_trl,
    "verl": play_verl,
}
#: Hand-written integrations an adapter's whole episode is set against, on ids whose episodes
#: are one reply: adapter name -> (the line's label, how it plays).
HAND_WRITTEN: dict[str, tuple[str, Callable[[str, list[Episode]], Timing]]] = {
    "verl": ("verl run / SingleTurnAgentLoop+env", play_verl_single_turn),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", nargs="+", default=list(IDS))
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--adapters", nargs="+", default=None, choices=list(ADAPTERS), help="default: all that import")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.adapters is None:
        args.adapters = [name for name in ADAPTERS if name != "verl" or verl_available()]
    elif "verl" in args.adapters and not verl_available():
        parser.error(VERL_HINT)

    rows: list[list[str]] = []
    results: dict[str, Any] = {}
    compared = False
    for name_of_id in args.ids:
        env_id = name_of_id.removesuffix(EXPLORE)
        episodes = oracle_episodes(env_id, args.tasks, explore=name_of_id.endswith(EXPLORE))
        hand = [name for name in args.adapters if name in HAND_WRITTEN and single_turn(env_id)]
        sides = [("direct", play_direct), *((n, ADAPTERS[n]) for n in args.adapters)]
        sides += [(f"{n}:hand", HAND_WRITTEN[n][1]) for n in hand]
        runs: dict[str, list[Timing]] = {name: [] for name, _ in sides}
        compared = compared or bool(hand)
        for _, play in sides:  # warm-up: imports, task materialisation, fixture check, env pools
            play(env_id, episodes)
        for _ in range(args.repeats):
            for name, play in sides:
                gc.collect()
                runs[name].append(play(env_id, episodes))
        steps = runs["direct"][0][2]
        direct_step = statistics.median(r[0] for r in runs["direct"])
        direct_episode = statistics.median(r[1] for r in runs["direct"])
        rows.append([name_of_id, "env.step (direct)", f"{direct_step / steps * 1e6:.1f}", "1.000", "", ""])
        results[name_of_id] = {"episodes": len(episodes), "steps": steps, "direct": runs["direct"]}
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
            results[name_of_id][name] = {"runs": runs[name], "step_ratio": step_ratio, "episode_ratio": episode_ratio}
        for name in hand:
            label, key = HAND_WRITTEN[name][0], f"{name}:hand"
            ratio = statistics.median(a[1] / h[1] for a, h in zip(runs[name], runs[key], strict=True))
            extra = statistics.median(r[1] for r in runs[name]) - statistics.median(r[1] for r in runs[key])
            rows.append(["", label, "", "", f"{extra / len(episodes) * 1e6:+.1f}", f"{ratio:.3f}"])
            results[name_of_id][key] = {"runs": runs[key], "label": label, "episode_ratio": ratio}
    print(f"oracle episodes, {args.tasks} dev tasks per id; median of {args.repeats} interleaved runs per side")
    print(
        format_table(
            ["id", "side", "us/step", "step ratio", "us/episode extra", "episode ratio"],
            rows,
            [False, False, True, True, True, True],
        )
    )
    print("target: step ratio < 1.10 (overhead under 10%)")
    if compared:
        print("the 'run / ...' line: the adapter's whole episode over a hand-written integration's (episode ratio)")
    if args.json:
        packages = ["skyrl-gym", "gymnasium", "verifiers", "trl", "transformers", "verl"]
        write_json(args.json, {"machine": machine_info(packages), "adapters": args.adapters, "results": results})


if __name__ == "__main__":
    main()
