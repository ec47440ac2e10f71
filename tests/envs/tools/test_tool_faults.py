"""Faults an outside campaign found in the tool envs, pinned on every tool id with real envs.

1. An escaped lone surrogate (``'\\ud800'`` as ASCII text, in python call syntax or JSON)
   was decoded into the parsed call and reached ``info`` and the observation, so the card
   could not be written (orjson: ``str is not valid UTF-8``). ``FrozenEnv.step`` now makes
   everything a family returns UTF-8-clean and sets ``info["action_sanitized"]``.
2. Call arguments nested 2 000 deep raised ``RecursionError``, a self-referencing structured
   action ``ValueError``, depth 500 a ``GraderError`` (filed as infrastructure). Arguments
   are now bounded in one place (``frostgym.tools.calls``): junk is a named problem graded
   0, or ``InvalidActionError`` for a structured action that is not JSON data at all.
3. 10 MB of ``<tool_call>`` blocks took seconds per step and 20 000 calls made a message
   outside the observation space. A reply over ``MAX_CALL_TEXT`` characters is now graded
   ``too_long`` before it is read, and a reply is read for at most ``MAX_CALLS_PER_REPLY``
   calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from frostgym.core.env import FrozenEnv
from frostgym.core.errors import GraderError, InvalidActionError
from frostgym.core.messages import clean_data
from frostgym.graders import tool_ast, tool_http, tool_state
from frostgym.tools.calls import MAX_CALL_TEXT, MAX_CALLS_PER_REPLY, parse_reply, structured_to_text
from tests.conftest import make_env

TOOL_IDS = ("frostgym/Tools-v0", "frostgym/ToolsMultiTurn-v0", "frostgym/ToolsHTTP-v0")
MULTI_TURN_TASK = "bfcl_mt/base/test/0"


def start(env_id: str, **kwargs: Any) -> FrozenEnv:
    env = make_env(env_id, **kwargs)
    options = {"task_id": MULTI_TURN_TASK} if env_id == "frostgym/ToolsMultiTurn-v0" else None
    env.reset(seed=0, options=options)
    return env


def assert_recordable(env: FrozenEnv, obs: Any, info: dict[str, Any]) -> None:
    """What a card needs: orjson encodes the step (no lone surrogate, no deep or odd data),
    and the observation is inside the env's own observation space."""
    orjson.dumps([obs, info])
    assert env.observation_space.contains(obs)


# -- 1. lone surrogates written as ASCII escapes ----------------------------------------------

SURROGATE_ACTIONS: dict[str, Any] = {
    "python-value": "[f(a='\\ud800')]",
    "python-dict-key": "[f(a={'\\udfff': 1})]",
    "json-value": '<tool_call>{"name": "f", "arguments": {"a": "\\ud800"}}</tool_call>',
    "json-key": '<tool_call>{"name": "f", "arguments": {"\\udfff": 1}}</tool_call>',
    "json-name": '<tool_call>{"name": "f\\ud800", "arguments": {}}</tool_call>',
    "json-string-arguments": '<tool_call>{"name": "f", "arguments": "{\\"a\\": \\"\\\\udc00\\"}"}</tool_call>',
    "structured-string-arguments": {"tool_calls": [{"name": "f", "arguments": '{"\\ud800": "\\udc00"}'}]},
    "structured-object": {"tool_calls": [{"function": {"name": "f", "arguments": {"\ud800": ["\udc00"]}}}]},
}


@pytest.mark.parametrize("env_id", TOOL_IDS)
@pytest.mark.parametrize("case", sorted(SURROGATE_ACTIONS))
def test_escaped_lone_surrogates_are_sanitized_everywhere(env_id: str, case: str) -> None:
    env = start(env_id)
    obs, reward, _, _, info = env.step(SURROGATE_ACTIONS[case])
    assert 0.0 <= float(reward) <= 1.0
    assert info.get("action_sanitized") is True, case
    assert_recordable(env, obs, info)


def test_a_surrogate_that_reaches_the_tool_world_still_grades() -> None:
    """The file name lands in BFCL's file system; the episode grade hashes that state."""
    env = start("frostgym/ToolsMultiTurn-v0")
    _, _, done, _, info = env.step("[mkdir(dir_name='\\ud800')]")
    assert not done and info["action_sanitized"] is True
    obs, reward, done, _, info = env.step("Done.")
    assert done and reward == 0.0 and isinstance(info["grade"]["details"]["answer_key"], str)
    assert_recordable(env, obs, info)


def test_a_surrogate_in_a_real_http_call_is_sanitized() -> None:
    env = start("frostgym/ToolsHTTP-v0")
    reply = '<tool_call>{"name": "get_current_weather", "arguments": {"city": "\\ud800"}}</tool_call>'
    obs, _, done, _, info = env.step(reply)
    assert not done and info["action_sanitized"] is True
    assert_recordable(env, obs, info)


@pytest.mark.parametrize(
    ("env_id", "action"),
    [
        ("frostgym/SQL-v0", {"tool_calls": [{"name": "run_sql", "arguments": '{"query": "SELECT \'\\ud800\'"}'}]}),
        ("frostgym/SQL-v0", {"tool_calls": [{"name": "submit_sql", "arguments": {"query": "SELECT '\udc00'"}}]}),
        ("frostgym/Code-v0", {"tool_calls": [{"name": "submit", "arguments": '{"code": "x = \'\\ud800\'"}'}]}),
    ],
)
def test_sql_and_code_tool_call_dicts_with_surrogates_are_sanitized(env_id: str, action: dict[str, Any]) -> None:
    env = start(env_id)
    obs, reward, _, _, info = env.step(action)
    assert 0.0 <= float(reward) <= 1.0 and info["action_sanitized"] is True
    assert_recordable(env, obs, info)


def test_clean_data_cleans_keys_and_values_and_ends_on_any_value() -> None:
    shared: list[Any] = ["\ud800"]
    data = {"\udfff": shared, "b": (shared, "ok"), "plain": [1, "é"]}
    cleaned, changed = clean_data(data)
    assert changed and cleaned == {"\ufffd": ["\ufffd"], "b": (["\ufffd"], "ok"), "plain": [1, "é"]}
    assert cleaned["plain"] is data["plain"]  # clean parts are not copied
    clean = {"a": ["x", ("y", 1.5)], "é": None}
    assert clean_data(clean) == (clean, False) and clean_data(clean)[0] is clean
    cycle: dict[str, Any] = {"s": "\ud800"}
    cycle["self"] = cycle
    cleaned, changed = clean_data(cycle)
    assert changed and cleaned["s"] == "\ufffd"
    dag: Any = "\ud800"
    for _ in range(200):  # 2**200 paths, 200 levels: ends fast, past CLEAN_DEPTH left as is
        dag = [dag, dag]
    started = time.perf_counter()
    clean_data(dag)
    assert time.perf_counter() - started < 0.5


def test_plain_ascii_steps_are_not_flagged() -> None:
    for env_id in TOOL_IDS:
        env = start(env_id)
        _, _, _, _, info = env.step(env.oracle_action())
        assert "action_sanitized" not in info, env_id


# -- 2. unbounded call arguments -------------------------------------------------------------------


def nested_list(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


def structured(arguments: Any, name: Any = "f") -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


def _cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


def _cyclic_list() -> dict[str, Any]:
    value: list[Any] = []
    value.append(value)
    return {"a": value}


def _cyclic_entry() -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "f"}
    entry["arguments"] = entry
    return {"tool_calls": [entry]}


def _cyclic_action() -> dict[str, Any]:
    action: dict[str, Any] = {"content": "", "tool_calls": []}
    action["tool_calls"].append(action)
    return action


def _cyclic_shared() -> dict[str, Any]:
    """A DAG that doubles at every level: 2**60 paths if walked naively."""
    value: Any = 1
    for _ in range(60):
        value = [value, value]
    return {"a": value}


JUNK: dict[str, Callable[[], Any]] = {}
for _depth in (500, 2_000, 100_000):
    _open, _close = "[" * _depth, "]" * _depth
    JUNK[f"json-depth-{_depth}"] = lambda o=_open, c=_close: (
        '<tool_call>{"name": "f", "arguments": {"a": ' + o + "1" + c + "}}</tool_call>"
    )
    JUNK[f"json-string-arguments-depth-{_depth}"] = lambda o=_open, c=_close: (
        '<tool_call>{"name": "f", "arguments": "{\\"a\\": ' + o + c + '}"}</tool_call>'
    )
    JUNK[f"python-depth-{_depth}"] = lambda o=_open, c=_close: "[f(a=" + o + "1" + c + ")]"
    JUNK[f"python-dict-depth-{_depth}"] = lambda d=_depth: "[f(a=" + "{'k': " * d + "1" + "}" * d + ")]"
    JUNK[f"structured-depth-{_depth}"] = lambda d=_depth: structured({"a": nested_list(d)})
    JUNK[f"structured-dict-depth-{_depth}"] = lambda d=_depth: structured(nested_dict(d))
JUNK.update(
    {
        "json-depth-40": lambda: (
            '<tool_call>{"name": "f", "arguments": {"a": ' + "[" * 40 + "]" * 40 + "}}</tool_call>"
        ),
        "structured-cyclic-arguments": lambda: structured(_cyclic_dict()),
        "structured-cyclic-value": lambda: structured(_cyclic_list()),
        "structured-cyclic-entry": _cyclic_entry,
        "structured-cyclic-action": _cyclic_action,
        "structured-shared-dag": lambda: structured(_cyclic_shared()),
        "structured-non-string-key": lambda: structured({1: 2}),
        "structured-nested-non-string-key": lambda: structured({"a": {(1, 2): 3}}),
        "python-non-string-key": lambda: "[f(a={1: 'x'})]",
        "structured-nan": lambda: structured({"a": float("nan"), "b": float("inf")}),
        "json-nan": lambda: '<tool_call>{"name": "f", "arguments": {"a": NaN, "b": -Infinity}}</tool_call>',
        "python-inf": lambda: "[f(a=1e999)]",
        "python-huge-int-expression": lambda: "[f(a=10**100000)]",
        "python-huge-int-literal": lambda: "[f(a=" + "9" * 5_000 + ")]",
        "python-big-int": lambda: "[f(a=" + "9" * 30 + ")]",
        "json-big-int": lambda: '<tool_call>{"name": "f", "arguments": {"a": ' + "9" * 30 + "}}</tool_call>",
        "json-huge-int": lambda: '<tool_call>{"name": "f", "arguments": {"a": ' + "9" * 5_000 + "}}</tool_call>",
        "structured-big-int": lambda: structured({"a": 2**64}),
        "structured-huge-int": lambda: structured({"a": 10**100_000}),
        "structured-bytes": lambda: structured({"a": b"x"}),
        "structured-set": lambda: structured({"a": {1, 2}}),
        "structured-object": lambda: structured({"a": object()}),
        "python-bytes-set-complex": lambda: "[f(a=b'x', b={1, 2}, c=3j, d=...)]",
        "structured-long-name": lambda: structured({}, name="f" * 1_000_000),
        "structured-name-not-string": lambda: structured({}, name=["f"]),
        "structured-wide": lambda: structured({"a": list(range(1_000_000))}),
        "structured-long-string": lambda: structured({"a": "x" * 10_000_000}),
        "structured-arguments-list": lambda: structured([1, 2]),
        "structured-tool-calls-string": lambda: {"tool_calls": "f"},
        "json-long-name": lambda: '<tool_call>{"name": "' + "f" * 50_000 + '", "arguments": {}}</tool_call>',
    }
)


#: The cases that take a second or more to refuse (a 100 000-deep structure, a DAG of 2**60 paths).
SLOW_JUNK = frozenset({"structured-depth-100000", "structured-dict-depth-100000", "structured-shared-dag"})

#: Python call syntax takes python literals, as BFCL does: read, and recorded as plain data.
PYTHON_LITERALS = frozenset({"python-non-string-key", "python-inf", "python-bytes-set-complex"})


def _step_junk(env: FrozenEnv, action: Any) -> tuple[Any, float, bool, dict[str, Any]] | None:
    """Step ``action``: ``None`` when it raised ``InvalidActionError`` (after checking the
    episode is still usable), else what the step returned. Any other exception fails."""
    try:
        obs, reward, done, _, info = env.step(action)
    except InvalidActionError:
        _, reward, _, _, _ = env.step(env.oracle_action())  # the episode was left as it was
        assert 0.0 <= float(reward) <= 1.0
        return None
    except GraderError as error:  # pragma: no cover - the failure being pinned
        pytest.fail(f"the agent's junk was filed as a grader error: {error}")
    return obs, float(reward), done, info


@pytest.mark.parametrize("env_id", TOOL_IDS)
@pytest.mark.parametrize(
    "case", [pytest.param(case, marks=pytest.mark.slow) if case in SLOW_JUNK else case for case in sorted(JUNK)]
)
def test_junk_arguments_are_the_agents_failure(env_id: str, case: str) -> None:
    env = start(env_id)
    started = time.perf_counter()
    result = _step_junk(env, JUNK[case]())
    # Bounded, not hung: the slow cases take ~1 s alone and ran past 2 s on a loaded 2-core box.
    assert time.perf_counter() - started < (20.0 if case in SLOW_JUNK else 2.0), case
    if result is None:
        assert case.startswith("structured-"), f"{case}: only a structured action can be no action at all"
        return
    obs, reward, done, info = result
    assert 0.0 <= reward <= 1.0
    assert_recordable(env, obs, info)
    if env_id == "frostgym/Tools-v0" and case in PYTHON_LITERALS:  # read; this task wants no call
        assert done and info["grade"]["label"] == "called_when_irrelevant", info["grade"]
    elif env_id == "frostgym/Tools-v0":  # graded at once: a named problem (or too long), never a match
        assert done and info["grade"]["label"] in ("malformed_call", "too_long"), info["grade"]
        assert info["grade"]["components"]["tool_format"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_id", "tool", "argument"),
    [("frostgym/SQL-v0", "run_sql", "query"), ("frostgym/Code-v0", "submit", "code")],
)
@pytest.mark.parametrize(
    "junk",
    ["depth-2000", "depth-100000", "cycle", "non-string-key", "nan", "huge-int", "bytes", "wide"],
)
def test_sql_and_code_tool_call_dicts_with_junk_arguments(env_id: str, tool: str, argument: str, junk: str) -> None:
    value: Any = {
        "depth-2000": nested_list(2_000),
        "depth-100000": nested_dict(100_000),
        "cycle": _cyclic_dict(),
        "non-string-key": {1: 2},
        "nan": float("nan"),
        "huge-int": 10**100_000,
        "bytes": b"x",
        "wide": list(range(1_000_000)),
    }[junk]
    for arguments in ({argument: "SELECT 1", "extra": value}, {argument: value}):
        env = start(env_id)
        result = _step_junk(env, {"tool_calls": [{"name": tool, "arguments": arguments}]})
        if result is not None:
            obs, reward, _, info = result
            assert 0.0 <= reward <= 1.0
            assert_recordable(env, obs, info)


def test_the_bound_is_a_named_problem_in_every_syntax() -> None:
    deep = "[" * 33 + "]" * 33
    for reply in (
        '<tool_call>{"name": "f", "arguments": {"a": ' + deep + "}}</tool_call>",
        "[f(a=" + deep + ")]",
    ):
        parsed = parse_reply(reply)
        assert parsed.calls == () and "nested deeper than" in parsed.problems[0].message, parsed
    structured_deep = structured_to_text(
        {"tool_calls": [{"function": {"name": "f", "arguments": {"a": nested_list(33)}}}]}
    )
    assert "nested deeper than" in parse_reply(structured_deep).problems[0].message
    fine = "[" * 32 + "]" * 32
    assert parse_reply('<tool_call>{"name": "f", "arguments": {"a": ' + fine + "}}</tool_call>").calls
    assert parse_reply(structured_to_text(structured({"a": nested_list(32)}))).calls


# -- 3. huge replies -----------------------------------------------------------------------------------

BLOCK = '<tool_call>{"name": "get_current_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
TEN_MB: dict[str, Callable[[], Any]] = {
    "hermes": lambda: BLOCK * (10_000_000 // len(BLOCK)),
    "python": lambda: "[" + "f(a=1), " * 1_250_000 + "]",
    "prose": lambda: "word " * 2_000_000,
    "structured-calls": lambda: {"tool_calls": [{"name": "f", "arguments": {"a": 1}}] * 250_000},
    "structured-content": lambda: {"content": "x" * 10_000_000, "tool_calls": []},
}


@pytest.mark.parametrize("env_id", TOOL_IDS)
@pytest.mark.parametrize("form", sorted(TEN_MB))
def test_ten_megabyte_replies_are_too_long_at_once(env_id: str, form: str) -> None:
    env = start(env_id)
    action = TEN_MB[form]()
    started = time.perf_counter()
    obs, reward, done, _, info = env.step(action)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, f"{env_id} {form}: {elapsed:.2f} s"
    assert done and reward == 0.0
    assert info["grade"]["label"] == "too_long", info["grade"]
    assert_recordable(env, obs, info)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["frostgym/ToolsHTTP-v0", "frostgym/ToolsMultiTurn-v0"])
@pytest.mark.parametrize("form", ["hermes", "python", "structured", "echoed-keys"])
def test_twenty_thousand_calls_stay_inside_the_observation_space(env_id: str, form: str) -> None:
    echoed = '<tool_call>{"name": "get_current_weather", "arguments": {"' + "k" * 1_450 + '": 1}}</tool_call>'
    action: Any = {
        "hermes": '<tool_call>{"name": "f", "arguments": {}}</tool_call>' * 20_000,
        "python": "[" + ",".join(["f()"] * 20_000) + "]",  # 80 000 characters: inside the bound
        "structured": {"tool_calls": [{"name": "f", "arguments": {}}] * 20_000},
        "echoed-keys": echoed * 64,  # inside the bound; each error result names its argument
    }[form]
    env = start(env_id)
    obs, reward, _, _, info = env.step(action)
    assert 0.0 <= float(reward) <= 1.0
    assert_recordable(env, obs, info)
    assert len(info.get("tool_calls", ())) <= MAX_CALLS_PER_REPLY


def test_calls_past_the_bound_are_named_not_dropped() -> None:
    parsed = parse_reply("[" + ",".join(["f()"] * (MAX_CALLS_PER_REPLY + 10)) + "]")
    assert len(parsed.calls) == MAX_CALLS_PER_REPLY and len(parsed.problems) == 1
    assert "10 more calls" in parsed.problems[0].message
    assert parse_reply("x" * (MAX_CALL_TEXT + 1)).too_long


def test_every_tool_grader_declares_too_long() -> None:
    for grader in (tool_ast.GRADER, tool_state.GRADER, tool_http.GRADER):
        assert "too_long" in grader.labels
