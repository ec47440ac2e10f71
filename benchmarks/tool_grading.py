"""Tool-call grading from the reply text: what ``ToolsEnv`` pays per reply, next to bfcl_eval's own path.

A user's reply reaches the grader as text, so every headline row starts from the same reply text and ends
at a verdict:

- ``bfcl_eval``: what bfcl_eval's AST runner does with one model result (``_evaluate_single_ast_entry`` in
  ``bfcl_eval/eval_checker/eval_runner.py``): the handler's ``decode_ast``, ``is_function_calling_format_output``,
  then ``ast_checker``. The Hermes decoder is ``QwenFCHandler.decode_ast`` (and its ``_extract_tool_calls``)
  compiled from the installed ``qwen_fc.py``, since the handler module imports API clients that bfcl-eval's
  ``--no-deps`` install lacks; the Python-syntax decoder is ``default_decode_ast_prompting``, imported with
  stubs for the tree-sitter Java/JavaScript parsers (not installed) and for ``model_config``;
- ``frostgym ToolsEnv.respond``: the env's own grading turn on the env's own ``Task`` objects
  (``parse_reply``, ``grade_tool_calls`` under ``call_grader``, the calls copied for the record), **cold**:
  the per-task cache (``tool_ast._TASKS``) emptied before every reply, so each reply is the first graded for
  its task (an eval with one sample per task), and **warm**: every task's entry already there (the later
  samples of a GRPO group or of pass@k; the env keeps its ``Task`` objects, so the cache is hit there).

The replies, two syntaxes (tables side by side):

- ``hermes``: every BFCL category with a possible answer, the calls as Qwen writes them
  (``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>``, which both parsers read), Java and JavaScript
  values as source text (``as_source_literals``);
- ``python``: BFCL's prompting form ``[f(a=1), g(b='x')]``, Python-language entries only (BFCL reads Java and
  JavaScript replies with tree-sitter).

For each entry: the gold calls (``gold_calls``) and the deterministic near misses of ``perturbations``
(seeded by the BFCL id). A *parts* table (not a headline) times each step alone on input prepared before the
pass (bfcl_eval's decode and its checker on decoded calls; frostgym's parser, ``check_calls``, ``answer_key``
and ``grade_tool_calls`` on parsed calls), and the script prints from it where frostgym's extra time goes:
its parser also bounds and copies every argument and keeps the reply's text and its problems, and its grade
carries components, details and an answer key for maj@k, none of which bfcl_eval's path builds.

Timing: one untimed pass per row (which records its verdicts), then ``--repeats`` rounds (default 5), each
timing one pass of every row in turn over all replies with the garbage collector off; a row's figure is the
median of its passes (the best is in the JSON too).

Run from the repository root: ``python benchmarks/tool_grading.py [--repeats N] [--syntax hermes|python]
[--json PATH]``.
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import random
import re
import statistics
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, write_json

import frostgym.graders.tool_ast as tool_ast
from frostgym.core.env import Reply
from frostgym.core.tasks import Task
from frostgym.envs.tools.single_turn import ToolsEnv
from frostgym.graders.tool_ast import answer_key, check_calls, grade_tool_calls
from frostgym.tools.bfcl_data import CATEGORIES, IRRELEVANCE, BFCLEntry, as_source_literals, gold_calls, load_entries
from frostgym.tools.bfcl_data import perturbations as near_misses
from frostgym.tools.calls import ParsedReply, parse_reply

DEFAULT_REPEATS = 5
SYNTAXES = ("hermes", "python")
BFCL = "bfcl_eval decode_ast + ast_checker"
COLD = "frostgym ToolsEnv.respond, cold"
WARM = "frostgym ToolsEnv.respond, warm"
HEADLINE = (BFCL, COLD, WARM)
DECODE = "bfcl_eval decode_ast (text -> calls)"
CHECKER = "bfcl_eval ast_checker (decoded calls)"
PARSE = "frostgym parse_reply (text -> calls)"
CHECK = "frostgym check_calls (parsed calls), warm"
KEY = "frostgym answer_key (parsed calls)"
GRADE = "frostgym grade_tool_calls (parsed -> Grade), warm"

Calls = list[tuple[str, dict[str, Any]]]
Decoder = Callable[[str, Any], Any]


# -- bfcl_eval's own path ----------------------------------------------------------------------------------------


def _stub(name: str, **attributes: Any) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        for key, value in attributes.items():
            setattr(module, key, value)
        sys.modules[name] = module


def _unavailable(*_: Any, **__: Any) -> Any:
    raise RuntimeError("tree-sitter is not installed (bfcl-eval is installed with --no-deps)")


def qwen_fc_decoder() -> Decoder:
    """``QwenFCHandler.decode_ast`` from the installed ``qwen_fc.py``: its two methods compiled from bfcl_eval's
    own source into a class without the handler's bases (whose module imports API clients)."""
    import bfcl_eval  # type: ignore[import-untyped]

    path = Path(bfcl_eval.__file__).parent / "model_handler" / "local_inference" / "qwen_fc.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    handler = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "QwenFCHandler")
    wanted = {"decode_ast", "_extract_tool_calls"}
    methods = [n for n in handler.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    if {m.name for m in methods} != wanted:
        raise RuntimeError(f"{path}: QwenFCHandler no longer has {sorted(wanted)}")
    for method in methods:  # keep @staticmethod, drop @override (from the uninstalled ``overrides``)
        method.decorator_list = [d for d in method.decorator_list if isinstance(d, ast.Name) and d.id == "staticmethod"]
    handler.bases, handler.keywords, handler.decorator_list, handler.body = [], [], [], list(methods)
    namespace: dict[str, Any] = {"json": json, "re": re, "Any": Any}
    exec(compile(ast.Module(body=[handler], type_ignores=[]), str(path), "exec"), namespace)
    instance = namespace["QwenFCHandler"]()
    return lambda text, language: instance.decode_ast(text, language, False)


class BFCLPath:
    """bfcl_eval's path from text for one entry, in its steps: ``decode``, ``check`` and both, ``grade``."""

    def __init__(self) -> None:
        _stub(
            "bfcl_eval.constants.model_config",
            MODEL_CONFIG_MAPPING={"frostgym": types.SimpleNamespace(underscore_to_dot=False)},
        )
        _stub("bfcl_eval.model_handler.parser.java_parser", parse_java_function_call=_unavailable)
        _stub("bfcl_eval.model_handler.parser.js_parser", parse_javascript_function_call=_unavailable)
        from bfcl_eval.constants.enums import Language, ReturnFormat  # type: ignore[import-untyped]
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # type: ignore[import-untyped]
        from bfcl_eval.model_handler.utils import default_decode_ast_prompting  # type: ignore[import-untyped]
        from bfcl_eval.utils import is_function_calling_format_output  # type: ignore[import-untyped]

        self.ast_checker = ast_checker
        self.well_formed = is_function_calling_format_output
        self.languages = {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}
        self.formats = {"python": ReturnFormat.PYTHON, "java": ReturnFormat.JAVA, "javascript": ReturnFormat.JAVASCRIPT}
        self.decoders: dict[str, Decoder] = {"hermes": qwen_fc_decoder(), "python": default_decode_ast_prompting}

    def decode(self, entry: BFCLEntry, syntax: str, text: str) -> Any:
        """The handler's ``decode_ast``; ``None`` where bfcl_eval files the reply as not decoded or not in
        the function-calling format."""
        try:
            decoded = self.decoders[syntax](text, self.formats[entry.language])
        except Exception:
            return None  # "Invalid syntax. Failed to decode AST."
        return decoded if self.well_formed(decoded) else None

    def check(self, entry: BFCLEntry, decoded: Any) -> bool:
        if decoded is None:
            return False
        result = self.ast_checker(
            list(entry.functions),
            decoded,
            list(entry.possible_answer or ()),
            self.languages[entry.language],
            entry.category,
            "frostgym",
        )
        return bool(result["valid"])

    def grade(self, entry: BFCLEntry, syntax: str, text: str) -> bool:
        return self.check(entry, self.decode(entry, syntax, text))


# -- the replies ---------------------------------------------------------------------------------------------------


def hermes_text(calls: Calls) -> str:
    """The calls as Qwen writes them (bfcl_eval's Qwen decoder wants the newlines inside the tags)."""
    blocks = (json.dumps({"name": n, "arguments": a}, ensure_ascii=False) for n, a in calls)
    return "\n".join(f"<tool_call>\n{block}\n</tool_call>" for block in blocks)


def python_text(calls: Calls) -> str:
    """The calls in BFCL's prompting form, ``[f(a=1), g(b='x')]``."""
    return "[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls) + "]"


@dataclass(frozen=True)
class Probe:
    entry: BFCLEntry
    task: Task  # the env's own task object: the per-task cache is keyed by its data's identity
    kind: str
    text: str
    parsed: ParsedReply  # prepared for the parts rows, untimed
    decoded: Any  # bfcl_eval's decode of ``text`` (None when it fails), likewise


def env_tasks(env: ToolsEnv) -> dict[str, Task]:
    return {str(t.metadata["bfcl_id"]): t for t in env.source.tasks("test")}


def build_probes(syntax: str, tasks: dict[str, Task], bfcl: BFCLPath) -> list[Probe]:
    probes = []
    render = hermes_text if syntax == "hermes" else python_text
    for entry in load_entries([c for c in CATEGORIES if c not in IRRELEVANCE]):
        if syntax == "python" and entry.language != "python":
            continue
        cases = [("gold", gold_calls(entry))]
        cases += [(p.kind, p.calls) for p in near_misses(entry, random.Random(entry.id))]
        for kind, raw in cases:
            text = render(as_source_literals(entry, raw))
            probes.append(
                Probe(entry, tasks[entry.id], kind, text, parse_reply(text), bfcl.decode(entry, syntax, text))
            )
    return probes


# -- the rows ------------------------------------------------------------------------------------------------------

Row = Callable[[Probe], bool]


def solved(reply: Reply) -> bool:
    return reply.grade is not None and reply.grade.score == 1.0


def make_rows(syntax: str, bfcl: BFCLPath, env: ToolsEnv) -> tuple[dict[str, Row], dict[str, Row]]:
    """The headline rows (reply text to verdict) and the parts rows (one step each, on prepared input)."""
    respond = env.respond
    cache = tool_ast._TASKS

    def reference(p: Probe) -> bool:
        return bfcl.grade(p.entry, syntax, p.text)

    def cold(p: Probe) -> bool:
        cache.clear()  # about 30 ns on a one-entry dict
        return solved(respond(p.task, p.text, 0, True))

    def warm(p: Probe) -> bool:
        return solved(respond(p.task, p.text, 0, True))

    def bfcl_decode(p: Probe) -> bool:
        return bfcl.decode(p.entry, syntax, p.text) is not None

    def bfcl_check(p: Probe) -> bool:
        return bfcl.check(p.entry, p.decoded)

    def fg_parse(p: Probe) -> bool:
        return not parse_reply(p.text).problems

    def fg_check(p: Probe) -> bool:
        m = p.task.metadata
        return check_calls(p.parsed.calls, m["functions"], m["possible_answer"], m["category"], m["language"]).valid

    def fg_key(p: Probe) -> bool:
        return bool(answer_key(p.parsed.calls))

    def fg_grade(p: Probe) -> bool:
        m = p.task.metadata
        grade = grade_tool_calls(p.parsed, m["functions"], m["possible_answer"], m["category"], m["language"])
        return grade.score == 1.0

    headline: dict[str, Row] = {BFCL: reference, COLD: cold, WARM: warm}
    parts: dict[str, Row] = {
        DECODE: bfcl_decode,
        CHECKER: bfcl_check,
        PARSE: fg_parse,
        CHECK: fg_check,
        KEY: fg_key,
        GRADE: fg_grade,
    }
    return headline, parts


def fill_cache(probes: Sequence[Probe]) -> None:
    """Every probe's task in the per-task cache, as the env leaves it once each task was graded."""
    for p in probes:
        m = p.task.metadata
        tool_ast._task(m["functions"], m["possible_answer"], m["language"])


def bench(rows: dict[str, Row], probes: Sequence[Probe], repeats: int) -> dict[str, list[float]]:
    """``repeats`` rounds, each timing one pass of every row in turn (so a burst of load from elsewhere hits all
    rows alike). The cache is filled before each pass: only the cold row's own clearing empties it."""
    runs: dict[str, list[float]] = {name: [] for name in rows}
    clock = time.perf_counter
    for _ in range(repeats):
        for name, row in rows.items():
            fill_cache(probes)
            gc.collect()
            gc.disable()
            try:
                start = clock()
                for probe in probes:
                    row(probe)
                runs[name].append(clock() - start)
            finally:
                gc.enable()
    return runs


@dataclass(frozen=True)
class SyntaxResult:
    syntax: str
    replies: int
    entries: int
    kinds: dict[str, int]
    runs_s: dict[str, list[float]]
    accepted: dict[str, int]
    agrees: dict[str, int]

    def median_us(self, row: str) -> float:
        return statistics.median(self.runs_s[row]) / self.replies * 1e6


def run_syntax(syntax: str, repeats: int, bfcl: BFCLPath, env: ToolsEnv) -> SyntaxResult:
    headline, parts = make_rows(syntax, bfcl, env)
    probes = build_probes(syntax, env_tasks(env), bfcl)
    rows = {**headline, **parts}
    verdicts = {}
    for name, row in rows.items():
        fill_cache(probes)
        verdicts[name] = [row(p) for p in probes]  # untimed warm-up pass, records verdicts
    if verdicts[COLD] != verdicts[WARM]:
        raise AssertionError("the per-task cache changed a verdict")
    runs = bench(rows, probes, repeats)
    kinds: dict[str, int] = {}
    for p in probes:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    reference = verdicts[BFCL]
    return SyntaxResult(
        syntax=syntax,
        replies=len(probes),
        entries=len({p.entry.id for p in probes}),
        kinds=kinds,
        runs_s=runs,
        accepted={name: sum(verdicts[name]) for name in headline},
        agrees={name: sum(a == b for a, b in zip(verdicts[name], reference, strict=True)) for name in headline},
    )


# -- report --------------------------------------------------------------------------------------------------------


def headline_table(r: SyntaxResult) -> str:
    ref = r.median_us(BFCL)
    body = [
        [
            name,
            str(r.accepted[name]),
            f"{r.agrees[name]}/{r.replies}",
            f"{r.median_us(name):.1f}",
            f"{1e6 / r.median_us(name):,.0f}",
            f"{ref / r.median_us(name):.2f}x",
        ]
        for name in HEADLINE
    ]
    headers = ["from the reply text", "accepted", "agrees with bfcl", "us/reply", "replies/s", "speed vs bfcl"]
    return format_table(headers, body, [False, True, True, True, True, True])


def parts_table(r: SyntaxResult) -> str:
    body = [[name, f"{r.median_us(name):.1f}"] for name in r.runs_s if name not in HEADLINE]
    return format_table(["one step alone (not a headline)", "us/reply"], body, [False, True])


def why_lines(r: SyntaxResult) -> list[str]:
    us = r.median_us
    parse, check, key, grade = us(PARSE), us(CHECK), us(KEY), us(GRADE)
    decode, checker = us(DECODE), us(CHECKER)
    lines = []
    for name in (COLD, WARM):
        ratio = us(name) / us(BFCL)
        side = f"{ratio:.1f}x slower than" if ratio >= 1 else f"{1 / ratio:.1f}x faster than"
        lines.append(f"{name}: {us(name):.1f} us/reply, {side} bfcl_eval from the same text ({us(BFCL):.1f} us)")
    lines.append(
        f"where it goes: parsing {parse:.1f} us (bfcl's decode {decode:.1f}), the rules {check:.1f} us "
        f"(bfcl's ast_checker {checker:.1f}), the answer key {key:.1f} us and the rest of the Grade "
        f"{max(grade - check - key, 0.0):.1f} us, "
        f"cold's per-task set-up {max(us(COLD) - us(WARM), 0.0):.1f} us, the rest of respond "
        f"(the calls copied for the record, call_grader) {max(us(WARM) - parse - grade, 0.0):.1f} us"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed passes per row, median kept")
    parser.add_argument("--syntax", choices=SYNTAXES, action="append", help="only this reply syntax (repeatable)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    machine = machine_info(("frostgym", "bfcl-eval"))
    load = os.getloadavg()
    print(f"frostgym {machine['versions']['frostgym']} tool grading vs bfcl-eval {machine['versions']['bfcl-eval']}")
    print(
        f"machine: {machine['cpu_model']}, {machine['cpu_count']} cores, {machine['implementation']} "
        f"{machine['python']}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; median of {args.repeats} passes"
    )
    bfcl, env = BFCLPath(), ToolsEnv()
    results = []
    for syntax in args.syntax or SYNTAXES:
        r = run_syntax(syntax, args.repeats, bfcl, env)
        results.append(r)
        print(f"\n{syntax} replies: {r.entries} BFCL entries, {r.replies} replies: {r.kinds}\n")
        print(headline_table(r))
        print()
        print(parts_table(r))
        print()
        for line in why_lines(r):
            print(line)
    if args.json:
        write_json(
            args.json,
            {
                "machine": machine,
                "load_average": load,
                "repeats": args.repeats,
                "syntaxes": {
                    r.syntax: {
                        "entries": r.entries,
                        "replies": r.replies,
                        "kinds": r.kinds,
                        "accepted": r.accepted,
                        "agrees_with_bfcl": r.agrees,
                        "median_us_per_reply": {name: r.median_us(name) for name in r.runs_s},
                        "best_us_per_reply": {name: min(s) / r.replies * 1e6 for name, s in r.runs_s.items()},
                        "speed_vs_bfcl": {name: r.median_us(BFCL) / r.median_us(name) for name in HEADLINE},
                        "runs_s": r.runs_s,
                        "summary": why_lines(r),
                    }
                    for r in results
                },
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
