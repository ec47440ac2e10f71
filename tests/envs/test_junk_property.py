"""Junk actions on every id (issue 15): ``step`` either returns an observation with a reward
in [0, 1] within 5 s or raises ``InvalidActionError``, and the same seed and junk give the
same result twice.

Hypothesis draws the seed and the junk: text with lone surrogates and NUL mixed with each
family's tags, multi-megabyte strings, deeply nested and wrongly typed tool-call dicts,
invalid UTF-8 bytes, ``None``, numbers, arrays, dicts with non-string keys and cycles. The
run is derandomized and keeps no example database, so every run (CI included) tries the
same examples.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frostgym.core.env import FrozenEnv
from frostgym.core.errors import InvalidActionError, SandboxUnavailableError
from frostgym.sandbox.backends import resolve_backend
from tests.conftest import ENV_IDS, make_env

pytestmark = pytest.mark.slow

STEP_SECONDS = 5.0
#: Replies stepped per episode at most (fewer when the episode ends first); multi-turn ids
#: get several, so junk also lands on a later turn.
MAX_STEPS = 3
#: Examples per id: the tool and SQL ids parse the most, so they get the most.
EXAMPLES = {
    "frostgym/Math-v0": 30,
    "frostgym/Arithmetic-v0": 15,
    "frostgym/Fractions-v0": 15,
    "frostgym/LinearEquations-v0": 15,
    "frostgym/SQL-v0": 60,
    "frostgym/Code-v0": 40,
    "frostgym/Tools-v0": 100,
    "frostgym/ToolsMultiTurn-v0": 80,
    "frostgym/ToolsHTTP-v0": 80,
}
DEFAULT_EXAMPLES = 25  # an id registered after this table was written

# -- junk strategies -------------------------------------------------------------------

#: Pieces of every family's protocol, so junk text reaches the parsers behind the tags.
TOKENS = (
    "<answer>",
    "</answer>",
    "<think>",
    "</think>",
    "<sql>",
    "</sql>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "<run_tests>",
    "```python\n",
    "```sql\n",
    "```",
    "\\boxed{",
    '{"name": "',
    '", "arguments": {',
    '"query": "',
    "}}",
    "[f(a=1), g(b='x')]",
    "cd(folder='x')",
    "ls(a=True)",
    "SELECT ",
    "SELECT * FROM sqlite_master",
    "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r",
    "SELECT randomblob(1000000000)",
    "SELECT zeroblob(2000000000)",
    "ATTACH DATABASE 'x' AS y",
    "PRAGMA writable_schema = 1",
    "DROP TABLE",
    "def ",
    "import os\n",
    "return ",
    "\\ud800",
    "\\u0000",
    "1e999999",
    "-0",
    "NaN",
    "Infinity",
    "9" * 400,
    "1/0",
    "\x00",
    "\ud800",
    "\udfff",
    "\ufffd",
    "\u202e",
    "\n",
    "\r\n",
)

CHARS = st.one_of(
    st.characters(codec=None, exclude_categories=()),  # every code point, surrogates included
    st.characters(categories=["Cs"]),  # lone surrogates, which the above rarely draws
    st.sampled_from(["\x00", "\x7f", "\ufeff", "\U0010ffff"]),
)
JUNK_TEXT = st.lists(st.one_of(st.sampled_from(TOKENS), st.text(CHARS, max_size=20)), max_size=12).map("".join)

#: Units repeated to multi-megabyte strings: cheap to build, costly to parse naively.
HUGE_UNITS = (
    "7",
    "(",
    "[",
    "{",
    "\\",
    '"',
    "\x00",
    "\ud800",
    "é",
    "<answer>",
    "<tool_call>",
    "<tool_call>{",
    "<sql>",
    "<think>",
    "```python\n",
    "f(",
    "a=[",
    "SELECT ",
    "(SELECT ",
    "1+",
    "-",
    "\n",
)
HUGE_SIZES = (1_000_000, 3_000_000, 8_000_000)


@st.composite
def huge_text(draw: st.DrawFn) -> str:
    unit = draw(st.sampled_from(HUGE_UNITS))
    body = unit * (draw(st.sampled_from(HUGE_SIZES)) // len(unit))
    return draw(st.sampled_from(["", "<answer>", "<sql>", "<tool_call>"])) + body + draw(st.sampled_from(["", "}"]))


def nested(depth: int, kind: str, leaf: Any) -> Any:
    """``leaf`` under ``depth`` levels of lists or dicts, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


@st.composite
def deep(draw: st.DrawFn) -> Any:
    depth = draw(st.sampled_from([2, 33, 65, 255, 1000, 5000]))
    return nested(depth, draw(st.sampled_from(["list", "dict"])), draw(st.sampled_from([1, "x", None, "\ud800"])))


@st.composite
def deep_json_text(draw: st.DrawFn) -> str:
    depth = draw(st.sampled_from([33, 255, 1000, 5000, 100_000]))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    return opener * depth + "1" + closer * draw(st.sampled_from([depth, 0, depth // 2]))


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**64, -(2**63) - 1, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(CHARS, max_size=10),
    st.binary(max_size=10),
)
#: Any JSON-ish value, and some that JSON cannot hold (bytes, tuples, int keys).
JUNK_VALUE = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(CHARS, max_size=8), st.integers(), st.none()), inner, max_size=4),
    ),
    max_leaves=12,
)


#: JSON data only (what a policy that decodes JSON can send), still with junk in it.
JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from([2**64, 10**400]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(CHARS, max_size=10),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(CHARS, max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

#: Math answers that are costly to read or compare (sympy, math-verify).
MATH_JUNK = (
    "10^{10^{10^{10}}}",
    "9^9^9^9",
    "100000!",
    "\\frac{1}{0}",
    "\\sqrt{-1}",
    "\\infty",
    "x = y = z",
    "1e999999",
    "1" * 5000,
    "\\frac{" * 200 + "1" + "}" * 200,
    "(" * 500 + "1" + ")" * 500,
    "\\begin{pmatrix}" + "1&" * 2000 + "\\end{pmatrix}",
    "\\int_0^\\infty e^{-x^2}dx",
    "0.\\overline{3}",
)

#: Bodies of the function a Code-v0 reply defines: returns that are hard to send back over the
#: sandbox's wire or to compare, and exits of every kind.
CODE_BODIES = (
    "return float('nan')",
    "return 10 ** 5000",
    "return b'\\xff'",
    "return '\\ud800'",
    "return object()",
    "return __import__('collections').Counter(a=1)",
    "x = []\n    x.append(x)\n    return x",
    "x = 1\n    for _ in range(100000):\n        x = [x]\n    return x",
    "return [0] * 10 ** 7",
    "print('\\x00' * 10 ** 7)",
    "raise SystemExit(0)",
    "__import__('os')._exit(0)",
    "raise KeyboardInterrupt",
    "class S(str):\n        def __eq__(self, other):\n            return True\n    return S('x')",
    "return (lambda: 1)",
    "return type('D', (dict,), {})(a=1)",
    "return",
)

TAG_PAIRS = (
    ("<answer>", "</answer>"),
    ("<sql>", "</sql>"),
    ("<tool_call>", "</tool_call>"),
    ("\\boxed{", "}"),
    ("```python\n", "\n```"),
    ("<run_tests>\n```python\n", "\n```"),
    ("<think>", "</think>"),
    ("", ""),
)


#: Argument values of about the right kind, so calls get past the parser to the tools.
PLAUSIBLE: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(["", ".", "..", "/", "engage", "a" * 300, "SELECT 1", 0, -1, 1e308, 2**63, [], {}, None, True]),
    st.text(CHARS, max_size=12),
    JSON_VALUE,
)


@dataclass(frozen=True)
class Context:
    """What the episode offers to aim junk at: its tools with their parameters, and (Code-v0)
    the function the reply must define."""

    tools: tuple[tuple[str, tuple[str, ...]], ...]
    entry_point: str

    @classmethod
    def of(cls, env: FrozenEnv) -> Context:
        tools = []
        for schema in getattr(env, "tools", None) or []:
            function = schema.get("function", schema)
            tools.append((str(function["name"]), tuple(function.get("parameters", {}).get("properties", {}))))
        return cls(tuple(tools) or (("answer", ("answer",)),), str(env.task.metadata.get("entry_point", "f")))


@st.composite
def arguments(draw: st.DrawFn, params: tuple[str, ...]) -> Any:
    """A call's arguments: the right keys with junk values, junk keys, or no object at all."""
    keys = st.one_of(st.sampled_from(params or ("x",)), st.text(CHARS, max_size=12))
    return draw(
        st.one_of(
            st.dictionaries(keys, st.one_of(PLAUSIBLE, JUNK_TEXT, huge_text()), max_size=4),
            st.dictionaries(keys, st.one_of(JUNK_VALUE, deep()), max_size=3),
            JUNK_VALUE,
            JUNK_TEXT,
            deep(),
            deep_json_text(),
            st.just('{"query": "SELECT 1"'),  # cut short
            st.just('{"a": NaN, "b": 1e999, "a": 2}'),
            st.builds(json.dumps, st.dictionaries(keys, JSON_VALUE, max_size=4)),
        )
    )


@st.composite
def call_entry(draw: st.DrawFn, context: Context) -> Any:
    """One entry of a structured action's ``tool_calls``, in any of the shapes policies send."""
    real, params = draw(st.sampled_from(context.tools))
    name = (
        draw(st.one_of(st.just(real), JUNK_VALUE, st.text(CHARS, max_size=300), deep()))
        if draw(st.booleans())
        else real
    )
    flat = {"name": name, "arguments": draw(arguments(params))}
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return flat
    if shape == 1:  # OpenAI's wrapping
        return {"type": draw(st.sampled_from(["function", 1, None])), "id": draw(JUNK_VALUE), "function": flat}
    if shape == 2:
        return {"function": draw(st.one_of(JUNK_VALUE, deep()))}
    if shape == 3:
        return {"name": name}
    return draw(st.one_of(JUNK_VALUE, deep()))


@st.composite
def tool_call_text(draw: st.DrawFn, context: Context) -> str:
    """Tool calls as text: Hermes blocks with JSON, or python call syntax, holding junk."""
    blocks = []
    for _ in range(draw(st.integers(1, 3))):
        real, params = draw(st.sampled_from(context.tools))
        name = draw(st.one_of(st.just(real), st.text(CHARS, max_size=20)))
        if draw(st.booleans()):
            value = draw(st.one_of(st.dictionaries(st.sampled_from(params or ("x",)), PLAUSIBLE), JSON_VALUE))
            body = json.dumps({"name": name, "arguments": value}, ensure_ascii=draw(st.booleans()))
            blocks.append(f"<tool_call>{draw(st.sampled_from([body, body[:-1], body[1:]]))}</tool_call>")
        else:
            param = draw(st.sampled_from(params or ("x",)))
            literal = draw(st.one_of(JSON_VALUE.map(repr), JUNK_TEXT, deep_json_text()))
            blocks.append(f"[{name}({param}={literal})]")
    text = "\n".join(blocks)
    return draw(JUNK_TEXT) + text + draw(JUNK_TEXT) if draw(st.booleans()) else text


def self_referencing(kind: int) -> Any:
    if kind == 0:
        loop: dict[str, Any] = {"tool_calls": []}
        loop["tool_calls"].append(loop)
        return loop
    if kind == 1:
        args: dict[str, Any] = {"query": "SELECT 1"}
        args["self"] = args
        return {"tool_calls": [{"name": "run_sql", "arguments": args}]}
    if kind == 2:
        items: list[Any] = []
        items.append(items)
        return {"content": "x", "tool_calls": items}
    looped: dict[str, Any] = {"content": "<answer>1</answer>"}
    looped["me"] = looped
    return looped


#: How often each kind of junk is drawn (Hypothesis's ``one_of`` would draw them evenly).
KINDS = (
    *["text"] * 3,
    *["wrapped"] * 3,
    *["tool_text"] * 3,
    *["tool_dict"] * 4,
    "code",
    "huge",
    "bytes",
    *["not_text"] * 2,
    "cyclic",
)


@st.composite
def junk_action(draw: st.DrawFn, context: Context) -> Any:
    """One junk action."""
    kind = draw(st.sampled_from(KINDS))
    if kind == "text":
        return draw(JUNK_TEXT)
    if kind == "wrapped":
        opener, closer = draw(st.sampled_from(TAG_PAIRS))
        inner = draw(st.one_of(JUNK_TEXT, st.sampled_from(MATH_JUNK), st.sampled_from(TOKENS)))
        return draw(JUNK_TEXT) + opener + inner + draw(st.sampled_from([closer, ""]))
    if kind == "tool_text":
        return draw(tool_call_text(context))
    if kind == "tool_dict":
        entries = st.lists(call_entry(context), max_size=3)
        calls = draw(st.one_of(entries, entries, call_entry(context), st.lists(call_entry(context), min_size=65)))
        action = {"tool_calls": calls}
        if draw(st.booleans()):
            action["content"] = draw(st.one_of(JUNK_TEXT, JUNK_VALUE))
        return action
    if kind == "code":
        body = draw(st.sampled_from(CODE_BODIES))
        code = f"```python\ndef {context.entry_point}(*args, **kwargs):\n    {body}\n```"
        return draw(st.sampled_from(["", "<run_tests>\n"])) + code
    if kind == "huge":
        return draw(huge_text())
    if kind == "bytes":
        return draw(
            st.one_of(
                JUNK_TEXT.map(lambda text: text.encode("utf-8", "surrogatepass")),
                st.binary(max_size=64).map(lambda b: b"<answer>" + b + b"\xff\xfe\xc0\x80</answer>"),
            )
        )
    if kind == "not_text":
        return draw(
            st.one_of(
                JUNK_VALUE,
                st.sampled_from([None, float("nan"), float("inf"), -0.0, 0, 2**100, True]),
                st.lists(JUNK_TEXT, max_size=3),
                st.builds(np.array, st.lists(st.integers(-5, 5), max_size=4)),
                st.just(np.array(["<answer>1</answer>"])),
                st.dictionaries(st.integers(), JUNK_VALUE, min_size=1, max_size=3),
                st.fixed_dictionaries({"content": st.one_of(JUNK_VALUE, deep())}),
            )
        )
    return draw(st.one_of(st.integers(0, 3).map(self_referencing), deep()))


# -- the property ----------------------------------------------------------------------


def _plain(value: Any) -> str:
    """``value`` as the card writer would write it; a failure here is a finding too."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def episode(env: FrozenEnv, seed: int, actions: list[Any]) -> list[tuple[Any, ...]]:
    """What ``env`` does with ``actions`` after ``reset(seed=seed)``, checking each step."""
    env.reset(seed=seed)
    outcomes: list[tuple[Any, ...]] = []
    for action in actions:
        started = time.perf_counter()
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except InvalidActionError as error:
            outcomes.append(("invalid", type(error).__name__, str(error)))
            continue  # the episode is still running: the next reply is stepped as usual
        finally:
            elapsed = time.perf_counter() - started
            assert elapsed < STEP_SECONDS, f"step took {elapsed:.1f}s"
        assert isinstance(reward, float) and math.isfinite(reward) and 0.0 <= reward <= 1.0, reward
        assert env.observation_space.contains(obs), "the observation is outside observation_space"
        assert isinstance(terminated, bool) and truncated is False
        outcomes.append(("step", _plain(obs), reward, terminated, _plain(info)))
        if terminated:
            break
    return outcomes


def check_id(env_id: str) -> None:
    env = make_env(env_id)

    @settings(
        max_examples=EXAMPLES.get(env_id, DEFAULT_EXAMPLES),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(data=st.data())
    def junk_is_graded_or_refused(data: st.DataObject) -> None:
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        env.reset(seed=seed)  # the episode's tools name the calls worth drawing
        steps = data.draw(st.integers(1, min(MAX_STEPS, env.max_turns)), label="steps")
        context = Context.of(env)
        actions = [data.draw(junk_action(context), label=f"junk {i}") for i in range(steps)]
        first = episode(env, seed, actions)
        again = episode(env, seed, actions)
        assert first == again, "the same seed and junk gave a different result"

    junk_is_graded_or_refused()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_junk_actions_are_graded_or_refused(env_id: str) -> None:
    if env_id == "frostgym/Code-v0":
        try:
            resolve_backend("auto")
        except SandboxUnavailableError as error:
            pytest.skip(f"Code-v0 runs code in a sandbox, and none can run here: {error}")
    check_id(env_id)
