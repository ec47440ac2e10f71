"""``frostgym serve`` on loopback, driven by openenv-core's own client (WebSocket, sync and
async) and by plain HTTP: every id gives the in-process env's observations, rewards, infos and
grades byte for byte; bad input gets a 4xx and leaves the server healthy; the limits (session
cap, idle expiry, token, step deadline, body size, hidden gold) hold; shutdown answers what is
running."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'frostgym[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed (pip install 'frostgym[serve]')")
pytest.importorskip("websockets", reason="the serve extra is not installed (pip install 'frostgym[serve]')")
generic_client = pytest.importorskip(
    "openenv.core.generic_client", reason="openenv-core's client is not installed (make install adds it, --no-deps)"
)
import httpx  # noqa: E402
from typer.testing import CliRunner  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from frostgym.cli import app  # noqa: E402
from frostgym.core.env import FrozenEnv  # noqa: E402
from frostgym.core.errors import (  # noqa: E402
    GraderError,
    ServeConfigError,
    ServedEnvError,
)
from frostgym.envs.registry import ENTRIES, make_env  # noqa: E402
from frostgym.serve.config import ServeConfig  # noqa: E402
from frostgym.serve.remote import make  # noqa: E402
from frostgym.serve.server import ServerThread  # noqa: E402
from tests.faulty_env import FAULTY_ID, kind_of  # noqa: E402

pytestmark = pytest.mark.slow

GenericEnvClient = generic_client.GenericEnvClient
ENV_IDS = tuple(e.id for e in ENTRIES)
ARITHMETIC = "frostgym/Arithmetic-v0"

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    """Every id, oracle and gold served (so infos equal the in-process ones in full)."""
    with ServerThread(ServeConfig(port=0, allow_oracle=True, env_ids=(*ENV_IDS, FAULTY_ID))) as running:
        yield running


def _canonical(value: Any) -> str:
    """``value`` as sorted JSON text: equal texts mean equal values of equal JSON types (1 is
    not 1.0, nor True)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _same(local: Any, remote: Any) -> None:
    assert remote == local
    assert _canonical(remote) == _canonical(local)


# -- parity with the in-process env, every id -------------------------------------------------
def _local_episode(env_id: str, seed: int, policy: str) -> tuple[Any, list[Any], list[Any]]:
    """Reset with ``seed`` and play ``policy`` (the oracle to the end, or one junk reply):
    the reset's ``(observation, info)``, the actions, and each step's result."""
    env = make_env(env_id, None, {})
    try:
        first = env.reset(seed=seed)
        actions: list[Any] = []
        results: list[Any] = []
        for _ in range(50):
            action = env.oracle_action() if policy == "oracle" else "junk"
            actions.append(action)
            results.append(env.step(action))
            if policy != "oracle" or results[-1][2] or results[-1][3]:
                break
        return first, actions, results
    finally:
        env.close()


def _check_step(local: tuple[Any, ...], observation: dict[str, Any], reward: Any, done: bool) -> None:
    messages, local_reward, terminated, truncated, info = local
    _same(messages, observation["messages"])
    _same(info, observation["info"])
    _same(float(local_reward), reward)
    assert (observation["terminated"], observation["truncated"], done) == (terminated, truncated, terminated)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("policy", ["oracle", "junk"])
def test_every_id_over_http_and_websocket_equals_in_process(server: ServerThread, env_id: str, policy: str) -> None:
    seed = 7 if policy == "oracle" else 11
    (messages, info), actions, results = _local_episode(env_id, seed, policy)
    if policy == "oracle":
        assert results[-1][4]["grade"]["score"] == 1.0, "the oracle solves every task"
    tools = getattr(make_env(env_id, None, {}), "tools", None)

    # plain HTTP, in a session of its own
    session = f"parity-{env_id}-{policy}"
    with httpx.Client(base_url=server.url, timeout=60) as http:
        answer = http.post("/reset", json={"seed": seed, "env_id": env_id, "session_id": session}).json()
        _same(messages, answer["observation"]["messages"])
        _same(info, answer["observation"]["info"])
        assert answer["reward"] is None and answer["done"] is False
        if tools is not None and env_id != "frostgym/Tools-v0":  # BFCL's tools are per task
            assert answer["observation"]["tools"] is not None
        for action, local in zip(actions, results, strict=True):
            answer = http.post("/step", json={"action": {"content": action}, "session_id": session}).json()
            _check_step(local, answer["observation"], answer["reward"], answer["done"])
        http.post("/close", json={"session_id": session})

    # openenv-core's WebSocket client, unchanged
    with GenericEnvClient(base_url=server.url).sync() as client:
        first = client.reset(seed=seed, env_id=env_id)
        _same(messages, first.observation["messages"])
        _same(info, first.observation["info"])
        for action, local in zip(actions, results, strict=True):
            result = client.step({"content": action})
            _check_step(local, result.observation, result.reward, result.done)
        state = client.state()
        assert state["env_id"] == env_id and state["episode_id"] == info["episode_id"]


def test_async_client_and_structured_tool_calls(server: ServerThread) -> None:
    """openenv-core's async client; a tool env stepped with a ``tool_calls`` dict gives what the
    same dict gives in process."""
    env_id = "frostgym/ToolsHTTP-v0"
    local = make_env(env_id, None, {})
    local.reset(seed=3)
    text = local.oracle_action()
    assert isinstance(text, str)
    call = json.loads(text.split("<tool_call>")[1].split("</tool_call>")[0])
    action = {"content": "", "tool_calls": [{"type": "function", "function": call}]}
    expected = local.step(action)

    async def play() -> Any:
        async with GenericEnvClient(base_url=server.url) as client:
            await client.reset(seed=3, env_id=env_id)
            return await client.step(action)

    result = asyncio.run(play())
    _check_step(expected, result.observation, result.reward, result.done)
    assert expected[4]["tool_calls"], "the structured call was read as a call"


def test_reset_arguments_and_options_reach_the_env(server: ServerThread) -> None:
    env = make_env(ARITHMETIC, "test", {"level": 1, "max_turns": 2})
    task_id = env.reset(seed=1)[1]["task_id"]
    messages, info = env.reset(seed=5, options={"task_id": task_id})
    with GenericEnvClient(base_url=server.url).sync() as client:
        result = client.reset(
            seed=5, env_id=ARITHMETIC, env_kwargs={"split": "test", "level": 1, "max_turns": 2}, task_id=task_id
        )
        _same(messages, result.observation["messages"])
        _same(info, result.observation["info"])
        assert info["max_turns"] == 2 and info["task_id"] == task_id
        again = client.reset(seed=5, options={"task_id": task_id})  # the session's env, as made
        _same(info, again.observation["info"])


def test_schema_and_health(server: ServerThread) -> None:
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "healthy" and set(ENV_IDS) <= set(health["envs"]) and health["allow_oracle"]
    schema = httpx.get(f"{server.url}/schema", timeout=60).json()
    assert {"action", "observation", "state", "reset", "envs"} <= set(schema)
    assert schema["envs"]["frostgym/SQL-v0"]["tools"], "a tool env's tools are listed"
    assert schema["envs"][ARITHMETIC]["tools"] is None
    assert "level" in schema["envs"][ARITHMETIC]["env_kwargs"]
    assert "allow_insecure" not in schema["envs"]["frostgym/Code-v0"]["env_kwargs"]


# -- bad input ----------------------------------------------------------------------------------
BAD_HTTP: list[tuple[str, str, dict[str, Any], int]] = [
    ("POST", "/reset", {"content": b"{not json"}, 400),
    ("POST", "/reset", {"content": b"\xff\xfe\x00"}, 400),
    ("POST", "/reset", {"content": b"[" * 100_000}, 400),
    ("POST", "/reset", {"content": b'{"seed": 1' + b"0" * 5000 + b"}"}, 400),
    ("POST", "/reset", {"json": []}, 422),
    ("POST", "/reset", {"json": {"seed": "1"}}, 422),
    ("POST", "/reset", {"json": {"seed": -1}}, 422),
    ("POST", "/reset", {"json": {"seed": True}}, 422),
    ("POST", "/reset", {"json": {"seed": 1.5}}, 422),
    ("POST", "/reset", {"json": {"bogus": 1}}, 422),
    ("POST", "/reset", {"json": {"seed": 1}}, 422),  # several envs served: env_id is required
    ("POST", "/reset", {"json": {"env_id": 5}}, 422),
    ("POST", "/reset", {"json": {"env_id": "frostgym/Nope-v0"}}, 404),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "task_id": "arithmetic/dev/nope"}}, 404),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "split": "nope"}}, 422),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "task_id": "a", "options": {"task_id": "b"}}}, 422),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "options": {"bogus": 1}}}, 422),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "env_kwargs": []}}, 422),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "env_kwargs": {"max_turns": 0}}}, 422),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "env_kwargs": {"bogus": 1}}}, 422),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "env_kwargs": {"level": 99}}}, 422),
    ("POST", "/reset", {"json": {"env_id": "frostgym/Code-v0", "env_kwargs": {"allow_insecure": True}}}, 403),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "session_id": ""}}, 422),
    ("POST", "/reset", {"json": {"env_id": ARITHMETIC, "session_id": "x" * 129}}, 422),
    ("POST", "/step", {"json": {"action": {"content": "x"}, "session_id": "never-reset"}}, 404),
    ("POST", "/step", {"json": {"session_id": "never-reset"}}, 422),
    ("POST", "/step", {"json": {"action": "x", "timeout_s": "soon"}}, 422),
    ("POST", "/step", {"json": {"action": "x", "timeout_s": 0}}, 422),
    ("POST", "/step", {"json": "x"}, 422),
    ("POST", "/step", {}, 400),
    ("GET", "/state", {"params": {"session_id": "never-reset"}}, 404),
    ("POST", "/close", {"json": {"session_id": "never-reset"}}, 404),
    ("POST", "/close", {"json": {"session_id": "x", "other": 1}}, 422),
    ("POST", "/make", {"json": {"env_id": ARITHMETIC, "env_kwargs": {"max_turns": "two"}}}, 422),
    ("GET", "/nope", {}, 404),
    ("DELETE", "/reset", {}, 405),
]


def _assert_error(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    message = body.get("message") or body.get("detail")
    assert isinstance(message, str) and message


def test_bad_http_input_gets_a_4xx_and_the_server_stays_healthy(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for method, path, kwargs, status in BAD_HTTP:
            _assert_error(http.request(method, path, **kwargs), status)
        # an episode's own misuse: an action of a type no env takes, a step after the end
        session = {"session_id": "bad-steps"}
        assert http.post("/reset", json={"env_id": ARITHMETIC, "seed": 1, **session}).status_code == 200
        refused = http.post("/step", json={"action": 5, **session})
        _assert_error(refused, 422)
        assert refused.json()["exception"] == "InvalidActionError"
        assert http.post("/step", json={"action": {"content": "7"}, **session}).status_code == 200
        _assert_error(http.post("/step", json={"action": "again", **session}), 409)
        assert http.get("/health").json()["status"] == "healthy"
        assert http.post("/close", json=session).json() == {"closed": True}
        # a refused make or reset holds no session it opened
        for path in ("/make", "/reset"):
            refused_session = {"session_id": f"refused{path.replace('/', '-')}"}
            bad = {"env_id": ARITHMETIC, "env_kwargs": {"max_turns": "two"}, **refused_session}
            _assert_error(http.post(path, json=bad), 422)
            _assert_error(http.get("/state", params=refused_session), 404)


def test_bodies_past_the_limit_get_413_quickly(server: ServerThread) -> None:
    began = time.perf_counter()
    big = httpx.post(f"{server.url}/reset", content=b"x" * (50 * 1024 * 1024), timeout=60)
    assert big.status_code == 413 and "limit" in big.json()["message"]
    assert time.perf_counter() - began < 10

    def chunks() -> Iterator[bytes]:  # no length declared: refused as it streams in
        for _ in range(8):
            yield b"y" * (1024 * 1024)

    streamed = httpx.post(f"{server.url}/step", content=chunks(), timeout=60)
    assert streamed.status_code == 413
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_bad_websocket_messages_get_errors_and_keep_the_session(server: ServerThread) -> None:
    url = server.url.replace("http://", "ws://") + "/ws"
    with connect(url, max_size=None) as ws:

        def ask(payload: str | bytes) -> dict[str, Any]:
            ws.send(payload)
            answer: dict[str, Any] = json.loads(ws.recv(timeout=60))
            return answer

        for payload, status in [
            ("{nope", 400),
            (b"\xff\xfe", 400),
            ("[1, 2]", 422),
            ('{"type": "dance"}', 422),
            ('{"type": "step", "data": {"content": "x"}}', 409),  # no env yet
            ('{"type": "reset", "data": {"env_id": "frostgym/Nope-v0"}}', 404),
            ('{"type": "reset", "data": {"seed": "x", "env_id": "frostgym/Arithmetic-v0"}}', 422),
            ('{"type": "reset", "data": {"env_id": "frostgym/Arithmetic-v0", "session_id": "x"}}', 422),
            ('{"type": "step"}', 422),
        ]:
            answer = ask(payload)
            assert answer["type"] == "error" and answer["data"]["status"] == status, (payload, answer)
        assert (
            ask('{"type": "reset", "data": {"env_id": "frostgym/Arithmetic-v0", "seed": 2}}')["type"] == "observation"
        )
        assert ask('{"type": "step", "data": 3.5}')["data"]["status"] == 422
        assert ask('{"type": "step", "data": {"content": "1"}}')["data"]["done"] is True
        ws.send("x" * (5 * 1024 * 1024))  # past max_body_bytes: the connection closes (1009)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=60)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert httpx.get(f"{server.url}/health").json()["status"] == "healthy"


def test_env_failures_come_back_as_the_same_exception(server: ServerThread) -> None:
    """A grader bug is a 500 naming ``GraderError`` and its drop class; the remote env raises
    ``GraderError`` with the in-process message."""
    env = make_env(FAULTY_ID, None, {})
    task_id = next(t for t in (env.reset(seed=s)[1]["task_id"] for s in range(200)) if kind_of(t) == "grader_error")
    env.reset(seed=1, options={"task_id": task_id})
    with pytest.raises(GraderError) as local:
        env.step("1")
    with httpx.Client(base_url=server.url, timeout=60) as http:
        http.post("/reset", json={"env_id": FAULTY_ID, "task_id": task_id, "session_id": "faulty"})
        answer = http.post("/step", json={"action": "1", "session_id": "faulty"})
        assert answer.status_code == 500
        assert answer.json()["exception"] == "GraderError" and answer.json()["drop_class"] == "grader_error"
    remote = make(server.url, FAULTY_ID)
    try:
        remote.reset(seed=1, options={"task_id": task_id})
        with pytest.raises(GraderError) as raised:
            remote.step("1")
        assert str(raised.value) == str(local.value) and raised.value.drop_class == "grader_error"
    finally:
        remote.close()


# -- limits and security ------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def guarded() -> Iterator[ServerThread]:
    """Two sessions at most, a token, short idle expiry, gold withheld."""
    config = ServeConfig(port=0, env_ids=(ARITHMETIC,), max_sessions=2, token="t0ken", idle_timeout_s=0.6)
    with ServerThread(config) as running:
        yield running


AUTH = {"Authorization": "Bearer t0ken"}


def test_token_is_required_on_every_request(guarded: ServerThread) -> None:
    with httpx.Client(base_url=guarded.url) as http:
        for method, path in [("GET", "/health"), ("GET", "/schema"), ("POST", "/reset"), ("POST", "/step")]:
            _assert_error(http.request(method, path), 401)
            _assert_error(http.request(method, path, headers={"Authorization": "Bearer wrong"}), 401)
        _assert_error(http.get("/health", headers={"Authorization": "Basic !!"}), 401)
        assert http.get("/health", headers=AUTH).status_code == 200
        assert http.get("/health", auth=("anyone", "t0ken")).status_code == 200
    with pytest.raises(InvalidStatus) as refused:
        connect(guarded.url.replace("http://", "ws://") + "/ws")
    assert refused.value.response.status_code == 401
    # OpenEnv's client sends no headers of its own: the token rides in the URL as basic auth
    with GenericEnvClient(base_url=guarded.url.replace("http://", "http://frostgym:t0ken@")).sync() as client:
        assert client.reset(seed=1).observation["info"]["turn"] == 0
    remote = make(guarded.url, ARITHMETIC, token="t0ken")
    remote.close()


def test_oracle_and_gold_are_withheld_without_allow_oracle(guarded: ServerThread) -> None:
    local = make_env(ARITHMETIC, None, {})
    local.reset(seed=4)
    full = local.step("<answer>1</answer>")[4]
    assert "gold" in full["grade"]["details"]
    with httpx.Client(base_url=guarded.url, headers=AUTH) as http:
        http.post("/reset", json={"seed": 4})
        _assert_error(http.post("/oracle"), 403)
        info = http.post("/step", json={"action": "<answer>1</answer>"}).json()["observation"]["info"]
        assert "details" not in info["grade"]
        assert info["grade"] == {k: v for k, v in full["grade"].items() if k != "details"}
        http.post("/close")
    remote = make(guarded.url, ARITHMETIC, token="t0ken")
    try:
        remote.reset(seed=4)
        with pytest.raises(ServedEnvError) as hidden:
            remote.oracle_action()
        assert hidden.value.status == 403 and "--allow-oracle" in str(hidden.value)
    finally:
        remote.close()


def test_session_cap_and_idle_expiry(guarded: ServerThread) -> None:
    with httpx.Client(base_url=guarded.url, headers=AUTH) as http:
        for name in ("a", "b"):
            assert http.post("/reset", json={"seed": 1, "session_id": name}).status_code == 200
        _assert_error(http.post("/reset", json={"seed": 1, "session_id": "c"}), 429)
        with pytest.raises(InvalidStatus) as full:
            connect(guarded.url.replace("http://", "ws://") + "/ws", additional_headers=AUTH)
        assert full.value.response.status_code == 429
        with pytest.raises(ServedEnvError) as remote_full:
            make(guarded.url, ARITHMETIC, token="t0ken")
        assert remote_full.value.status == 429
        assert http.post("/close", json={"session_id": "a"}).status_code == 200
        assert http.post("/reset", json={"seed": 1, "session_id": "c"}).status_code == 200
        deadline = time.monotonic() + 10
        while http.get("/health").json()["sessions"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert http.get("/health").json()["sessions"] == 0, "idle sessions expire"
        _assert_error(http.post("/step", json={"action": "1", "session_id": "b"}), 404)
    with connect(guarded.url.replace("http://", "ws://") + "/ws", additional_headers=AUTH) as ws:
        answer = json.loads(ws.recv(timeout=10))  # nothing sent: the server ends the idle session
        assert answer["type"] == "error" and answer["data"]["status"] == 408
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408


def _faulty_task(kind: str) -> str:
    env = make_env(FAULTY_ID, None, {})
    return next(t for t in (env.reset(seed=s)[1]["task_id"] for s in range(200)) if kind_of(t) == kind)


def test_step_past_its_deadline_is_408_and_shutdown_answers_running_steps() -> None:
    """The faulty env's ``sandbox_timeout`` tasks run 0.5 s in their step. With a 0.2 s deadline
    the step is a 408 and its session closes; the stuck call counts against the cap until it
    returns. A step running when the server stops is answered before it stops."""
    slow = _faulty_task("sandbox_timeout")
    config = ServeConfig(port=0, env_ids=(FAULTY_ID,), step_timeout_s=0.2, max_sessions=1)
    running = ServerThread(config).start()
    try:
        with httpx.Client(base_url=running.url, timeout=30) as http:
            http.post("/reset", json={"task_id": slow, "seed": 0})
            began = time.perf_counter()
            _assert_error(http.post("/step", json={"action": "1"}), 408)
            assert time.perf_counter() - began < 0.45
            _assert_error(http.post("/reset", json={"task_id": slow}), 429)  # the stuck call holds the slot
            released = time.monotonic() + 10  # the stuck call returns after its 0.5 s child (slower on a loaded box)
            while http.get("/health").json()["sessions"] and time.monotonic() < released:
                time.sleep(0.05)
            assert http.get("/health").json()["sessions"] == 0
            _assert_error(http.post("/step", json={"action": "1"}), 404)
            # a client's own shorter deadline
            http.post("/reset", json={"task_id": slow, "seed": 0})
            _assert_error(http.post("/step", json={"action": "1", "timeout_s": 0.05}), 408)
    finally:
        running.stop()

    running = ServerThread(ServeConfig(port=0, env_ids=(FAULTY_ID,), step_timeout_s=5)).start()
    answers: list[httpx.Response] = []
    with httpx.Client(base_url=running.url, timeout=30) as http:
        http.post("/reset", json={"task_id": slow, "seed": 0})
        stepping = threading.Thread(target=lambda: answers.append(http.post("/step", json={"action": "1"})))
        stepping.start()
        time.sleep(0.2)
        running.stop()
        stepping.join(30)
    assert answers and answers[0].json()["exception"] == "SandboxTimeoutError", "the running step was answered"
    table = running.server.config.app.app.state.sessions  # Guard -> FastAPI
    assert table.in_use == 0


# -- the command ---------------------------------------------------------------------------------
def test_serve_command_refuses_bad_settings() -> None:
    runner = CliRunner()
    bracketed = runner.invoke(app, ["serve", "--env", "frostgym/Arithmetic-v0[level=1]"])
    assert bracketed.exit_code == 2 and "plain ids" in bracketed.output
    unknown = runner.invoke(app, ["serve", "--env", "frostgym/Nope-v0"])
    assert unknown.exit_code == 2 and "not registered" in unknown.output
    with pytest.raises(ServeConfigError):
        ServeConfig(token="")


def test_serve_command_serves_until_sigterm() -> None:
    port = _free_port()
    env = {**os.environ, "FROSTGYM_SERVE_TOKEN": "from-env"}
    command = [sys.executable, "-m", "frostgym.cli", "serve", "--env", ARITHMETIC, "--port", str(port)]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", headers={"Authorization": "Bearer from-env"}).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.2)
        assert httpx.get(f"{url}/health").status_code == 401
        remote = make(url, ARITHMETIC, token="from-env")
        remote.reset(seed=1)
        remote.close()
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=60)[0].decode()
    # uvicorn shuts down gracefully, then re-raises the signal it caught, so the exit is SIGTERM's
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "serving 1 env id(s)" in output and "Application shutdown complete" in output


def test_remote_env_passes_gymnasium_check_env(server: ServerThread) -> None:
    from gymnasium.utils.env_checker import check_env

    for env_id in (ARITHMETIC, "frostgym/SQL-v0"):
        remote = make(server.url, env_id)
        try:
            check_env(remote, skip_render_check=True)  # type: ignore[arg-type]
            local: FrozenEnv = make_env(env_id, None, {})
            _same(local.reset(seed=9), remote.reset(seed=9))
            assert remote.tools == getattr(local, "tools", None)
        finally:
            remote.close()


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(
                    int(entry.name)
                )
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def _running_sandboxes() -> set[Any]:
    from frostgym.sandbox import pool

    with pool._all_lock:
        return {box for box in pool._all if box._server is not None and box._server.alive()}


def test_a_code_session_keeps_one_sandbox_and_closes_it(server: ServerThread) -> None:
    """A Code-v0 session runs on its own thread, so its sandbox stays warm across episodes (as
    a runner's worker thread keeps its own); closing the session closes the sandbox and its
    processes end."""
    before, processes_before = _running_sandboxes(), _descendants(os.getpid())
    remote = make(server.url, "frostgym/Code-v0")
    try:
        for seed in range(3):
            remote.reset(seed=seed)
            assert remote.step(remote.oracle_action())[1] == 1.0
            assert len(_running_sandboxes() - before) == 1
            if seed == 0:
                (kept,) = _running_sandboxes() - before
            assert kept in _running_sandboxes(), "one sandbox, kept across episodes"
        processes = _descendants(os.getpid()) - processes_before
    finally:
        remote.close()
    deadline = time.monotonic() + 20
    while ({pid for pid in processes if Path(f"/proc/{pid}").exists()} or kept._server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kept._server is None, "the session's sandbox was closed"
    assert processes and not {pid for pid in processes if Path(f"/proc/{pid}").exists()}, "its processes ended"


def test_a_client_that_leaves_mid_step_ends_its_session_quietly(
    server: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    slow = _faulty_task("sandbox_timeout")
    table = server.server.config.app.app.state.sessions
    before = table.in_use
    with caplog.at_level("WARNING"):
        ws = connect(server.url.replace("http://", "ws://") + "/ws").__enter__()
        ws.send(json.dumps({"type": "reset", "data": {"env_id": FAULTY_ID, "task_id": slow}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        ws.send(json.dumps({"type": "step", "data": "1"}))
        ws.close()  # while the step runs (0.5 s)
        deadline = time.monotonic() + 10
        while table.in_use > before and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.6)
    assert table.in_use == before
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text
