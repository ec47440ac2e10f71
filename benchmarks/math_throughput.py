"""Throughput and verdicts of frostgym's math env and grader next to reasoning-gym and math-verify.

Everything runs in one process on the same outputs:

1. frostgym full loop: ``reset(seed) -> oracle_action() -> step(reply)`` on ``frostgym/Math-v0`` (test split),
   once with the oracle reply and once with a wrong reply (the ``<answer>`` number changed).
2. frostgym grader alone: ``grade_math(reply, gold)`` on the (reply, gold) pairs that loop 1 produced.
3. reasoning-gym's own scoring: ``GSMSymbolicDataset.score_answer(extract_answer(reply), {"answer": gold})``.
4. bare math-verify: ``verify(parse(gold), parse(reply))``, and the same with the gold parsed once up front.

Each method is warmed up with one untimed pass (which also records its verdicts), then timed with
``time.perf_counter`` over all pairs, ``--repeats`` times with the garbage collector off; the best run is kept.

Run from the repository root: ``python benchmarks/math_throughput.py [--episodes N | --quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import gymnasium
import reasoning_gym
from bench_common import format_table, machine_info, ratio_phrase, write_json
from math_verify import parse, verify
from reasoning_gym.utils import extract_answer

import frostgym
from frostgym.core.seeding import derive_seed
from frostgym.envs.math import MathEnv
from frostgym.graders.math_answer import grade_math

ENV_ID = "frostgym/Math-v0"
SPLIT = "test"
DEFAULT_EPISODES = 2000
QUICK_EPISODES = 200
DEFAULT_REPEATS = 3
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)

#: Replies graded against gold "18": hedges, repeated answers, answers only in reasoning, other digit scripts.
TRICKY_GOLD = "18"
TRICKY_REPLIES: tuple[str, ...] = (
    "<answer>18</answer>",
    "<answer>18.0</answer>",
    "\\boxed{18}",
    "<answer>18 or 19</answer>",
    "<answer>19 or 18</answer>",
    "<answer>19</answer><answer>18</answer>",
    "<answer>18</answer><answer>19</answer>",
    "The answer is 19. Actually the answer is 18.",
    "<think>the answer is 18</think>",
    "<think>the answer is 18</think><answer>19</answer>",
    "<answer>١٨</answer>",
    "<answer>18 apples, or 19 if she keeps one</answer>",
)

Scorer = Callable[[str, Any], bool]


@dataclass(frozen=True)
class Episode:
    seed: int
    task_id: str
    gold: str
    oracle_reply: str
    wrong_reply: str


@dataclass(frozen=True)
class Row:
    method: str
    replies: str  # "oracle" or "wrong"
    items: int
    best_s: float
    runs_s: list[float]
    correct: int

    @property
    def us_per_item(self) -> float:
        return self.best_s / self.items * 1e6

    @property
    def items_per_s(self) -> float:
        return self.items / self.best_s


# -- helpers -----------------------------------------------------------------------------------------------------


def make_env() -> MathEnv:
    env = gymnasium.make(ENV_ID, split=SPLIT).unwrapped
    if not isinstance(env, MathEnv):
        raise TypeError(f"{ENV_ID} unwrapped to {type(env).__name__}, expected MathEnv")
    return env


def wrong_answer(gold: str) -> str:
    """A different number of the same kind: gold + 1."""
    return str(Fraction(gold) + 1)


def make_wrong_reply(reply: str, gold: str) -> str:
    """The oracle reply with the number inside its ``<answer>`` block replaced by a wrong one."""
    wrong, n = _ANSWER_BLOCK.subn(f"<answer>{wrong_answer(gold)}</answer>", reply, count=1)
    if n != 1:
        raise ValueError(f"oracle reply has no <answer> block: {reply!r}")
    return wrong


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    """Wall time of ``fn()`` for each of ``repeats`` runs, with the garbage collector off (as ``timeit`` does)."""
    runs: list[float] = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return runs


# -- frostgym full loop ------------------------------------------------------------------------------------------


def collect(env: MathEnv, seeds: Sequence[int]) -> list[Episode]:
    """One untimed pass of the loop that records every (reply, gold) pair; also the env's warm-up."""
    episodes: list[Episode] = []
    for seed in seeds:
        env.reset(seed=seed)
        reply = env.oracle_action()
        gold = env.task.answer
        episodes.append(Episode(seed, env.task.task_id, gold, reply, make_wrong_reply(reply, gold)))
        env.step(reply)
    return episodes


def run_loop(
    env: MathEnv, seeds: Sequence[int], replies: Sequence[str] | None, verdicts: list[bool] | None = None
) -> None:
    """``reset -> oracle_action -> step`` per seed. With ``replies``, step with ``replies[i]`` instead of the oracle
    text (``oracle_action()`` is still called so both variants do the same work apart from grading)."""
    for i, seed in enumerate(seeds):
        env.reset(seed=seed)
        action = env.oracle_action()
        if replies is not None:
            action = replies[i]
        _, _, _, _, info = env.step(action)
        if verdicts is not None:
            verdicts.append(info["grade"]["components"]["correctness"] >= 1.0)


def bench_loop(env: MathEnv, episodes: Sequence[Episode], wrong: bool, repeats: int) -> Row:
    seeds = [e.seed for e in episodes]
    replies = [e.wrong_reply for e in episodes] if wrong else None
    verdicts: list[bool] = []
    run_loop(env, seeds, replies, verdicts)  # warm-up pass, records verdicts
    runs = timed(lambda: run_loop(env, seeds, replies), repeats)
    return Row(
        method="frostgym full loop",
        replies="wrong" if wrong else "oracle",
        items=len(seeds),
        best_s=min(runs),
        runs_s=runs,
        correct=sum(verdicts),
    )


# -- graders on the collected pairs ------------------------------------------------------------------------------


def frostgym_scorer(reply: str, gold: Any) -> bool:
    return grade_math(reply, gold).components["correctness"] >= 1.0


def make_reasoning_gym_scorer() -> Scorer:
    dataset = reasoning_gym.create_dataset("gsm_symbolic", seed=0, size=10)
    score_answer = dataset.score_answer  # only reads entry["answer"]; 1.0 = correct, 0.01 = wrong number

    def scorer(reply: str, gold: Any) -> bool:
        return bool(score_answer(extract_answer(reply), {"answer": gold}) >= 1.0)

    return scorer


def math_verify_scorer(reply: str, gold: Any) -> bool:
    return bool(verify(parse(gold), parse(reply)))


def math_verify_preparsed_scorer(reply: str, gold: Any) -> bool:
    return bool(verify(gold, parse(reply)))


def preparse_golds(golds: Sequence[str]) -> list[Any]:
    cache: dict[str, Any] = {}
    return [cache[g] if g in cache else cache.setdefault(g, parse(g)) for g in golds]


def score_all(scorer: Scorer, replies: Sequence[str], golds: Sequence[Any]) -> None:
    for reply, gold in zip(replies, golds, strict=True):
        scorer(reply, gold)


def bench_scorer(
    name: str, scorer: Scorer, replies: Sequence[str], golds: Sequence[Any], kind: str, repeats: int
) -> Row:
    verdicts = [scorer(r, g) for r, g in zip(replies, golds, strict=True)]  # warm-up pass, records verdicts
    runs = timed(lambda: score_all(scorer, replies, golds), repeats)
    return Row(method=name, replies=kind, items=len(replies), best_s=min(runs), runs_s=runs, correct=sum(verdicts))


# -- report ------------------------------------------------------------------------------------------------------


def throughput_table(rows: Sequence[Row]) -> str:
    loop = {r.replies: r for r in rows if r.method == "frostgym full loop"}
    grader = {r.replies: r for r in rows if r.method == "frostgym grader"}
    body = [
        [
            r.method,
            r.replies,
            f"{r.us_per_item:,.1f}",
            f"{r.items_per_s:,.0f}",
            f"{r.best_s / loop[r.replies].best_s:.2f}x",
            f"{r.best_s / grader[r.replies].best_s:.2f}x",
            f"{r.correct}/{r.items}",
        ]
        for r in rows
    ]
    headers = ["method", "replies", "us/item", "items/s", "vs loop", "vs grader", "scored correct"]
    return format_table(headers, body, [False, False, True, True, True, True, True])


def summary_lines(rows: Sequence[Row]) -> list[str]:
    ref = {(r.method, r.replies): r for r in rows}
    out: list[str] = []
    for kind in ("oracle", "wrong"):
        loop, grader = ref["frostgym full loop", kind], ref["frostgym grader", kind]
        out.append(
            f"[{kind} replies] frostgym grader: {grader.us_per_item:,.1f} us/item = "
            f"{grader.best_s / loop.best_s:.0%} of the full loop ({loop.us_per_item:,.1f} us/episode)"
        )
        for r in rows:
            if r.replies != kind or r.method.startswith("frostgym"):
                continue
            out.append(
                f"[{kind} replies] {r.method} is {ratio_phrase(r.best_s / grader.best_s)} frostgym's grader "
                f"and {ratio_phrase(r.best_s / loop.best_s)} frostgym's full loop"
            )
    return out


def show_reply(reply: str, width: int = 52) -> str:
    text = reply.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 3] + "..."


def tricky_results(scorers: dict[str, Scorer]) -> list[dict[str, Any]]:
    gold_preparsed = parse(TRICKY_GOLD)
    results: list[dict[str, Any]] = []
    for reply in TRICKY_REPLIES:
        grade = grade_math(reply, TRICKY_GOLD)
        accepted = {
            name: int(scorer(reply, gold_preparsed if name == "math-verify (gold pre-parsed)" else TRICKY_GOLD))
            for name, scorer in scorers.items()
        }
        results.append({"reply": reply, "accepted": accepted, "frostgym_label": grade.label})
    return results


def tricky_table(results: Sequence[dict[str, Any]]) -> str:
    headers = ["reply (gold 18)", "frostgym", "reasoning-gym", "math-verify", "frostgym label"]
    body = [
        [
            show_reply(r["reply"]),
            str(r["accepted"]["frostgym grader"]),
            str(r["accepted"]["reasoning-gym score_answer"]),
            str(r["accepted"]["math-verify"]),
            str(r["frostgym_label"]),
        ]
        for r in results
    ]
    return format_table(headers, body, [False, True, True, True, False])


def disagreements(episodes: Sequence[Episode], scorers: dict[str, Scorer]) -> dict[str, list[dict[str, Any]]]:
    """Per reply kind, the pairs on which the methods do not all agree (one entry per pair, in episode order)."""
    out: dict[str, list[dict[str, Any]]] = {}
    preparsed = preparse_golds([e.gold for e in episodes])
    for kind in ("oracle", "wrong"):
        examples: list[dict[str, Any]] = []
        for e, gp in zip(episodes, preparsed, strict=True):
            reply = e.oracle_reply if kind == "oracle" else e.wrong_reply
            verdicts = {
                name: scorer(reply, gp if name == "math-verify (gold pre-parsed)" else e.gold)
                for name, scorer in scorers.items()
            }
            if len(set(verdicts.values())) > 1:
                examples.append(
                    {
                        "task_id": e.task_id,
                        "gold": e.gold,
                        "reply": reply,
                        "verdicts": verdicts,
                        "math_verify_parsed_reply": [str(x) for x in parse(reply)],
                    }
                )
        out[kind] = examples
    return out


def first_per_task(examples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for ex in examples:
        seen.setdefault(ex["task_id"], ex)
    return list(seen.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES, help="episodes (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_EPISODES} episodes, for a smoke run")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed runs per method, best kept")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    n_episodes = QUICK_EPISODES if args.quick else args.episodes
    if n_episodes < 1 or args.repeats < 1:
        parser.error("--episodes and --repeats must be >= 1")

    started = time.perf_counter()
    machine = machine_info(("frostgym", "gymnasium", "reasoning-gym", "math-verify", "sympy"))
    print(f"frostgym {frostgym.__version__} math throughput: {ENV_ID} split={SPLIT}, {n_episodes} episodes")
    print(
        f"machine: {machine['cpu_model']}, {machine['cpu_count']} cores, "
        f"{machine['implementation']} {machine['python']}; best of {args.repeats} runs"
    )
    print("versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()))

    env = make_env()
    seeds = [derive_seed("bench", i) for i in range(n_episodes)]
    episodes = collect(env, seeds)
    golds = [e.gold for e in episodes]
    golds_preparsed = preparse_golds(golds)
    print(f"collected {len(episodes)} (reply, gold) pairs over {len({e.task_id for e in episodes})} distinct tasks\n")

    scorers: dict[str, Scorer] = {
        "frostgym grader": frostgym_scorer,
        "reasoning-gym score_answer": make_reasoning_gym_scorer(),
        "math-verify": math_verify_scorer,
        "math-verify (gold pre-parsed)": math_verify_preparsed_scorer,
    }
    rows: list[Row] = []
    for kind in ("oracle", "wrong"):
        replies = [e.oracle_reply if kind == "oracle" else e.wrong_reply for e in episodes]
        rows.append(bench_loop(env, episodes, wrong=kind == "wrong", repeats=args.repeats))
        for name, scorer in scorers.items():
            gold_inputs = golds_preparsed if name == "math-verify (gold pre-parsed)" else golds
            rows.append(bench_scorer(name, scorer, replies, gold_inputs, kind, args.repeats))

    print(throughput_table(rows))
    print(
        "\nus/item = best wall time / items; 'vs loop' and 'vs grader' = time ratio to frostgym's full loop / "
        "grader on the same replies (>1 = slower); 'scored correct' = pairs the method accepted."
    )
    print()
    for line in summary_lines(rows):
        print(line)

    diffs = disagreements(episodes, scorers)
    for kind, examples in diffs.items():
        per_task = first_per_task(examples)
        print(
            f"\n{kind} replies on which the methods disagree: {len(examples)} pairs over {len(per_task)} distinct tasks"
            + (", e.g." if examples else "")
        )
        for ex in per_task[:5]:
            shown = ", ".join(f"{name}={int(v)}" for name, v in ex["verdicts"].items())
            print(f"  {ex['task_id']} gold={ex['gold']}: {shown}; math-verify parsed {ex['math_verify_parsed_reply']}")

    tricky = tricky_results(scorers)
    print("\nTricky replies (1 = scored correct):\n")
    print(tricky_table(tricky))
    elapsed = time.perf_counter() - started
    print(f"\ntotal wall time {elapsed:.1f} s")

    if args.json is not None:
        payload = {
            "env_id": ENV_ID,
            "split": SPLIT,
            "episodes": n_episodes,
            "distinct_tasks": len({e.task_id for e in episodes}),
            "repeats": args.repeats,
            "machine": machine,
            "results": [{**asdict(r), "us_per_item": r.us_per_item, "items_per_s": r.items_per_s} for r in rows],
            "summary": summary_lines(rows),
            "disagreements": {
                kind: {
                    "pairs": len(ex),
                    "distinct_tasks": len({x["task_id"] for x in ex}),
                    "examples": first_per_task(ex)[:5],
                }
                for kind, ex in diffs.items()
            },
            "tricky_gold": TRICKY_GOLD,
            "tricky": tricky,
            "wall_time_s": elapsed,
        }
        write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
