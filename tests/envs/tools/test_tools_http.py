"""frostgym/ToolsHTTP-v0: REST tools replayed from committed vcrpy cassettes.

Everything here runs the real parts: the committed cassettes through vcrpy, and, for
the re-recording check, the fixture server on loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env
from vcr.request import Request as VcrRequest

from frostgym.agents import AgentReply, AgentRequest, OracleAgent
from frostgym.cards.store import read_jsonl
from frostgym.core.errors import InvalidActionError, UnknownTaskError
from frostgym.core.grade import Grade
from frostgym.core.hashing import canonical_json
from frostgym.envs.tools.http import MAX_CALLS_PER_TURN, HTTPToolsEnv
from frostgym.evaluate.run_to_card import card_config, run_to_card
from frostgym.graders.adversarial import AdversarialCase, run_suite
from frostgym.graders.tool_http import GRADER, answer_key, numbers_in
from frostgym.run.runner import RunOptions
from frostgym.tools.calls import ToolCall, render_calls
from frostgym.tools.http.apis import APIS, FAKE_API_KEY
from frostgym.tools.http.clients import TOOLS
from frostgym.tools.http.record import check_cassettes
from frostgym.tools.http.replay import REDACTED, cassette_dir, json_body

ROOT = Path(__file__).resolve().parents[3]
ORACLE_KEY = "flight-book-OSLJFK-2024-04-08"  # two rounds, a POST with a JSON body


def call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def start(key: str, **kwargs: Any) -> HTTPToolsEnv:
    env = HTTPToolsEnv(**kwargs)
    env.reset(seed=0, options={"task_id": env.source.task_by_key(key).task_id})
    return env


def play_oracle(env: HTTPToolsEnv) -> tuple[float, dict[str, Any], list[Any]]:
    trace: list[Any] = []
    done, reward, info = False, 0.0, dict[str, Any]()
    while not done:
        obs, reward_, done, _, info = env.step(env.oracle_action())
        reward = float(reward_)
        trace.append([obs, info])
    return reward, info, trace


@contextmanager
def network_disabled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any connection other than a unix socket raises, as does name resolution."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("network disabled in this test")

    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family != socket.AF_UNIX:
            raise OSError(f"network disabled in this test (connect to {address!r})")
        return real_connect(self, address)

    with monkeypatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", refuse)
        patch.setattr(socket, "create_connection", refuse)
        patch.setattr(socket, "getaddrinfo", refuse)
        yield


# -- the world -------------------------------------------------------------------------------------
def test_world_size_and_task_mix() -> None:
    env = HTTPToolsEnv()
    assert len(APIS) >= 5 and len(TOOLS) >= 20
    tasks = env.source.all_tasks()
    assert len(tasks) >= 150
    kinds = {t.metadata["kind"] for t in tasks}
    assert kinds == {"single", "multi", "parallel", "none"}
    assert env.source.size("train") == 0
    assert {t.split for t in tasks} == {"dev", "test", "private"}
    for task in tasks:  # every tool offered has a schema in the system message
        assert set(task.metadata["tools"]) >= {c["name"] for c in task.metadata["gold_calls"]}


@pytest.mark.slow
def test_oracle_scores_one_on_every_task() -> None:
    env = HTTPToolsEnv()
    failures = []
    for task in env.source.all_tasks():
        env.reset(seed=0, options={"task_id": task.task_id})
        reward, info, trace = play_oracle(env)
        dropped = [step_info["drop"] for _, step_info in trace if "drop" in step_info]
        if reward != 1.0 or dropped:
            failures.append((task.metadata["id"], info["grade"]["label"], dropped))
    assert not failures, failures[:5]


# -- replay, never the network --------------------------------------------------------------------------
def test_episode_runs_with_networking_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    env = start(ORACLE_KEY)
    with network_disabled(monkeypatch):
        with pytest.raises(OSError, match="network disabled"):
            socket.create_connection(("127.0.0.1", 9))  # the guard really is on
        reward, info, trace = play_oracle(env)
        assert reward == 1.0 and info["grade"]["label"] is None
        assert trace[1][1]["tool_results"][0]["status"] == 201  # the booking came from the cassette
        env = start("weather-current-oslo")
        _, _, _, _, info = env.step(call("get_current_weather", city="Narnia"))
    assert info["tool_results"][0]["error"] == "replay_miss"


def test_replay_miss_is_an_error_result_and_a_drop(monkeypatch: pytest.MonkeyPatch) -> None:
    env = start("weather-current-oslo")
    with network_disabled(monkeypatch):
        obs, reward, done, _, info = env.step(call("get_current_weather", city="Narnia"))
    assert not done and reward == 0.0
    assert info["tool_results"] == [
        {
            "name": "get_current_weather",
            "status": None,
            "content": info["tool_results"][0]["content"],
            "error": "replay_miss",
        }
    ]
    assert info["drop"]["drop_class"] == "replay_miss"
    assert "replay_miss" in obs[-1]["content"]  # the agent sees an error observation
    _, _, done, _, info = env.step("<answer>It is 0.2 °C in Oslo.</answer>")
    assert done and info["grade"]["label"] == "replay_miss" and info["grade"]["score"] == 0.0
    assert info["grade"]["details"]["replay_misses"] == ["get_current_weather"]
    assert info["drop"]["drop_class"] == "replay_miss"


def test_recorded_error_responses_are_answers_not_misses() -> None:
    env = start("weather-current-oslo")
    _, _, _, _, info = env.step(call("get_current_weather", city="Atlantis"))
    assert info["tool_results"][0]["status"] == 404 and "drop" not in info


def test_json_body_matcher_compares_canonical_json() -> None:
    url = "https://api.calendar.frostgym.test/v1/events"
    a = VcrRequest("POST", url, b'{"title": "x", "date": "2024-03-18"}', {})
    b = VcrRequest("POST", url, b'{"date":"2024-03-18","title":"x"}', {})
    c = VcrRequest("POST", url, b'{"date":"2024-03-19","title":"x"}', {})
    json_body(a, b)
    with pytest.raises(AssertionError):
        json_body(a, c)


# -- cassettes -------------------------------------------------------------------------------------
def test_secrets_are_absent_from_cassettes_and_tasks() -> None:
    files = sorted(cassette_dir().glob("*.yaml"))
    assert {p.stem for p in files} == {a.name for a in APIS}
    for path in [*files, cassette_dir().parent / "tasks.json"]:
        text = path.read_text(encoding="utf-8")
        assert FAKE_API_KEY not in text, path
        assert FAKE_API_KEY[8:] not in text, path  # no fragment either
    joined = "".join(p.read_text(encoding="utf-8") for p in files)
    assert REDACTED in joined  # headers, the app_id query and the usage body were scrubbed
    assert '"app_id":"<FILTERED>"' in (cassette_dir() / "currency.yaml").read_text(encoding="utf-8")


def test_cassettes_rerecord_byte_identically() -> None:
    started = time.perf_counter()
    assert check_cassettes() == []
    assert time.perf_counter() - started < 30


# -- determinism -----------------------------------------------------------------------------------
_PROBE = """
import sys
from tests.envs.tools.test_tools_http import probe
sys.stdout.write(probe())
"""


def probe() -> str:
    """Seeds 0-29: the observation, a junk step and the oracle played to the end."""
    env = HTTPToolsEnv()
    out: list[Any] = []
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        junk = env.step(call("get_current_weather", city="Oslo") + call("no_such_tool"))
        env.reset(seed=seed)
        out.append([obs, info, junk[1:], play_oracle(env)])
    return canonical_json(out)


@pytest.mark.slow
def test_same_seed_same_episode_byte_for_byte_in_a_fresh_process() -> None:
    here = probe()
    assert probe() == here
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    there = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert there == here


# -- adversarial suite -----------------------------------------------------------------------------------
def grade_case(case: AdversarialCase) -> Grade:
    env = start(case.context["task"])
    for turn in case.context["turns"]:
        _, _, done, _, info = env.step(turn)
        assert not done, f"{case.id}: the episode ended before its final reply"
    _, _, done, _, info = env.step(case.reply)
    assert done
    return Grade.from_dict(info["grade"])


def test_adversarial_suite(record_property: Callable[[str, object], None]) -> None:
    report = run_suite("tools_http", grade_case, GRADER)
    record_property("adversarial_report", report.render())
    assert report.passed, report.render()
    assert report.label_coverage == 1.0, report.render()


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize("action", [None, 3, ["x"], object()])
def test_non_text_actions_raise_and_keep_the_episode(action: Any) -> None:
    env = start("weather-current-oslo")
    with pytest.raises(InvalidActionError):
        env.step(action)
    assert play_oracle(env)[0] == 1.0


def test_structured_action_with_unreadable_calls_is_reported() -> None:
    env = start("weather-current-oslo")
    obs, _, done, _, _ = env.step({"tool_calls": [5, {"name": ""}]})
    assert not done and obs[-1]["content"].count("malformed_call") == 2
    reward, info, _ = play_oracle(env)
    assert info["grade"]["label"] == "malformed_call" and info["grade"]["components"]["tool_format"] == 0.0
    assert 0.0 < reward < 1.0  # right and grounded, but the broken calls cost the format share


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "<tool_call></tool_call>",
        "<tool_call>[1, 2]</tool_call>",
        '<tool_call>{"name": "get_current_weather", "arguments": "{not json"}</tool_call>',
        '<tool_call>{"name": "get_current_weather", "arguments": {"city": {"$gt": ""}}}</tool_call>',
        '<tool_call>{"name": "get_current_weather", "arguments": {"city": "\\ud800 Oslo"}}</tool_call>',
        '<tool_call>{"name": "get_current_weather", "arguments": {"city": "' + "x" * 5000 + '"}}</tool_call>',
        '<tool_call>{"name": "get_flight_details", "arguments": {"flight_id": "../../etc/passwd"}}</tool_call>',
        '<tool_call>{"name": "get_current_weather", "arguments": {"city": NaN}}</tool_call>',
        "[get_current_weather(city=open('x'))]",
        "```python\nget_current_weather(city='Oslo'\n```",
        "<answer>" + "9" * 5000 + "</answer>",
    ],
)
def test_bad_replies_never_crash(reply: str) -> None:
    env = start("weather-current-oslo")
    _, reward, done, _, info = env.step(reply)
    json.dumps(info)
    assert reward == 0.0
    if not done:
        _, reward, done, _, info = env.step("<answer>0.2</answer>")
    assert done and info["grade"]["score"] == 0.0


def test_many_parallel_calls_are_all_answered() -> None:
    env = start("weather-current-oslo")
    many = "".join(call("get_current_weather", city="Oslo") for _ in range(MAX_CALLS_PER_TURN + 8))
    started = time.perf_counter()
    obs, _, _, _, info = env.step(many)
    assert time.perf_counter() - started < 10
    assert len(info["tool_results"]) == MAX_CALLS_PER_TURN + 8  # none silently dropped
    assert [r.get("error") for r in info["tool_results"]].count("too_many") == 8
    assert obs[-1]["content"].count("<tool_response>") == MAX_CALLS_PER_TURN + 8


def test_huge_reply_is_handled_fast() -> None:
    env = start("weather-current-oslo")
    started = time.perf_counter()
    _, reward, done, _, _ = env.step("<answer>" + "1 " * 2_000_000 + "</answer>")
    assert time.perf_counter() - started < 5 and done and reward == 0.0


def test_calls_on_the_last_turn_leave_no_answer() -> None:
    env = start("weather-current-oslo", max_turns=1)
    _, reward, done, _, info = env.step(call("get_current_weather", city="Oslo"))
    assert done and reward == 0.0 and info["grade"]["label"] == "no_answer"


def test_structured_and_python_calls_are_accepted() -> None:
    env = start("weather-current-oslo")
    _, _, _, _, info = env.step(
        {"content": "", "tool_calls": [{"function": {"name": "get_current_weather", "arguments": '{"city": "Oslo"}'}}]}
    )
    assert info["tool_results"][0]["status"] == 200
    env = start("weather-current-oslo")
    env.step('[get_current_weather(city="Oslo")]')
    _, reward, _, _, _ = env.step("It is 0.2 °C.")
    assert reward == 1.0


def test_numbers_skip_dates_times_and_ids() -> None:
    assert numbers_in("On 2024-03-16 at 10:30, OSLLHR-0402-2 costs $1,234.50 and it is -3.9 °C.") == [1234.5, -3.9]


def test_answer_key_votes_phrasings_of_one_answer_together() -> None:
    price = [{"type": "number", "value": 412.5, "tol": 0.01, "forbid": [380.0]}]
    same = ["It costs $412.50.", "<answer>412.5</answer>", "Total: 412.50 USD", "412.499"]
    assert len({answer_key(a, price) for a in same}) == 1
    assert answer_key("It costs $380.", price) != answer_key("It costs $412.50.", price)
    assert answer_key("", price) is None  # no answer, no vote
    assert answer_key("9" * 400, price) is not None  # an overflowing number still gets a key
    city = [{"type": "text", "any_of": ["Oslo"], "forbid": ["Paris", "London"]}]
    assert answer_key("Oslo is warmer.", city) == answer_key("the warmest is OSLO", city)
    assert answer_key("Paris", city) != answer_key("Oslo", city) != answer_key("Oslo or Paris", city)
    assert answer_key("no idea", city) == answer_key("No  idea", city) != answer_key("unsure", city)


# -- env contract ----------------------------------------------------------------------------------
def test_gymnasium_env_checker_passes() -> None:
    check_env(HTTPToolsEnv(), skip_render_check=True)


def test_train_split_is_refused_clearly() -> None:
    with pytest.raises(UnknownTaskError, match="split"):
        HTTPToolsEnv().reset(seed=0, options={"split": "train"})


def test_tools_attribute_matches_the_system_message() -> None:
    env = HTTPToolsEnv()
    obs, _ = env.reset(seed=0, options={"task_id": env.source.task_by_key("weather-current-oslo").task_id})
    names = [t["function"]["name"] for t in env.tools]
    assert names == list(env.task.metadata["tools"])
    assert obs[0]["role"] == "system" and all(f'"name": "{n}"' in obs[0]["content"] for n in names)
    assert obs[1] == {"role": "user", "content": env.task.prompt}


class _StrayCaller:
    """The oracle, except that where the weather tool is offered its first reply asks for
    a city the frozen world never recorded: that episode runs to its end with an error
    observation, and the card must list it as a ``replay_miss`` drop."""

    name = "stray-caller"

    def __init__(self) -> None:
        self.strayed: set[str] = set()

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        replies = OracleAgent().act(requests)
        stray = render_calls([ToolCall("get_current_weather", {"city": "Narnia"})])
        out = []
        for request, reply in zip(requests, replies, strict=True):
            offered = {tool["function"]["name"] for tool in request.tools or []}
            if request.turn == 0 and "get_current_weather" in offered:
                self.strayed.add(request.episode_id)
                reply = AgentReply(action=stray)
            out.append(reply)
        return out

    def describe(self) -> dict[str, Any]:
        return {"spec": "stray-caller"}


def test_replay_misses_are_listed_in_the_cards_drops_manifest(tmp_path: Path) -> None:
    options = RunOptions(batch_size=8)
    config = card_config(
        env_ids=["frostgym/ToolsHTTP-v0"],
        agent_spec="test",
        sampling={},
        episodes=24,
        samples=1,
        seed=0,
        options=options,
    )
    agent = _StrayCaller()
    card = run_to_card(tmp_path / "card", agent, config, options)
    accounting = card["accounting"]
    assert accounting["planned"] == 24 == sum(accounting[k] for k in ("succeeded", "failed", "errored", "skipped"))
    drops = read_jsonl(tmp_path / "card" / "drops.jsonl").records
    assert agent.strayed and {d["episode_id"] for d in drops} == agent.strayed
    assert {d["drop_class"] for d in drops} == {"replay_miss"} and accounting["errored"] == len(drops)
    assert all(d["steps"] and d["counted_as"] == "failure" for d in drops)  # the trajectory is kept
    assert accounting["succeeded"] == 24 - len(drops)  # everyone else: the oracle
