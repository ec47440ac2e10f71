"""``OpenAIAgent`` against hostile chat-completions servers on loopback.

Two findings of the outside fault campaign:

- one malformed reply (tool calls that are strings, a null message, arguments nested
  100 000 deep, non-JSON bodies...) raised out of ``act()`` and dropped its whole batch;
  now it errors only its own episode, with a one-line error naming what was wrong;
- a server that drips bytes held a request forever (httpx's timeout is per read), and a
  huge body was read whole into memory; now every request has a whole-request deadline
  and the body a size cap.

Every test is bounded in time on its own: the agent runs in a daemon thread that is
given a generous limit, and the server's slow writers stop when the server shuts down.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from typer.testing import CliRunner

from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.agents.openai_compat import DEFAULT_MAX_RESPONSE_BYTES, OpenAIAgent
from frostgym.cli import app
from frostgym.run.runner import evaluate
from tests.chat_server import Answer, ChatServer

DEEP = 100_000
DRIP_S = 0.3  # the slow servers send one byte this often, forever


def _requests(*contents: str) -> list[AgentRequest]:
    return [AgentRequest([{"role": "user", "content": c}], f"e{i}", 0, seed=i) for i, c in enumerate(contents)]


def _within(seconds: float, call: Callable[[], list[AgentReply]]) -> tuple[list[AgentReply], float]:
    """Run ``call`` in a daemon thread: the test fails (instead of hanging) when it takes
    longer than ``seconds``; returns its result and the wall time it took."""
    out: list[list[AgentReply]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as error:  # re-raised in the test's thread
            errors.append(error)

    began = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    elapsed = time.monotonic() - began
    assert not thread.is_alive(), f"act() still running after {seconds} s"
    if errors:
        raise errors[0]
    return out[0], elapsed


# -- item 3: one malformed reply errors only its own episode -----------------------------


def _completion(message: Any, **choice: Any) -> dict[str, Any]:
    return {
        "choices": [{"message": message, "finish_reason": "stop", **choice}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7},
    }


def _text(content: Any = "fine", **choice: Any) -> dict[str, Any]:
    return _completion({"role": "assistant", "content": content}, **choice)


def _calls(*calls: Any) -> dict[str, Any]:
    return _completion({"role": "assistant", "content": None, "tool_calls": list(calls)})


def _function(arguments: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": arguments}}


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


_DEEP_BODY = (
    b'{"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"function": '
    b'{"name": "f", "arguments": ' + b"[" * DEEP + b"]" * DEEP + b"}}]}}]}"
)
_GOOD_TEXT = json.dumps(_text())[:-1].encode()  # the text of a good completion, without its closing brace


@dataclass(frozen=True)
class Expect:
    error: str | None = None  # a substring of the reply's error; None for a valid reply
    action: Any = "fine"
    tokens: int | None = 5  # the reply's prompt_tokens (None: the server's usage was ignored)
    finish: str | None = "stop"
    logprobs: Any = "absent"


FAULTS: dict[str, tuple[Any, Expect]] = {
    # the reply is malformed: an errored reply for this episode
    "tool_calls_strings": (_calls("run_sql", "SELECT 1"), Expect("tool_calls[0] is a string, expected an object")),
    "tool_calls_object": (
        _completion({"content": None, "tool_calls": {"name": "f"}}),
        Expect("tool_calls is an object, expected an array"),
    ),
    "function_null": (_calls({"function": None}), Expect("tool_calls[0].function is null")),
    "message_null": (_completion(None), Expect("choices[0].message is null")),
    "message_missing": ({"choices": [{"finish_reason": "stop"}]}, Expect("choices[0].message is missing")),
    "choices_empty": ({"choices": []}, Expect("choices is empty")),
    "choices_missing": ({"id": "x", "object": "chat.completion"}, Expect("choices is missing")),
    "choices_string": ({"choices": "abc"}, Expect("choices is a string, expected an array")),
    "body_list": ([1, 2, 3], Expect("the body is an array, expected an object")),
    "content_number": (_text(42), Expect("content is a number, expected a string")),
    "deep_arguments": (
        _calls(_function("[" * DEEP + "]" * DEEP)),
        Expect("tool_calls[0].function.arguments nests deeper than 64"),
    ),
    "deep_arguments_object": (_calls(_function(_nested(300))), Expect("the body nests deeper than 64")),
    "deep_body": (_DEEP_BODY, Expect("the body nests deeper than 64")),
    "html_200": ("<html><body>\n<h1>502 Bad Gateway</h1>\n</body></html>", Expect("not JSON")),
    "truncated": (_GOOD_TEXT[:40], Expect("not JSON")),
    "not_utf8": (b"\xff\xfe\x00\x01garbage", Expect("not JSON")),
    "empty_body": (b"", Expect("not JSON")),
    "int_digits": (_GOOD_TEXT + b', "id": ' + b"9" * 5000 + b"}", Expect("not JSON")),
    "int_overflow": ({**_text(), "id": 10**30}, Expect("the body holds an integer outside the 64-bit range")),
    # the action is fine; metadata of the wrong type is ignored, never counted
    "ok": (_text(), Expect()),
    "usage_text": ({**_text(), "usage": {"prompt_tokens": "many", "completion_tokens": "lots"}}, Expect(tokens=None)),
    "usage_string": ({**_text(), "usage": "12"}, Expect(tokens=None)),
    "usage_nan": (
        b'{"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}],'
        b' "usage": {"prompt_tokens": NaN, "completion_tokens": Infinity}}',
        Expect(tokens=None),
    ),
    "usage_odd": ({**_text(), "usage": {"prompt_tokens": -3, "completion_tokens": True}}, Expect(tokens=None)),
    "finish_reason_object": (_text(finish_reason={"x": 1}), Expect(finish=None)),
    "logprobs_string": (_text(logprobs="x"), Expect()),
    "logprobs_odd": (
        _text(logprobs={"content": [1, {"logprob": "x"}, {"logprob": -0.5}]}),
        Expect(logprobs=[None, None, -0.5]),
    ),
    "lone_surrogate": (
        b'{"choices": [{"message": {"content": "a\\ud800b"}}]}',
        Expect(action="a\ufffdb", tokens=None, finish=None),
    ),
    "arguments_not_json": (  # a model's broken call: the env reports it, as for any model
        _calls(_function("{oops")),
        Expect(action={"content": "", "tool_calls": [{"name": "run_sql", "arguments": "{oops"}]}),
    ),
    "call_unwrapped": (
        _calls({"name": "f", "arguments": {"a": 1}}),
        Expect(action={"content": "", "tool_calls": [{"name": "f", "arguments": {"a": 1}}]}),
    ),
    "content_parts": (_text([{"type": "text", "text": "fi"}, {"type": "text", "text": "ne"}]), Expect()),
}


def _fault(body: dict[str, Any]) -> Answer:
    payload, _ = FAULTS[body["messages"][-1]["content"]]
    return 200, payload, {"Content-Type": "application/json"}


@pytest.mark.slow
@pytest.mark.slow
def test_each_malformed_reply_errors_only_its_own_episode() -> None:
    names = list(FAULTS)
    with ChatServer(respond=_fault) as server:
        agent = OpenAIAgent(server.base_url, "faults", concurrency=8, backoff_s=0.01)
        replies, _ = _within(60, lambda: agent.act(_requests(*names)))
    assert len(replies) == len(names)
    for name, reply in zip(names, replies, strict=True):
        expect = FAULTS[name][1]
        if expect.error is not None:
            assert reply.drop is not None, name
            error = reply.drop.error
            assert expect.error in error and "malformed reply" in error, (name, error)
            assert "\n" not in error and len(error) <= 500, (name, error)
            assert (reply.drop.drop_class, reply.drop.stage) == ("agent_error", "agent")
            continue
        assert reply.drop is None, (name, reply.drop)
        assert reply.action == expect.action, name
        assert reply.prompt_tokens == expect.tokens and reply.finish_reason == expect.finish, name
        assert reply.extra.get("logprobs", "absent") == expect.logprobs, name
    valid_usage = sum(1 for _, e in FAULTS.values() if e.error is None and e.tokens is not None)
    assert agent.usage["prompt_tokens"] == 5 * valid_usage and agent.usage["completion_tokens"] == 7 * valid_usage
    assert agent.usage["retries"] == 0  # a malformed reply is final: retrying repeats it
    assert agent.usage["failures"] == sum(1 for _, e in FAULTS.values() if e.error is not None)


def test_the_campaigns_batch_keeps_its_six_valid_replies() -> None:
    contents = ["ok"] * 3 + ["tool_calls_strings"] + ["ok"] * 3 + ["deep_arguments"]
    with ChatServer(respond=_fault) as server:
        replies, _ = _within(60, lambda: OpenAIAgent(server.base_url, "faults").act(_requests(*contents)))
    assert [r.drop is None for r in replies] == [c == "ok" for c in contents]


def test_a_run_with_malformed_replies_drops_only_their_episodes() -> None:
    def respond(body: dict[str, Any]) -> Answer:
        payload = FAULTS["message_null" if body["seed"] % 2 else "ok"][0]
        return 200, payload, {}

    with ChatServer(respond=respond) as server:
        agent = OpenAIAgent(server.base_url, "faults", backoff_s=0.01)
        result = evaluate(["frostgym/Arithmetic-v0"], agent, episodes=8)
    assert len(result.episodes) + len(result.drops) == 8
    assert result.episodes and result.drops
    assert all(
        d.drop.drop_class == "agent_error" and "choices[0].message is null" in d.drop.error for d in result.drops
    )


# -- item 8: a whole-request deadline and a body size cap -------------------------------


def _drip_body(wfile: BinaryIO, stop: threading.Event) -> None:
    wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
    while not stop.wait(DRIP_S):
        wfile.write(b" ")


def _drip_head(wfile: BinaryIO, stop: threading.Event) -> None:
    for byte in itertools.chain(b"HTTP/1.0 200 OK\r\nX-Pad: ", itertools.repeat(ord("a"))):
        if stop.wait(DRIP_S):
            return
        wfile.write(bytes([byte]))


def _drip(body: dict[str, Any]) -> Answer | None:
    writers = {"drip-body": _drip_body, "drip-head": _drip_head}
    return (200, writers[body["model"]], {}) if body["model"] in writers else None


@pytest.mark.slow
@pytest.mark.slow
def test_a_dripping_server_is_cut_off_at_the_request_deadline() -> None:
    with ChatServer(respond=_drip) as server:
        for model in ("drip-body", "drip-head"):
            agent = OpenAIAgent(server.base_url, model, timeout_s=1.0, max_retries=1, backoff_s=0.01)
            replies, elapsed = _within(30, lambda agent=agent: agent.act(_requests("q0", "q1")))
            assert elapsed < 15, (model, elapsed)  # 1 attempt of 1 s, plus slack for a loaded machine
            for reply in replies:
                assert reply.drop is not None and "deadline of 1 s" in reply.drop.error, (model, reply.drop)
            # the server may still be at work on a request that timed out: never sent again
            assert agent.usage["retries"] == 0 and agent.usage["failures"] == 2
            assert all(not reply.retryable for reply in replies)
        normal = OpenAIAgent(server.base_url, "echo", timeout_s=5.0, max_retries=1)
        replies, _ = _within(30, lambda: normal.act(_requests("q0", "q1")))
    assert [r.action for r in replies] == ["you said: q0", "you said: q1"]


def _endless(declare_length: bool) -> Callable[[BinaryIO, threading.Event], None]:
    """A body that starts like a completion and goes on for 64 MiB (1 GiB when declared)."""

    def write(wfile: BinaryIO, stop: threading.Event) -> None:
        length = b"Content-Length: 1073741824\r\n" if declare_length else b""
        wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n" + length + b"\r\n")
        wfile.write(b'{"choices": [{"message": {"content": "')
        chunk = b"a" * 65536
        for _ in range(1024):  # 64 MiB: bounded, so code without the cap ends too
            if stop.is_set():
                return
            wfile.write(chunk)

    return write


def _huge(body: dict[str, Any]) -> Answer:
    return 200, _endless(declare_length=body["model"] == "declared"), {}


def test_a_huge_body_is_an_error_and_is_never_held_in_memory() -> None:
    cap = 2 * 2**20
    with ChatServer(respond=_huge) as server:
        for model in ("declared", "undeclared"):
            agent = OpenAIAgent(server.base_url, model, max_response_bytes=cap, max_retries=1, backoff_s=0.01)
            tracemalloc.start()
            try:
                replies, _ = _within(60, lambda agent=agent: agent.act(_requests("q0")))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            drop = replies[0].drop
            assert drop is not None and f"over the {cap} byte limit" in drop.error, (model, drop)
            assert peak < 4 * cap, (model, peak)
            assert agent.usage["retries"] == 0  # final: the same answer would come again
        default = OpenAIAgent(server.base_url, "undeclared", max_retries=0)
        replies, _ = _within(60, lambda: default.act(_requests("q0")))
    assert DEFAULT_MAX_RESPONSE_BYTES == 16 * 2**20
    drop = replies[0].drop
    assert drop is not None and f"over the {DEFAULT_MAX_RESPONSE_BYTES} byte limit" in drop.error


def test_cli_request_timeout_reaches_the_openai_agent(tmp_path: Path) -> None:
    runner = CliRunner()
    with ChatServer() as server:
        args = ["eval", "--env", "frostgym/Arithmetic-v0", "--episodes", "2", "--request-timeout", "7.5"]
        result = runner.invoke(app, [*args, "--agent", f"openai:{server.base_url}#echo", "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    card = json.loads((tmp_path / "a" / "card.json").read_text())
    assert card["agent"]["request_timeout_s"] == 7.5
    refused = runner.invoke(app, [*args, "--agent", "oracle", "--out", str(tmp_path / "b")])
    assert refused.exit_code == 2 and "openai" in refused.output


def test_an_http_proxy_from_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent has its own transport (for the deadline), so proxies are read here, as httpx would."""
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with ChatServer() as proxy:
        monkeypatch.setenv("http_proxy", proxy.base_url.rsplit("/v1", 1)[0])
        agent = OpenAIAgent("http://upstream.invalid/v1", "echo", max_retries=0, timeout_s=10)
        replies, _ = _within(30, lambda: agent.act(_requests("q0")))
    assert replies[0].drop is None and replies[0].action == "you said: q0"
