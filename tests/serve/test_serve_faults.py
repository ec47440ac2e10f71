"""A real ``frostgym serve`` on 127.0.0.1 under the abuse of an outside fault campaign: clients
that ask for wider sandbox limits, steps that loop forever, NaN deadlines, env arguments of the
wrong type, immediate timeouts and clients that hang up mid-body. The server refuses what is the
operator's to decide (403), refuses wrong types and non-finite numbers (422), stops work past
its deadline so a fresh client is served within 2 s, and logs no traceback for any of it."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'frostgym[serve]')")
pytest.importorskip("uvicorn", reason="the serve extra is not installed (pip install 'frostgym[serve]')")
import httpx
from typer.testing import CliRunner

from frostgym.cli import app
from frostgym.commands.options import FiniteFloat
from frostgym.core.errors import EnvArgumentError, ServeConfigError
from frostgym.envs.registry import ENTRIES, env_class, make_env
from frostgym.serve.config import ServeConfig

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CODE = "frostgym/Code-v0"
ARITHMETIC = "frostgym/Arithmetic-v0"
SQL = "frostgym/SQL-v0"
#: A reply whose module never finishes loading: the sandboxed process spins until killed.
SPIN = "```python\nwhile True:\n    pass\n```"
#: A query that never ends by itself (SQLite's own limits do not stop a recursive CTE).
RUNAWAY_SQL = "<answer>WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r</answer>"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A ``frostgym serve`` subprocess; ``stop`` ends it (SIGTERM) and returns its whole log."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        self.port = _free_port() if port is None else port
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "frostgym.cli", "serve", "--port", str(self.port), *args]
        env = {k: v for k, v in os.environ.items() if k != "FROSTGYM_SERVE_TOKEN"}
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not come up: {self.stop()}")
            time.sleep(0.2)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.communicate(timeout=90)[0].decode(errors="replace")


def _no_traceback(log: str) -> None:
    for marker in ("Traceback", "never retrieved", "Exception in ASGI application", "ClientDisconnect"):
        assert marker not in log, f"{marker!r} in the server's log:\n{log}"


def _error(response: httpx.Response, status: int, *words: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    for word in words:
        assert word in body["message"], body
    return body


def _sandbox_or_skip() -> None:
    from frostgym.core.errors import SandboxUnavailableError
    from frostgym.sandbox.pool import thread_sandbox

    try:
        thread_sandbox("auto").start()
    except SandboxUnavailableError as error:
        pytest.skip(f"no sandbox backend can run here: {error}")


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    running = Served("--env", f"{ARITHMETIC},{CODE},{SQL}", "--step-timeout", "1", "--max-sessions", "3")
    yield running
    _no_traceback(running.stop())


# -- 1. limits are the operator's; work past its deadline is stopped ------------------------------
def test_a_client_cannot_widen_a_sandbox_limit(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for kwargs in ({"cpu_seconds": 1e5}, {"memory_mb": 1_000_000}, {"cpu_seconds": 3.5}):
            body = {"session_id": "widen", "env_id": CODE, "env_kwargs": kwargs}
            _error(http.post("/reset", json=body), 403, "would widen a resource limit", "--allow-wider-limits")
            _error(http.post("/make", json=body), 403, "would widen a resource limit")
        _error(
            http.post("/reset", json={"env_id": SQL, "env_kwargs": {"max_result_rows": 10**6}}), 403, "max_result_rows"
        )
        narrower = {"session_id": "narrow", "env_id": CODE, "env_kwargs": {"cpu_seconds": 1, "memory_mb": 256}}
        assert http.post("/reset", json=narrower).status_code == 200
        http.post("/close", json={"session_id": "narrow"})
        assert http.get("/health").json()["sessions"] == 0, "a refused request holds no session"


def test_a_client_cannot_name_the_model_or_cache_an_env_calls(served: Served) -> None:
    """CustomerService-v0's customer model and cache are the server's: a client that names one
    would have the server call any address, or write any path."""
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for kwargs in (
            {"customer": "openai:http://169.254.169.254/v1#x"},
            {"customer_cache": "/etc/passwd"},
            {"cache_mode": "live"},
        ):
            body = {"session_id": "party", "env_id": ARITHMETIC, "env_kwargs": kwargs}
            _error(http.post("/reset", json=body), 403, "set by the server")
        assert http.get("/health").json()["sessions"] == 0


def test_the_operator_may_allow_wider_limits() -> None:
    running = Served("--env", CODE, "--allow-wider-limits")
    try:
        body = {"env_kwargs": {"cpu_seconds": 5.0, "memory_mb": 1024}}
        assert httpx.post(f"{running.url}/reset", json=body, timeout=30).status_code == 200
    finally:
        _no_traceback(running.stop())


def test_steps_that_never_end_are_stopped_and_a_fresh_client_is_served_within_2_s(served: Served) -> None:
    """Three clients fill the three-session server with steps that never end by themselves
    (a spinning module in the sandbox, a runaway recursive query). Each is answered 408 at its
    1 s deadline; within 2 s after that, a fresh client is served."""
    _sandbox_or_skip()
    with httpx.Client(base_url=served.url, timeout=60) as http:
        spinning = [("c1", CODE, SPIN), ("c2", CODE, SPIN), ("s1", SQL, RUNAWAY_SQL)]
        for session, env_id, _ in spinning:
            body = {"session_id": session, "env_id": env_id, "seed": 0}
            if env_id == CODE:
                body["env_kwargs"] = {"cpu_seconds": 3.0}  # the default, stated: allowed
            assert http.post("/reset", json=body).status_code == 200
        for session, env_id, action in spinning:
            answer = http.post("/step", json={"session_id": session, "action": action})
            if env_id == SQL and answer.status_code == 200:  # its own 1 s query deadline came first
                assert answer.json()["observation"]["info"]["grade"]["label"] == "timeout", answer.text
                assert http.post("/close", json={"session_id": session}).status_code == 200
                continue
            _error(answer, 408, "deadline")
        timed_out = time.monotonic()
        while True:
            fresh = http.post("/reset", json={"session_id": "fresh", "env_id": ARITHMETIC, "seed": 1})
            if fresh.status_code == 200:
                break
            assert fresh.status_code == 429, fresh.text
            assert time.monotonic() - timed_out < 2.0, "no fresh client was served within 2 s of the timeouts"
            time.sleep(0.05)
        http.post("/close", json={"session_id": "fresh"})
    deadline = time.monotonic() + 10
    while httpx.get(f"{served.url}/health").json()["sessions"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert httpx.get(f"{served.url}/health").json()["sessions"] == 0


def test_interrupt_ends_a_spinning_sandbox_job_at_once() -> None:
    """In process: ``CodeEnv.interrupt`` from another thread ends a step whose code spins,
    graded as a timeout, long before the 3 s CPU limit."""
    import threading

    _sandbox_or_skip()
    env = make_env(CODE, None, {})
    env.reset(seed=0)
    results: list[Any] = []
    stepping = threading.Thread(target=lambda: results.append(env.step(SPIN)))
    began = time.monotonic()
    stepping.start()
    time.sleep(0.5)
    env.interrupt()
    stepping.join(30)
    assert results and time.monotonic() - began < 2.5
    assert results[0][4]["grade"]["label"] == "timeout"
    env.close()


# -- 3. every env argument is checked against its declared type -----------------------------------
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"grader_config": {"x": 1}}, ("grader_config", "MathGraderConfig")),
        ({"system_prompt": 5}, ("system_prompt", "a string")),
        ({"system_prompt": ["a"]}, ("system_prompt", "a string")),
        ({"level": "x"}, ("level", "an integer")),
        ({"max_turns": True}, ("max_turns", "an integer")),
        ({"nope": 1}, ("nope",)),
    ],
)
def test_env_arguments_of_the_wrong_type_are_422_naming_them(
    served: Served, kwargs: dict[str, Any], words: tuple[str, ...]
) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as http:
        _error(http.post("/reset", json={"env_id": ARITHMETIC, "env_kwargs": kwargs}), 422, *words)
        _error(http.post("/make", json={"env_id": ARITHMETIC, "env_kwargs": kwargs}), 422, *words)
        assert http.get("/health").json()["sessions"] == 0


def test_the_same_check_refuses_in_python_and_on_the_command_line(tmp_path: Path) -> None:
    import gymnasium

    with pytest.raises(EnvArgumentError, match="grader_config"):
        gymnasium.make(ARITHMETIC, grader_config={"x": 1})
    with pytest.raises(ValueError, match="system_prompt"):
        make_env(ARITHMETIC, None, {"system_prompt": 3})
    result = CliRunner().invoke(
        app, ["eval", "--env", f"{ARITHMETIC}[grader_config=x]", "--episodes", "2", "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 2, result.output
    assert "grader_config" in result.output and not (tmp_path / "c").exists()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_every_env_declares_its_arguments_in_shapes_that_are_checked(entry: Any) -> None:
    from frostgym.core.arguments import unsupported_annotations

    assert unsupported_annotations(env_class(entry.id)) == []


# -- 4. NaN and infinities are refused wherever a number comes from outside -----------------------
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_non_finite_numbers_on_the_wire_are_422(served: Served, constant: str) -> None:
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        assert http.post("/reset", json={"session_id": "nan", "env_id": ARITHMETIC, "seed": 0}).status_code == 200
        step = f'{{"session_id": "nan", "action": "1", "timeout_s": {constant}}}'
        _error(http.post("/step", content=step, headers=headers), 422, constant, "finite")
        reset = f'{{"env_id": "{CODE}", "env_kwargs": {{"cpu_seconds": {constant}}}}}'
        _error(http.post("/reset", content=reset, headers=headers), 422, "finite")
        action = f'{{"session_id": "nan", "action": {{"content": "x", "n": {constant}}}}}'
        _error(http.post("/step", content=action, headers=headers), 422, "finite")
        assert http.post("/step", json={"session_id": "nan", "action": "<answer>1</answer>"}).status_code == 200
        http.post("/close", json={"session_id": "nan"})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_env_arguments_and_server_settings_are_refused(value: float) -> None:
    with pytest.raises(EnvArgumentError, match="cpu_seconds"):
        make_env(CODE, None, {"cpu_seconds": value})
    with pytest.raises(ServeConfigError, match="finite"):
        ServeConfig(idle_timeout_s=value)
    with pytest.raises(ServeConfigError, match="finite"):
        ServeConfig(step_timeout_s=value)


def _float_options() -> list[tuple[str, str, Any]]:
    """Every float option of every command: (command, flag, its typer ``OptionInfo``), read
    from the commands' own annotations."""
    found = []
    commands: list[tuple[str | None, Any]] = [(None, c) for c in app.registered_commands]
    commands += [
        (g.name, c) for g in app.registered_groups if g.typer_instance for c in g.typer_instance.registered_commands
    ]
    for group, command in commands:
        callback = command.callback
        assert callback is not None
        name = command.name or callback.__name__.replace("_", "-")
        name = name if group is None else f"{group} {name}"
        for parameter, hint in typing.get_type_hints(callback, include_extras=True).items():
            if typing.get_origin(hint) is not typing.Annotated:
                continue
            base, *extras = typing.get_args(hint)
            if float in (base, *typing.get_args(base)):
                info = next(e for e in extras if isinstance(e, typer.models.OptionInfo))
                declared = info.param_decls or ()
                flag = next((d for d in declared if d.startswith("--")), "--" + parameter.replace("_", "-"))
                found.append((name, flag, info))
    return found


def test_every_float_option_of_every_command_is_finite() -> None:
    options = _float_options()
    assert len(options) >= 9  # eval, serve, calibrate, contamination: a sweep, not a sample
    unchecked = [f"{name} {flag}" for name, flag, info in options if not isinstance(info.parser, FiniteFloat)]
    assert unchecked == [], "a float option that takes NaN: give it parser=finite_float(...)"


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "infinity"])
def test_non_finite_numbers_on_the_command_line_exit_2(text: str, tmp_path: Path) -> None:
    runner = CliRunner()
    for name, flag, _ in _float_options():
        result = runner.invoke(app, [*name.split(), flag, text])
        assert result.exit_code == 2, (name, flag, result.output)
        assert "not a finite number" in " ".join(result.output.replace("│", " ").split()), (name, flag, result.output)
    spec = runner.invoke(app, ["eval", "--env", f"{CODE}[cpu_seconds={text}]", "--out", str(tmp_path / "c")])
    assert spec.exit_code == 2, spec.output
    for number in ("NaN", "1e999"):
        config = runner.invoke(
            app,
            [
                "eval",
                "--env",
                ARITHMETIC,
                "--task-config",
                f'{{"max_operand": {number}}}',
                "--out",
                str(tmp_path / "d"),
            ],
        )
        assert config.exit_code == 2 and "finite" in config.output, config.output


# -- 8. ordinary client behaviour leaves no traceback in the log ----------------------------------
def test_immediate_timeouts_and_clients_that_hang_up_mid_body_log_no_traceback() -> None:
    running = Served("--env", ARITHMETIC)
    try:
        with httpx.Client(base_url=running.url, timeout=30) as http:
            for number in range(20):
                session = f"t{number}"
                assert http.post("/reset", json={"session_id": session, "seed": number}).status_code == 200
                answer = http.post("/step", json={"session_id": session, "action": "1", "timeout_s": 1e-9})
                assert answer.status_code in (200, 408), answer.text
            for _ in range(5):  # a body announced as 1000 bytes, 10 sent, then the client is gone
                with socket.create_connection(("127.0.0.1", running.port)) as raw:
                    raw.sendall(
                        b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 1000\r\n\r\n" + b'{"seed": 1'
                    )
                time.sleep(0.1)
            for _ in range(3):  # a WebSocket client that leaves during its step
                from websockets.sync.client import connect

                with connect(running.url.replace("http://", "ws://") + "/ws") as ws:
                    ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                    ws.recv(timeout=30)
                    ws.send(json.dumps({"type": "step", "data": "1"}))
            time.sleep(0.5)
            assert http.get("/health").json()["status"] == "healthy"
            assert http.post("/reset", json={"session_id": "after", "seed": 2}).status_code == 200
    finally:
        log = running.stop()
    _no_traceback(log)
