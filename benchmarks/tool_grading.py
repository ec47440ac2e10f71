"""Tool-call grading throughput: frostgym's BFCL AST grader next to bfcl_eval's own ``ast_checker``, in one process.

Both graders see the same calls for every served BFCL category with a possible answer (simple_python, simple_java,
simple_javascript, multiple, parallel, parallel_multiple and the live_* ones):

1. the gold calls (``gold_calls``: first allowed value of every argument that may not be omitted);
2. the deterministic near misses of ``perturbations`` (seeded by the BFCL id): a required argument dropped, an
   unknown one added, a value or a type changed, the function renamed, a call dropped or duplicated, and the
   harmless changes (string case, int for float, parallel calls reversed).

Java and JavaScript values are given as source text (``as_source_literals``), the form bfcl_eval's checker reads.
Rows:

- ``bfcl_eval ast_checker``: the checker the BFCL leaderboard uses, imported with a stub for
  ``bfcl_eval.constants.model_config`` (the real one imports API clients);
- ``frostgym check_calls``: our rules on the already-parsed calls (the same input bfcl_eval gets);
- ``frostgym grade_tool_reply``: reply text (Hermes ``<tool_call>`` blocks) through the shared parser, our rules
  and a ``Grade``: what ``ToolsEnv.step`` pays per reply.

Each row is warmed up with one untimed pass (which records its verdicts), then timed with ``time.perf_counter`` over
all calls with the garbage collector off, in ``--repeats`` rounds (default 5) that each time every row once, in turn;
each row's best pass is kept. The verdict agreement with bfcl_eval is printed too.

Run from the repository root: ``python benchmarks/tool_grading.py [--repeats N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, ratio_phrase, write_json

from frostgym.graders.tool_ast import check_calls, grade_tool_reply
from frostgym.tools.bfcl_data import CATEGORIES, IRRELEVANCE, BFCLEntry, as_source_literals, gold_calls, load_entries
from frostgym.tools.bfcl_data import perturbations as near_misses
from frostgym.tools.calls import ToolCall, render_calls

DEFAULT_REPEATS = 5


@dataclass(frozen=True)
class Probe:
    entry: BFCLEntry
    kind: str
    calls: list[ToolCall]
    bfcl_output: list[dict[str, dict[str, Any]]]
    text: str


def bfcl_checker() -> tuple[Callable[..., dict[str, Any]], dict[str, Any]]:
    """bfcl_eval's ``ast_checker`` and its languages, without the API-client imports."""
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = {"frostgym": types.SimpleNamespace(underscore_to_dot=False)}  # type: ignore[attr-defined]
        sys.modules[name] = stub
    from bfcl_eval.constants.enums import Language  # type: ignore[import-untyped]
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # type: ignore[import-untyped]

    return ast_checker, {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}


def build_probes() -> list[Probe]:
    probes = []
    for entry in load_entries([c for c in CATEGORIES if c not in IRRELEVANCE]):
        cases = [("gold", gold_calls(entry))]
        cases += [(p.kind, p.calls) for p in near_misses(entry, random.Random(entry.id))]
        for kind, raw in cases:
            calls = as_source_literals(entry, raw)
            tool_calls = [ToolCall(n, a) for n, a in calls]
            probes.append(Probe(entry, kind, tool_calls, [{n: a} for n, a in calls], render_calls(tool_calls)))
    return probes


def make_rows(probes: Sequence[Probe]) -> dict[str, Callable[[Probe], bool]]:
    ast_checker, languages = bfcl_checker()

    def bfcl(p: Probe) -> bool:
        e = p.entry
        result = ast_checker(
            list(e.functions),
            p.bfcl_output,
            list(e.possible_answer or ()),
            languages[e.language],
            e.category,
            "frostgym",
        )
        return bool(result["valid"])

    def ours(p: Probe) -> bool:
        e = p.entry
        return check_calls(p.calls, e.functions, e.possible_answer, e.category, e.language).valid

    def ours_text(p: Probe) -> bool:
        e = p.entry
        return grade_tool_reply(p.text, e.functions, e.possible_answer, e.category, e.language).score == 1.0

    return {
        "bfcl_eval ast_checker": bfcl,
        "frostgym check_calls": ours,
        "frostgym grade_tool_reply (text)": ours_text,
    }


def bench(rows: dict[str, Callable[[Probe], bool]], probes: Sequence[Probe], repeats: int) -> dict[str, float]:
    best = dict.fromkeys(rows, float("inf"))
    gc.disable()
    try:
        for _ in range(repeats):
            for name, grade in rows.items():
                start = time.perf_counter()
                for probe in probes:
                    grade(probe)
                best[name] = min(best[name], time.perf_counter() - start)
    finally:
        gc.enable()
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed runs per row, best kept")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    machine = machine_info(("frostgym", "bfcl-eval"))
    print(f"frostgym {machine['versions']['frostgym']} tool grading vs bfcl-eval {machine['versions']['bfcl-eval']}")
    print(
        f"machine: {machine['cpu_model']}, {machine['cpu_count']} cores, {machine['implementation']} "
        f"{machine['python']}; best of {args.repeats} runs"
    )
    probes = build_probes()
    kinds: dict[str, int] = {}
    for p in probes:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    print(f"{len({p.entry.id for p in probes})} BFCL entries, {len(probes)} call sets: {kinds}")
    rows = make_rows(probes)
    verdicts = {name: [grade(p) for p in probes] for name, grade in rows.items()}  # warm-up, records verdicts
    timings = bench(rows, probes, args.repeats)
    reference = timings["bfcl_eval ast_checker"]
    table = []
    for name, seconds in timings.items():
        same = sum(a == b for a, b in zip(verdicts[name], verdicts["bfcl_eval ast_checker"], strict=True))
        table.append(
            [
                name,
                str(sum(verdicts[name])),
                f"{same}/{len(probes)}",
                f"{seconds * 1e6 / len(probes):.1f}",
                f"{len(probes) / seconds:,.0f}",
                f"{reference / seconds:.2f}x",
            ]
        )
    print()
    print(
        format_table(
            ["grader", "accepted", "agrees with bfcl", "us/call set", "call sets/s", "speed vs bfcl"],
            table,
            [False, True, True, True, True, True],
        )
    )
    ours = timings["frostgym check_calls"]
    print(f"\nfrostgym check_calls is {ratio_phrase(ours / reference)} bfcl_eval's ast_checker on the same calls.")
    if args.json:
        write_json(
            args.json,
            {
                "machine": machine,
                "call_sets": len(probes),
                "kinds": kinds,
                "seconds": timings,
                "accepted": {k: sum(v) for k, v in verdicts.items()},
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
