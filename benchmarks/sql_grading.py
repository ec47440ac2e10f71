"""SQL grading from the reply text: what ``SQLEnv`` pays per final answer, next to a SkyRL-style grader.

Both graders see the same tasks (every hand-written task from ``load_handwritten()``, as the env's own ``Task``
objects) and the same predictions:

1. the gold query itself (both graders should accept it);
2. deterministic wrong rewrites of the gold query (see ``PERTURBATIONS``), each kept only when it runs without
   error and its rows, as a list with duplicates, differ from the gold's.

frostgym's env gets ``<think>...</think><answer>SQL</answer>`` and grades it the way a user's final turn is
graded: ``SQLEnv.respond`` (the answer block found outside the reasoning, then ``grade_sql`` under
``call_grader`` on the shared read-only connection). The SkyRL-style grader gets the same reasoning and SQL as
``<think>...</think><solution>SQL</solution>``, the format skyrl-gym's SQL env reads, and goes from that text
to its reward.

The SkyRL-style grader re-implements what skyrl-gym's text-to-SQL env does (``skyrl_gym/envs/sql/utils.py``):
check the ``<solution>`` format, then run the predicted and the gold query one after the other, each in its own
thread with a timeout (``func_timeout``), on a new read-write ``sqlite3.connect(path)`` inside
``BEGIN TRANSACTION`` / ``rollback``, and reward 1 when ``frozenset(predicted rows) == frozenset(gold rows)``.
It runs on copies of the database files in a temporary directory, never on frostgym's cache files.

frostgym keeps each gold result per (database, query) for the life of the process, so it is timed two ways:
**cold**, the cache emptied before every reply (each reply is the first graded for its task, as in an eval with
one sample per task: the gold runs on every call, as SkyRL's always does; the like-for-like row), and **warm**,
every gold result already there (the later samples of a GRPO group, pass@k, a second epoch). A reference row,
not a grader, times running the prediction alone on a persistent connection: the floor under every grader.
The script also says, by prediction kind, where the cold row is slower than SkyRL-style, and why.

Timing: one untimed pass per method (which records its verdicts), then ``--repeats`` rounds (default 5), each
timing one pass of every method in turn over all pairs with the garbage collector off; a method's figure is
the median of its passes (the best and every pass are in the JSON).

Run from the repository root: ``python benchmarks/sql_grading.py [--quick] [--repeats N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, ratio_phrase, write_json

import frostgym.graders.sql_execution as sql_execution
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.envs.sql.env import SQLEnv
from frostgym.envs.sql.tasks import load_handwritten, sql_source
from frostgym.sql.connections import shared_database
from frostgym.sql.databases import database_path
from frostgym.sql.statements import Token, mask, top_level_tokens

QUICK_TASKS = 50
DISAGREEMENTS_KEPT = 10  # examples per kind in the JSON (the counts are in its verdicts)
DEFAULT_REPEATS = 5
THINK = "<think>I look up the schema and write the query.</think>\n"
REFERENCE_TIMEOUT_S = 5.0  # for running candidate rewrites while building the predictions (untimed)

Rows = list[tuple[Any, ...]]
Grader = Callable[["Pair"], bool]


# -- SkyRL-style grader ------------------------------------------------------------------------------------------
# A re-implementation of the behaviour of skyrl-gym's SQL reward (skyrl_gym/envs/sql/utils.py), not its code:
# - the reply must hold exactly one <solution>...</solution> and a <think>...</think> block, else reward -1
#   (SkyRL also checks that every </observation> is followed by <think>; these replies have no observations);
# - each query (predicted, then gold) runs in a new thread joined with a timeout (SkyRL: func_timeout, 30 s),
#   on a new read-write connection, inside BEGIN TRANSACTION ... rollback; any error gives None;
# - reward 1.0 when both ran and frozenset(predicted rows) == frozenset(gold rows), else 0.0.
SKYRL_TIMEOUT_S = 30.0
_SKYRL_THINK = re.compile(r"<think>(.*?)</think>", re.S)
_SKYRL_STRAY_TAG = re.compile(r"</?(think|sql|observation)\b", re.I)


def skyrl_extract(reply: str) -> str | None:
    """The SQL in the one ``<solution>`` block, or None when the format check fails."""
    if reply.count("<solution>") != 1:
        return None
    _, tail = reply.split("<solution>", 1)
    if tail.count("</solution>") != 1:
        return None
    solution = tail.split("</solution>", 1)[0]
    if _SKYRL_STRAY_TAG.search(solution) or not _SKYRL_THINK.findall(reply):
        return None
    return solution.strip()


def skyrl_execute(db_file: str, sql: str) -> frozenset[tuple[Any, ...]] | None:
    conn = sqlite3.connect(db_file)  # read-write, a new connection per query
    try:
        conn.execute("BEGIN TRANSACTION;")
        return frozenset(conn.cursor().execute(sql).fetchall())
    except Exception:
        return None
    finally:
        conn.rollback()
        conn.close()


def skyrl_execute_with_timeout(db_file: str, sql: str, timeout_s: float) -> frozenset[tuple[Any, ...]] | None:
    box: list[frozenset[tuple[Any, ...]] | None] = []
    thread = threading.Thread(target=lambda: box.append(skyrl_execute(db_file, sql)), daemon=True)
    thread.start()
    thread.join(timeout_s)
    return box[0] if box else None  # nothing in the box: timed out


def skyrl_reward(reply: str, gold_sql: str, db_file: str) -> float:
    sql = skyrl_extract(reply)
    if sql is None:
        return -1.0
    predicted = skyrl_execute_with_timeout(db_file, sql, SKYRL_TIMEOUT_S)
    gold = skyrl_execute_with_timeout(db_file, gold_sql, SKYRL_TIMEOUT_S)
    return 1.0 if predicted is not None and gold is not None and predicted == gold else 0.0


# -- SQL shape helpers (string rewriting at parenthesis depth 0) ------------------------------------------------

_COMPOUND = frozenset({"UNION", "INTERSECT", "EXCEPT"})
_DIRECTION = re.compile(r"\s+(ASC|DESC)\s*$", re.I)


def split_items(sql: str, tokens: Sequence[Token], start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of the comma-separated items of ``sql[start:end]``, split at depth-0 commas."""
    bounds, a = [], start
    for t in tokens:
        if t.text == "," and start <= t.start < end:
            bounds.append((a, t.start))
            a = t.end
    bounds.append((a, end))
    return bounds


def sql_core(sql: str) -> str:
    """``sql`` without trailing semicolons and whitespace, and with a newline after a ``--`` comment, so that
    text can be appended to it."""
    sql = sql.strip()
    while True:
        end = len(mask(sql).rstrip())  # a semicolon is never masked: after the last one, only comments
        if end == 0 or sql[end - 1] != ";":
            break
        sql = (sql[: end - 1] + sql[end:]).strip()
    return f"{sql}\n" if "--" in sql else sql


def core(sql: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` narrowed to leave out the whitespace around ``sql[start:end]``."""
    text = sql[start:end]
    return start + len(text) - len(text.lstrip()), end - len(text) + len(text.rstrip())


def keyword_index(tokens: Sequence[Token], *words: str) -> int | None:
    for i in range(len(tokens) - len(words) + 1):
        if all(tokens[i + k].text == w for k, w in enumerate(words)):
            return i
    return None


def is_plain_select(tokens: Sequence[Token]) -> bool:
    """One SELECT with no WITH, set operation, ORDER BY or LIMIT at the top level."""
    words = {t.text for t in tokens}
    return bool(tokens) and tokens[0].text == "SELECT" and not words & (_COMPOUND | {"ORDER", "LIMIT", "WITH"})


# -- wrong rewrites of the gold query ----------------------------------------------------------------------------


def reverse_order(sql: str, gold_rows: Rows) -> str | None:
    """Flip every key of the top-level ORDER BY (ASC <-> DESC). Not tried on queries with ``--`` comments."""
    tokens = top_level_tokens(sql)
    i = keyword_index(tokens, "ORDER", "BY")
    if i is None or len(gold_rows) < 2 or "--" in sql:
        return None
    clause_start = tokens[i + 1].end
    limit = next((t for t in tokens[i + 2 :] if t.text == "LIMIT"), None)
    clause_end = limit.start if limit else len(sql)
    keys = []
    for a, b in split_items(sql, tokens, clause_start, clause_end):
        item = sql[a:b].strip()
        if re.search(r"\bNULLS\b", mask(item), re.I):
            return None
        m = _DIRECTION.search(mask(item))
        if m is None:
            keys.append(f"{item} DESC")
        elif m.group(1).upper() == "DESC":
            keys.append(item[: m.start()])
        else:
            keys.append(f"{item[: m.start()]} DESC")
    tail = f" {sql[clause_end:].strip()}" if limit else ""
    return f"{sql[:clause_start]} {', '.join(keys)}{tail}"


def drop_distinct(sql: str, gold_rows: Rows) -> str | None:
    """Remove DISTINCT from the first top-level SELECT DISTINCT."""
    tokens = top_level_tokens(sql)
    i = keyword_index(tokens, "SELECT", "DISTINCT")
    if i is None:
        return None
    return sql[: tokens[i + 1].start].rstrip() + " " + sql[tokens[i + 1].end :].lstrip()


def union_all_duplicate(sql: str, gold_rows: Rows) -> str | None:
    """The query UNION ALL itself: every row twice. Wrapped in subqueries unless it is a plain SELECT
    (an ORDER BY, LIMIT, WITH or set operation would make ``q UNION ALL q`` invalid or mean something else)."""
    if is_plain_select(top_level_tokens(sql)):
        return f"{sql} UNION ALL {sql}"
    return f"SELECT * FROM ({sql}) UNION ALL SELECT * FROM ({sql})"


def limit_cut(sql: str, gold_rows: Rows) -> str | None:
    """A LIMIT that keeps all rows but the last (wrapped in a subquery when there is a LIMIT already)."""
    if len(gold_rows) < 2:
        return None
    if keyword_index(top_level_tokens(sql), "LIMIT") is None:
        return f"{sql} LIMIT {len(gold_rows) - 1}"
    return f"SELECT * FROM ({sql}) LIMIT {len(gold_rows) - 1}"


def swap_columns(sql: str, gold_rows: Rows) -> str | None:
    """Swap the first two selected columns, in every top-level SELECT (so set operations stay aligned)."""
    tokens = top_level_tokens(sql)
    selects = [i for i, t in enumerate(tokens) if t.text == "SELECT"]
    if not selects:
        return None
    stops = {"FROM", "WHERE", "GROUP", "ORDER", "LIMIT", "WINDOW", *_COMPOUND}
    out = sql
    for i in reversed(selects):  # from the end, so earlier offsets stay valid
        j = i + 1
        if j < len(tokens) and tokens[j].text in ("DISTINCT", "ALL"):
            j += 1
        start = tokens[j - 1].end
        stop = next((t for t in tokens[j:] if t.text in stops), None)
        end = stop.start if stop else len(sql)
        items = split_items(sql, tokens, start, end)
        if len(items) < 2:
            return None
        (a0, b0), (a1, b1) = (core(sql, a, b) for a, b in items[:2])
        out = f"{out[:a0]}{sql[a1:b1]}{out[b0:a1]}{sql[a0:b0]}{out[b1:]}"
    return out


Rewrite = Callable[[str, Rows], str | None]
PERTURBATIONS: dict[str, tuple[Rewrite, str]] = {
    "reverse_order": (reverse_order, "flip ASC/DESC of the top-level ORDER BY (gold has one and >1 row)"),
    "drop_distinct": (drop_distinct, "drop DISTINCT from the top-level SELECT DISTINCT"),
    "union_all_dup": (union_all_duplicate, "q UNION ALL q (every row twice)"),
    "limit_cut": (limit_cut, "LIMIT n-1 (drop the last row; gold has n>1 rows)"),
    "swap_columns": (swap_columns, "swap the first two selected columns (every top-level SELECT)"),
}
KINDS = ("gold", *PERTURBATIONS)


# -- tasks and predictions ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    task_id: str
    database: str
    gold_sql: str
    kind: str
    sql: str
    task: Task  # the env's own task object, what ``SQLEnv.respond`` is handed
    frostgym_reply: str
    skyrl_reply: str
    skyrl_db_file: str


@dataclass
class KindStats:
    tried: int = 0  # the rewrite applied
    error: int = 0  # it did not run
    same: int = 0  # it ran and gave the gold's rows (as a list with duplicates)
    kept: int = 0


@dataclass
class Workload:
    pairs: list[Pair]
    tasks: int
    databases: list[str]
    stats: dict[str, KindStats] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)


class ReferenceDB:
    """A plain read-only connection on the temp copy, used only to run candidate rewrites (untimed)."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self._deadline = 0.0
        self.conn.set_progress_handler(lambda: int(time.monotonic() > self._deadline), 10_000)

    def rows(self, sql: str) -> Rows | None:
        self._deadline = time.monotonic() + REFERENCE_TIMEOUT_S
        try:
            return [tuple(r) for r in self.conn.execute(sql).fetchall()]
        except (sqlite3.Error, ValueError, OverflowError):
            return None


HANDWRITTEN_SPLITS: tuple[Split, ...] = ("dev", "test", "private")


def env_tasks() -> dict[tuple[str, str], Task]:
    """The env's hand-written tasks by (database, id): they are the dev, test and private splits."""
    source = sql_source()
    return {
        (str(t.metadata["database"]), str(t.metadata["id"])): t
        for split in HANDWRITTEN_SPLITS
        for t in source.tasks(split)
    }


def build_workload(n_tasks: int | None, tmp: Path) -> Workload:
    drafts = load_handwritten()
    tasks = env_tasks()
    if n_tasks is not None:
        drafts = drafts[:n_tasks]
    names = sorted({str(d.metadata["database"]) for d in drafts})
    copies: dict[str, Path] = {}
    for name in names:  # SkyRL opens read-write: give it copies, never frostgym's cache files
        copies[name] = tmp / f"{name}.sqlite"
        shutil.copyfile(database_path(name), copies[name])
    refs = {name: ReferenceDB(path) for name, path in copies.items()}
    work = Workload(pairs=[], tasks=0, databases=names, stats={k: KindStats() for k in KINDS})
    for d in drafts:
        name, task_id, gold = str(d.metadata["database"]), str(d.metadata["id"]), d.answer
        core = sql_core(gold)
        gold_rows = refs[name].rows(core)
        checked = shared_database(name).run(gold)
        if gold_rows is None or not checked.ok:
            why = "gold fails in sqlite3" if gold_rows is None else f"gold fails in frostgym: {checked.status}"
            work.skipped.append({"task_id": task_id, "reason": why})
            continue
        if tasks[(name, task_id)].answer != gold:
            raise AssertionError(f"{task_id}: the env's task holds another gold query than the task file")
        work.tasks += 1
        candidates: list[tuple[str, str]] = [("gold", gold)]
        for kind, (rewrite, _) in PERTURBATIONS.items():
            sql = rewrite(core, gold_rows)
            if sql is None:
                continue
            stats = work.stats[kind]
            stats.tried += 1
            rows = refs[name].rows(sql)
            if rows is None:
                stats.error += 1
            elif rows == gold_rows:
                stats.same += 1
            else:
                stats.kept += 1
                candidates.append((kind, sql))
        work.stats["gold"].tried += 1
        work.stats["gold"].kept += 1
        for kind, sql in candidates:
            work.pairs.append(
                Pair(
                    task_id=task_id,
                    database=name,
                    gold_sql=d.answer,  # the task's own string: frostgym caches its gold result under it
                    kind=kind,
                    sql=sql,
                    task=tasks[(name, task_id)],
                    frostgym_reply=f"{THINK}<answer>{sql}</answer>",
                    skyrl_reply=f"{THINK}<solution>{sql}</solution>",
                    skyrl_db_file=str(copies[name]),
                )
            )
    for ref in refs.values():
        ref.conn.close()
    return work


# -- graders on pairs --------------------------------------------------------------------------------------------


def skyrl_accepts(p: Pair) -> bool:
    return skyrl_reward(p.skyrl_reply, p.gold_sql, p.skyrl_db_file) == 1.0


class BareExecutor:
    """Reference floor, not a grader: run the prediction only, on one persistent read-only connection per
    database, and fetch all rows. What is left above it is each grader's own cost."""

    def __init__(self) -> None:
        self._conns: dict[str, sqlite3.Connection] = {}

    def __call__(self, p: Pair) -> bool:
        conn = self._conns.get(p.skyrl_db_file)
        if conn is None:
            conn = self._conns[p.skyrl_db_file] = sqlite3.connect(f"file:{p.skyrl_db_file}?mode=ro", uri=True)
        conn.execute(p.sql).fetchall()
        return False

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()


@dataclass(frozen=True)
class Method:
    name: str
    short: str  # column header in the per-kind table
    grader: Grader
    before_pass: Callable[[], None] | None = None  # run (untimed) before each timed pass
    reference: bool = False  # not a grader: timed, but left out of the verdicts


COLD = "frostgym SQLEnv.respond, cold (gold run per reply)"
WARM = "frostgym SQLEnv.respond, warm (gold cached)"
SKYRL = "SkyRL-style (thread + new read-write connection per query)"
BARE = "reference: sqlite3 execute prediction only"
FROSTGYM = COLD  # the like-for-like row: its verdicts are the ones compared (the cache changes none)


def make_methods(bare: BareExecutor, pairs: Sequence[Pair]) -> tuple[Method, ...]:
    env = SQLEnv()
    respond = env.respond
    cache = sql_execution._gold_cache

    def warm(p: Pair) -> bool:
        grade = respond(p.task, p.frostgym_reply, 0, True).grade
        return grade is not None and grade.details["status"] == "match"

    def cold(p: Pair) -> bool:
        cache.clear()  # well under a microsecond on a one-entry dict
        return warm(p)

    def fill_gold_cache() -> None:  # the cold pass leaves it holding one entry
        for p in pairs:
            sql_execution.gold_result(shared_database(p.database), p.task.answer)

    return (
        Method(COLD, "frostgym cold", cold),
        Method(WARM, "frostgym warm", warm, fill_gold_cache),
        Method(SKYRL, "SkyRL-style", skyrl_accepts),
        Method(BARE, "bare execute", bare, reference=True),
    )


@dataclass(frozen=True)
class Timing:
    method: str
    pairs: int
    runs_s: list[float]
    per_kind_runs_s: dict[str, list[float]]

    @property
    def median_s(self) -> float:
        return statistics.median(self.runs_s)

    @property
    def best_s(self) -> float:
        return min(self.runs_s)

    @property
    def us_per_query(self) -> float:
        return self.median_s / self.pairs * 1e6

    @property
    def queries_per_s(self) -> float:
        return self.pairs / self.median_s

    def kind_us(self, kind: str, n: int) -> float:
        return statistics.median(self.per_kind_runs_s[kind]) / n * 1e6


def timed_pass(grader: Grader, pairs: Sequence[Pair]) -> tuple[float, dict[str, float]]:
    """One pass over all pairs with the garbage collector off (as ``timeit`` does): total and per-kind seconds."""
    per_kind = dict.fromkeys(KINDS, 0.0)
    clock = time.perf_counter
    gc.collect()
    gc.disable()
    try:
        t0 = clock()
        for p in pairs:
            t = clock()
            grader(p)
            per_kind[p.kind] += clock() - t
        total = clock() - t0
    finally:
        gc.enable()
    return total, per_kind


def bench(methods: Sequence[Method], pairs: Sequence[Pair], repeats: int) -> list[Timing]:
    """``repeats`` rounds; each round times one pass of every method in turn, so that a burst of load from
    elsewhere on the machine hits all methods alike. Each method's median pass is its figure."""
    runs: dict[str, list[float]] = {m.name: [] for m in methods}
    kinds: dict[str, dict[str, list[float]]] = {m.name: {k: [] for k in KINDS} for m in methods}
    for _ in range(repeats):
        for m in methods:
            if m.before_pass is not None:
                m.before_pass()
            total, per_kind = timed_pass(m.grader, pairs)
            runs[m.name].append(total)
            for k, seconds in per_kind.items():
                kinds[m.name][k].append(seconds)
    return [Timing(m.name, len(pairs), runs[m.name], kinds[m.name]) for m in methods]


# -- report ------------------------------------------------------------------------------------------------------


def predictions_table(work: Workload) -> str:
    body = []
    for kind in KINDS:
        s = work.stats[kind]
        rule = "the gold query itself" if kind == "gold" else PERTURBATIONS[kind][1]
        body.append([kind, rule, str(s.tried), str(s.error), str(s.same), str(s.kept)])
    body.append(["all", "", *(str(sum(getattr(s, f) for s in work.stats.values())) for f in asdict(KindStats()))])
    headers = ["kind", "rewrite", "applied", "error", "same rows", "kept"]
    return format_table(headers, body, [False, False, True, True, True, True])


def timing_table(timings: Sequence[Timing]) -> str:
    skyrl = next(t for t in timings if t.method == SKYRL)
    body = [
        [
            t.method,
            str(t.pairs),
            f"{t.us_per_query:,.1f}",
            f"{t.queries_per_s:,.0f}",
            f"{t.median_s / skyrl.median_s:.2f}x",
            f"{skyrl.median_s / t.median_s:.2f}x",
        ]
        for t in timings
    ]
    headers = ["from the reply text", "replies", "us/reply", "replies/s", "time vs SkyRL", "speed vs SkyRL"]
    return format_table(headers, body, [False, True, True, True, True, True])


def per_kind_table(timings: Sequence[Timing], counts: Counter[str], methods: Sequence[Method]) -> str:
    short = {m.name: m.short for m in methods}
    body = [
        [kind, str(counts[kind]), *(f"{t.kind_us(kind, counts[kind]):,.1f}" for t in timings)]
        for kind in KINDS
        if counts[kind]
    ]
    headers = ["kind", "replies", *(f"{short[t.method]} us" for t in timings)]
    return format_table(headers, body, [False, True, *(True for _ in timings)])


def verdict_counts(pairs: Sequence[Pair], verdicts: dict[str, list[bool]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    fg, sk = verdicts[FROSTGYM], verdicts[SKYRL]
    for kind in (*KINDS, "all wrong"):
        idx = [i for i, p in enumerate(pairs) if (p.kind != "gold" if kind == "all wrong" else p.kind == kind)]
        out[kind] = {
            "pairs": len(idx),
            "frostgym_scored_1": sum(fg[i] for i in idx),
            "frostgym_scored_0": sum(not fg[i] for i in idx),
            "skyrl_scored_1": sum(sk[i] for i in idx),
            "skyrl_scored_0": sum(not sk[i] for i in idx),
            "disagree": sum(fg[i] != sk[i] for i in idx),
        }
    return out


def verdict_table(counts: dict[str, dict[str, int]]) -> str:
    body = [
        [
            kind,
            str(c["pairs"]),
            str(c["frostgym_scored_1"]),
            str(c["frostgym_scored_0"]),
            str(c["skyrl_scored_1"]),
            str(c["skyrl_scored_0"]),
            str(c["disagree"]),
        ]
        for kind, c in counts.items()
        if c["pairs"]
    ]
    headers = ["kind", "pairs", "frostgym 1", "frostgym 0", "SkyRL-style 1", "SkyRL-style 0", "disagree"]
    return format_table(headers, body, [False, True, True, True, True, True, True])


def disagreement_examples(pairs: Sequence[Pair], verdicts: dict[str, list[bool]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for i, p in enumerate(pairs):
        if verdicts[FROSTGYM][i] != verdicts[SKYRL][i]:
            out.setdefault(p.kind, []).append(
                {
                    "task_id": p.task_id,
                    "gold_sql": p.gold_sql,
                    "sql": p.sql,
                    "frostgym": int(verdicts[FROSTGYM][i]),
                    "skyrl_style": int(verdicts[SKYRL][i]),
                }
            )
    return out


def summary_lines(timings: Sequence[Timing], counts: Counter[str]) -> list[str]:
    """Each frostgym row against SkyRL-style, faster or slower; what each grader adds to the bare query; and,
    by prediction kind, where the cold row is slower than SkyRL-style, with the reason."""
    by_name = {t.method: t for t in timings}
    skyrl, bare, cold = by_name[SKYRL], by_name[BARE], by_name[COLD]
    out = [
        f"{t.method}: {t.us_per_query:,.1f} us/reply, {ratio_phrase(t.median_s / skyrl.median_s)} SkyRL-style "
        f"({skyrl.us_per_query:,.1f} us)"
        for t in (cold, by_name[WARM])
    ]
    for t in (cold, by_name[WARM], skyrl):
        out.append(
            f"{t.method}: {t.us_per_query - bare.us_per_query:,.1f} us/reply above running the prediction alone "
            f"({bare.us_per_query:,.1f} us)"
        )
    kinds = [k for k in KINDS if counts[k]]
    slower = [k for k in kinds if cold.kind_us(k, counts[k]) > skyrl.kind_us(k, counts[k])]
    faster = [k for k in kinds if k not in slower]
    out.append(
        f"cold is slower than SkyRL-style on {', '.join(slower) or 'no kind'} "
        f"and faster on {', '.join(faster) or 'none'}: "
        "each of its two queries runs under the executor's bounds (a Python progress callback every "
        "ExecutionLimits.progress_ops SQLite instructions for the deadline, memory and Ctrl-C, the authorizer, the "
        "hand-off to the SQL worker thread), a cost that grows with the query's work, while SkyRL-style pays a "
        "fixed cost per query (a new connection that reads the schema, a new thread)"
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help=f"only the first {QUICK_TASKS} tasks")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed passes per grader, median kept")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")

    started = time.perf_counter()
    machine = machine_info(("frostgym",))
    load = os.getloadavg()
    print(
        f"frostgym {machine['versions']['frostgym']} SQL grading: SQLEnv.respond vs a SkyRL-style grader, one process"
    )
    print(
        f"machine: {machine['cpu_model']}, {machine['cpu_count']} cores, {machine['implementation']} "
        f"{machine['python']}, SQLite {machine['sqlite']}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"median of {args.repeats} passes"
    )

    with tempfile.TemporaryDirectory(prefix="frostgym-sql-bench-") as tmpdir:
        work = build_workload(QUICK_TASKS if args.quick else None, Path(tmpdir))
        pairs = work.pairs
        counts = Counter(p.kind for p in pairs)
        print(
            f"{work.tasks} tasks over {len(work.databases)} databases ({', '.join(work.databases)}), "
            f"{len(pairs)} (task, prediction) pairs"
            + (f"; skipped {len(work.skipped)} tasks whose gold does not run" if work.skipped else "")
        )
        for s in work.skipped:
            print(f"  skipped {s['task_id']}: {s['reason']}")
        print("\nPredictions per task (a rewrite is kept when it runs and its rows, as a list, differ from gold's):\n")
        print(predictions_table(work))

        bare = BareExecutor()
        methods = make_methods(bare, pairs)
        verdicts: dict[str, list[bool]] = {}
        for method in methods:
            if method.before_pass is not None:
                method.before_pass()
            verdicts[method.name] = [method.grader(p) for p in pairs]  # warm-up pass, records verdicts
        timings = bench(methods, pairs, args.repeats)
        bare.close()
        sql_execution._gold_cache.clear()

    if verdicts[WARM] != verdicts[COLD]:
        raise AssertionError("the gold cache changed a verdict")

    print("\nFrom the reply text to the verdict, median pass (time vs SkyRL: <1 = faster):\n")
    print(timing_table(timings))
    print("\nus/reply by prediction kind (median pass per kind):\n")
    print(per_kind_table(timings, counts, methods))
    print()
    for line in summary_lines(timings, counts):
        print(line)

    vc = verdict_counts(pairs, verdicts)
    print("\nVerdicts (number of pairs each grader scored 1 = correct / 0 = wrong):\n")
    print(verdict_table(vc))
    wrong = vc["all wrong"]
    print(
        f"\nwrong rewrites: frostgym scored 0 on {wrong['frostgym_scored_0']}/{wrong['pairs']}; "
        f"SkyRL-style scored 1 (fooled) on {wrong['skyrl_scored_1']}/{wrong['pairs']}. "
        f"gold queries: graders disagree on {vc['gold']['disagree']}/{vc['gold']['pairs']}"
    )
    examples = disagreement_examples(pairs, verdicts)
    for kind, exs in examples.items():
        ex = exs[0]
        print(f"  e.g. {kind} {ex['task_id']}: frostgym={ex['frostgym']} SkyRL-style={ex['skyrl_style']}: {ex['sql']}")
    skyrl = next(t for t in timings if t.method == SKYRL)
    elapsed = time.perf_counter() - started
    print(f"\ntotal wall time {elapsed:.1f} s")

    if args.json is not None:
        payload = {
            "tasks": work.tasks,
            "databases": work.databases,
            "skipped_tasks": work.skipped,
            "pairs": len(pairs),
            "pairs_per_kind": dict(counts),
            "repeats": args.repeats,
            "machine": machine,
            "load_average": load,
            "predictions": {k: asdict(s) for k, s in work.stats.items()},
            "timings": [
                {
                    **asdict(t),
                    "median_s": t.median_s,
                    "best_s": t.best_s,
                    "us_per_reply": t.us_per_query,
                    "replies_per_s": t.queries_per_s,
                    "time_vs_skyrl": t.median_s / skyrl.median_s,
                }
                for t in timings
            ],
            "summary": summary_lines(timings, counts),
            "verdicts": vc,
            "disagreements": {kind: exs[:DISAGREEMENTS_KEPT] for kind, exs in examples.items()},
            "wall_time_s": elapsed,
        }
        write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
