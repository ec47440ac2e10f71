"""A small OpenAI-compatible chat-completions server on loopback, for agent tests.

The model name picks the behaviour: ``echo`` answers with the last user message,
``flaky`` fails its first two calls per message with 503 (then answers), ``limited``
answers 429 with Retry-After once, ``broken`` answers 400, ``garbage`` answers non-JSON,
``tools`` answers with a tool call. Every request body is kept for assertions.

``vllm-tokens`` answers ``reply N`` (N: the messages it was sent), with vLLM's token fields
when the request asks for them (``return_token_ids``: ``prompt_token_ids`` and ``choices[0].token_ids``;
``logprobs`` with ``return_tokens_as_token_ids``: ``"token_id:N"`` tokens): the ids of a toy
tokenizer (``toy_prompt_ids``, ``toy_completion_ids``: one id per character) whose template
renders every earlier turn as it was generated, so each prompt extends the one before.
``vllm-tokens-strip`` has a template that drops ``<think>...</think>`` from earlier assistant
turns, as Qwen3's does, and always thinks, so every turn after the first breaks the prefix.

A test can take over the answers with ``respond``: given a request body, it returns
``(status, payload, headers)`` or ``None`` for the behaviour above. A payload is JSON
data, ``str`` or ``bytes`` sent as they are, or a ``RawWriter`` that writes the whole
HTTP response itself (status line included), for servers that drip bytes or never end;
a writer should stop once ``server.stop`` is set, so every test ends in bounded time.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO

#: Writes a whole raw HTTP response to the socket file; ``stop`` is set when the server shuts down.
RawWriter = Callable[[BinaryIO, threading.Event], None]
Answer = tuple[int, Any, dict[str, str]]


#: The toy tokenizer's special ids: an end-of-turn token (also its end-of-sequence token), and
#: one id per role. A character ``c`` is id ``ord(c) + TOY_OFFSET``.
TOY_END, TOY_OFFSET = 2, 100
TOY_ROLES = {"system": 3, "user": 4, "assistant": 5, "tool": 6}


def toy_prompt_ids(messages: list[dict[str, Any]], *, strip_thinking: bool = False) -> list[int]:
    """The toy template: each message as its role id, its content's characters and the
    end-of-turn id, then the assistant role id (the generation prompt). ``strip_thinking``
    drops ``<think>...</think>`` from assistant turns, as Qwen3's template does."""
    ids: list[int] = []
    for m in messages:
        content = m.get("content") or ""
        if strip_thinking and m["role"] == "assistant":
            content = re.sub(r"<think>.*?</think>", "", content, flags=re.DOTALL)
        ids += [TOY_ROLES[m["role"]], *(ord(c) + TOY_OFFSET for c in content), TOY_END]
    return [*ids, TOY_ROLES["assistant"]]


def toy_completion_ids(text: str) -> list[int]:
    """What the toy model generated for ``text``: its characters, then end of sequence."""
    return [*(ord(c) + TOY_OFFSET for c in text), TOY_END]


def toy_logprob(position: int) -> float:
    return -0.25 * (position % 4)


class ChatServer:
    def __init__(self, respond: Callable[[dict[str, Any]], Answer | None] | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.calls: Counter[str] = Counter()
        self.respond = respond
        self.stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, payload, headers = server.answer(self.path, body)
                if callable(payload):
                    with contextlib.suppress(OSError):  # the client gave up and closed the connection
                        payload(self.wfile, server.stop)
                    return
                if isinstance(payload, bytes):
                    data = payload
                else:
                    data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                with contextlib.suppress(OSError):  # the client gave up and closed the connection
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, path: str, body: dict[str, Any]) -> Answer:
        if urllib.parse.urlsplit(path).path != "/v1/chat/completions":  # absolute form: a request through a proxy
            return 404, {"error": "not found"}, {}
        custom = self.respond(body) if self.respond is not None else None
        if custom is not None:
            with self._lock:
                self.bodies.append(body)
            return custom
        last = body["messages"][-1]["content"]
        with self._lock:
            self.bodies.append(body)
            key = f"{body['model']}:{last}"
            self.calls[key] += 1
            n = self.calls[key]
        model = body["model"]
        if model == "flaky" and n <= 2:
            return 503, {"error": "overloaded"}, {}
        if model == "limited" and n == 1:
            return 429, {"error": "slow down"}, {"Retry-After": "0.05"}
        if model == "broken":
            return 400, {"error": {"message": "bad request"}}, {}
        if model == "garbage":
            return 200, "<html>not json</html>", {}
        message: dict[str, Any] = {"role": "assistant", "content": f"you said: {last}"}
        if model == "tools":
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "run_sql", "arguments": json.dumps({"query": "SELECT 1"})},
                    }
                ],
            }
        usage = {"prompt_tokens": len(str(body["messages"])), "completion_tokens": 7}
        if model in ("vllm-tokens", "vllm-tokens-strip"):
            return 200, self.with_tokens(body, model == "vllm-tokens-strip"), {}
        return 200, {"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage}, {}

    def with_tokens(self, body: dict[str, Any], strip: bool) -> dict[str, Any]:
        """A vLLM-shaped answer with what the request asked for of the toy tokenizer's ids."""
        text = f"reply {len(body['messages'])}"  # no tags: a multi-turn env reads it as no answer, and goes on
        if strip:
            text = f"<think>{len(body['messages'])} messages</think>{text}"
        prompt = toy_prompt_ids(body["messages"], strip_thinking=strip)
        completion = toy_completion_ids(text)
        choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        reply: dict[str, Any] = {
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(completion)},
        }
        if body.get("logprobs"):
            spell = body.get("return_tokens_as_token_ids")
            choice["logprobs"] = {
                "content": [
                    {"token": f"token_id:{t}" if spell else chr(max(t - TOY_OFFSET, 32)), "logprob": toy_logprob(i)}
                    for i, t in enumerate(completion)
                ]
            }
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = prompt
            choice["token_ids"] = completion
        return reply
