"""``OpenAIAgent``: any OpenAI-compatible chat-completions server (vLLM, TGI, hosted APIs).

The runner feeds it one request per episode, on its own thread, as the episode needs one
(``scheduling = "per_request"``), up to ``concurrency`` in flight over one connection pool.

**Retries never feed a storm.** A request is sent again (exponential backoff, honouring
``Retry-After``) only where the server is known not to be working on it: it could not be
reached (connection refused, connect timeout), it closed or reset the connection before
sending any byte of a reply (a keep-alive connection it had dropped), or it said so (408,
429, 503). A request that timed out waiting for its reply is not sent again, here or by the
runner (its reply is ``retryable=False``): the server may still be generating it, and a
second copy would queue behind the first. Its connection is closed, so a server that stops
on disconnect stops. Other answers (4xx, 500, 502, 504) are final. A request that fails
becomes an errored reply for its own episode. ``abort`` stops every request in flight at
once (a run interrupted by Ctrl-C calls it). Token usage is added up per agent.

The server is not trusted; whatever it sends, ``act()`` returns one reply per request
and never raises. The bounds, and why each is needed:

- **A whole-request deadline** (``timeout_s``, default 120 s; ``frostgym eval
  --request-timeout``). httpx's timeouts apply to each read, so a server sending a byte
  per read timeout held a request forever. Here every socket operation of a request
  (connect, TLS handshake, sending, the status line and headers, every body read) waits
  at most what is left of the request's deadline: a network backend under the
  connection pool clips each timeout. A request past its deadline is a timeout, so a
  transient failure. Outside it: DNS resolution (the resolver bounds it), and a host
  with several addresses gets what is left for each one tried.
- **A body size cap** (``max_response_bytes``, default 16 MiB). The body is read in
  chunks; a larger one (declared or actual) is a final error and is never held whole.
  ``Accept-Encoding: identity`` is asked, and an encoded body is refused, so a small
  compressed body cannot inflate past the cap.
- **Each reply is parsed on its own**, so one malformed reply never raises out of
  ``act()`` and drops its whole batch. A reply that is not JSON, nests deeper than
  ``MAX_NESTING`` levels (Python's decoder raises ``RecursionError`` on deep input),
  holds an integer outside 64 bits, or lacks (or mistypes) ``choices``, ``message``,
  ``content``, ``tool_calls`` or a call's ``function`` is a final error naming what is
  wrong (``malformed reply: choices[0].message is null``), for its own episode only.
  Metadata of the wrong type is ignored, never counted: usage counts that are not
  non-negative integers, a ``finish_reason`` that is not a short string, logprobs that
  are not numbers. So the usage counters are exact sums of well-formed counts.
- Rollout cards are written with orjson, which refuses nesting past 255 levels,
  integers past 64 bits and lone surrogates; the nesting and integer limits above and
  the cleaning of every string (a lone surrogate becomes U+FFFD) keep a reply from
  failing the card writer later.

Tool-call arguments that are a JSON string are decoded; arguments that are not valid
JSON stay a string, and the env reports the malformed call as it would for any model.

**Token ids** (``token_ids=True``; ``frostgym eval --token-ids``): each request also asks a
vLLM server for what the model saw and produced: ``logprobs: true``,
``return_tokens_as_token_ids: true`` (each ``choices[0].logprobs.content[i].token`` is then
``"token_id:123"``) and ``return_token_ids: true`` (the response's ``prompt_token_ids`` and
``choices[0].token_ids``). The reply's ``tokens`` (a ``TokenTrace``) hold what came back:
prompt ids from ``prompt_token_ids``; completion ids from ``choices[0].token_ids``, else from
the ``token_id:N`` tokens of the logprobs when every one reads as such; the logprobs of
``logprobs.content`` (``logprobs_of="server"``), kept only when there is one per completion
id. A part that is absent or malformed (not a list of integers from 0 to 2**31 - 1, a logprob
that is not a finite number <= 0, which reads as None) is None, never an error: the rule
above for metadata. Off by default: a server that is not vLLM may refuse the extra fields.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import threading
import time
import typing
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpcore
import httpx

from frostgym.agents.base import AgentReply, AgentRequest, Scheduling, TokenHook
from frostgym.agents.concurrency import ConcurrencyLimit, Outcome
from frostgym.agents.sampling import SamplingParams
from frostgym.core.episode import MAX_TOKEN_ID, TokenTrace
from frostgym.core.messages import Action, clean_text
from frostgym.core.seeding import derive_seed

#: Answers that say the server is not working on the request: worth sending it again.
TRANSIENT_STATUS = frozenset({408, 429, 503})
MAX_BACKOFF_S = 30.0
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RESPONSE_BYTES = 16 * 2**20
#: Deepest nesting of JSON containers accepted in a reply (a real one nests about 8 deep).
MAX_NESTING = 64
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what orjson writes
_MAX_COUNT = 2**53  # larger token counts are not real and would not survive a float
_MAX_FINISH_REASON = 100
#: Failures of the connection pool after which the server cannot be working on the request:
#: it was never reached. The rest (a bad URL scheme, a request h11 refuses to send) would
#: fail the same way again.
_UNREACHED = (httpcore.ConnectError, httpcore.ConnectTimeout, httpcore.ProxyError)
#: Failures that, before any byte of a reply, mean the server dropped the connection
#: (a keep-alive connection it had closed) or never got the whole request: worth a retry.
_DROPPED_BEFORE_REPLY = (httpcore.RemoteProtocolError, httpcore.ReadError, httpcore.WriteError, httpcore.WriteTimeout)
_T = TypeVar("_T")


class _Final(Exception):
    """A failure that retrying cannot fix."""


class _Malformed(_Final):
    """A 2xx answer that is not a usable chat completion: final, since the server would
    most likely send the same again; the message names what is wrong."""

    def __init__(self, what: str) -> None:
        super().__init__(f"malformed reply: {what}")


class _NoReply(Exception):
    """The connection was dropped before any byte of a reply: the server is not at work on it."""


class _Abandoned(Exception):
    """The request timed out waiting for its reply: the server may still be generating it,
    so it is not sent again."""


class _Transient(Exception):
    """A failure worth retrying; carries the server's ``Retry-After`` when it gave one."""

    def __init__(self, status: int, body: bytes | bytearray, retry_after: str) -> None:
        super().__init__(f"HTTP {status}: {_snippet(body)}")
        self.retry_after = min(MAX_BACKOFF_S, float(retry_after)) if retry_after.replace(".", "", 1).isdigit() else None


class OpenAIAgent:
    """A policy served by an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` is the API root (``http://localhost:8000/v1``), ``model`` the model name
    sent; ``sampling`` the decoding parameters; ``concurrency`` how many requests are in
    flight at once (and the connection pool's size): the runner feeds it one request per
    episode as that episode needs it (``scheduling = "per_request"``), up to that many; ``timeout_s`` the
    deadline of each attempt of a request, as a whole; ``max_retries`` and ``backoff_s``
    the retries of transient failures (exponential backoff, ``Retry-After`` honoured);
    ``api_key`` the bearer token (``$OPENAI_API_KEY`` when None, none when empty);
    ``max_response_bytes`` the largest body read. The constructor raises ``ValueError``
    for a non-positive or non-finite ``timeout_s`` or a non-positive ``max_response_bytes``.

    ``act`` returns one ``AgentReply`` per request, in order, and never raises, whatever
    the server does: a request that still fails after its retries, or whose answer is
    malformed, gets an errored reply for its own episode (see the module docstring).
    A reply carries the text (tool calls, when the server returned them, as a
    ``{"content", "tool_calls"}`` action), the server's token counts and finish reason,
    and in ``extra`` the latency, the attempts and any logprobs. ``usage`` adds up
    requests, retries, failures and tokens; ``close`` releases the connections. With
    ``token_ids`` each request asks the server (vLLM) for token ids and logprobs, and each
    reply carries what came back in ``tokens`` (the module docstring).
    ``on_tokens``, None until a caller sets it, is told of each reply as it comes, with its
    completion tokens when the server reports them (its ``usage``; else 0), from the
    thread that read the reply.

    Determinism: each request sends a ``seed`` derived from ``sampling.seed`` and the
    request's own seed; whether the server honours it is the server's matter.
    """

    name = "openai"
    scheduling: Scheduling = "per_request"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        sampling: SamplingParams | None = None,
        concurrency: int = 8,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        api_key: str | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        adaptive_concurrency: bool = True,
        token_ids: bool = False,
    ) -> None:
        """``timeout_s`` bounds each request as a whole (each attempt of it), from
        connecting to the last body byte; ``max_response_bytes`` bounds its body;
        ``token_ids`` asks for token ids and logprobs (vLLM's extra fields)."""
        if not timeout_s > 0 or not math.isfinite(timeout_s):
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s}")
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be positive, got {max_response_bytes}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.sampling = sampling or SamplingParams()
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_response_bytes = max_response_bytes
        self.token_ids = token_ids
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self._headers = [
            (b"Content-Type", b"application/json"),
            (b"Accept", b"application/json"),
            (b"Accept-Encoding", b"identity"),
        ]
        if key:
            self._headers.append((b"Authorization", f"Bearer {key}".encode()))
        self._deadline = _Deadline()
        self._backend = _DeadlineBackend(self._deadline)
        self._pool = _connection_pool(self.url, self._backend, concurrency)
        self._aborted = threading.Event()
        self._limit = ConcurrencyLimit(concurrency, adaptive=adaptive_concurrency, deadline_s=timeout_s)
        self._lock = threading.Lock()
        self.usage = {"requests": 0, "retries": 0, "failures": 0, "prompt_tokens": 0, "completion_tokens": 0}
        self.on_tokens: TokenHook | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "spec": f"openai:{self.url.rsplit('/chat/completions', 1)[0]}#{self.model}",
            "model": self.model,
            "sampling": self.sampling.to_dict(),
            "concurrency": self.concurrency,
            "concurrency_limit": self._limit.describe(),
            "request_timeout_s": self.timeout_s,
            "max_response_bytes": self.max_response_bytes,
            **({"token_ids": True} if self.token_ids else {}),
            "usage": dict(self.usage),
        }

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        if len(requests) == 1:  # how the runner calls it (``scheduling``): on its own thread
            return [self._counted(requests[0])]
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(requests)))) as pool:
            return list(pool.map(self._counted, requests))

    def _counted(self, request: AgentRequest) -> AgentReply:
        reply = self._one(request)
        hook = self.on_tokens
        if hook is not None:
            hook(reply.completion_tokens or 0, 1)
        return reply

    def close(self) -> None:
        self._pool.close()

    def payload(self, request: AgentRequest) -> dict[str, Any]:
        p = self.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.observation,
            "temperature": p.temperature,
            "top_p": p.top_p,
            "max_tokens": p.max_new_tokens,
            # Servers differ in the seed range they accept; 31 bits fits all of them.
            "seed": derive_seed("openai-sampling", p.seed, request.seed) % 2**31,
        }
        if p.stop:
            body["stop"] = list(p.stop)
        if p.logprobs or self.token_ids:
            body["logprobs"] = True
        if self.token_ids:  # vLLM's own fields (the module docstring)
            body["return_tokens_as_token_ids"] = True
            body["return_token_ids"] = True
        if request.tools:
            body["tools"] = request.tools
        return body

    def _one(self, request: AgentRequest) -> AgentReply:
        """One request, sent again only while the server is known not to be working on it
        (the module docstring); never raises."""
        started = time.perf_counter()
        last_error = ""
        retryable = True
        try:
            content = json.dumps(self.payload(request)).encode()
        except (TypeError, ValueError) as error:  # an observation JSON cannot carry
            return self._failed(started, f"the request cannot be sent as JSON: {error}")
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    self.usage["retries"] += 1
            if self._aborted.is_set() or not self._limit.acquire():
                return self._failed(started, "the run was interrupted", retryable=False)
            sent = time.perf_counter()  # the deadline and the latency run from here, not from the queue
            outcome: Outcome = "failed"
            tokens = retry_after = delay = None
            try:
                reply = self._reply(self._post(content), started, attempt)
                outcome, tokens = "ok", reply.completion_tokens
                return reply
            except _Final as error:
                last_error = str(error)
                break
            except _Abandoned as error:
                last_error, retryable, outcome = str(error), False, "timed_out"
                break
            except (*_UNREACHED, _NoReply, _Transient) as error:
                last_error = f"{type(error).__name__}: {error}"
                if isinstance(error, _Transient):
                    outcome, retry_after = "overloaded", error.retry_after
                delay = retry_after or min(MAX_BACKOFF_S, self.backoff_s * 2**attempt)
            except Exception as error:  # nothing a server sends may escape act() and drop the batch
                last_error = f"{type(error).__name__}: {error}"
                break
            finally:
                self._limit.release(outcome, time.perf_counter() - sent, tokens, retry_after)
            if attempt < self.max_retries:
                self._aborted.wait(delay)
        if self._aborted.is_set():
            retryable = False
        return self._failed(started, last_error, retryable=retryable)

    def abort(self) -> None:
        """Stop every request in flight now: their connections are shut, each is answered
        as failed (not retried), and no request is sent after this."""
        self._aborted.set()
        self._limit.close()
        self._backend.shut_all()

    def _failed(self, started: float, error: str, *, retryable: bool = True) -> AgentReply:
        with self._lock:
            self.usage["failures"] += 1
        extra = {"latency_s": time.perf_counter() - started}
        return AgentReply.failed(_one_line(f"{self.url}: {error}"), retryable=retryable, extra=extra)

    def _post(self, content: bytes) -> Any:
        """One attempt: the decoded JSON of a 2xx answer, within the deadline and the size cap."""
        with self._lock:
            self.usage["requests"] += 1
        headers = [*self._headers, (b"Content-Length", str(len(content)).encode())]
        timeouts = dict.fromkeys(("connect", "read", "write", "pool"), self.timeout_s)
        replying = False
        try:
            with (
                self._deadline.running(self.timeout_s),
                self._pool.stream(
                    "POST", self.url, headers=headers, content=content, extensions={"timeout": timeouts}
                ) as response,
            ):
                replying = True
                status = response.status
                answer = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in response.headers}
                body = self._read_body(response, answer)
        except (httpcore.ReadTimeout, httpcore.PoolTimeout) as error:  # httpcore has closed the connection
            why = "the server may still be working on it: not sent again"
            raise _Abandoned(f"{type(error).__name__}: {error} ({why})") from error
        except _DROPPED_BEFORE_REPLY as error:
            if replying:
                raise _Final(f"{type(error).__name__}: {error} (the connection broke during the reply)") from error
            raise _NoReply(f"{type(error).__name__}: {error}") from error
        if status in TRANSIENT_STATUS:
            raise _Transient(status, body, answer.get("retry-after", "").strip())
        if status >= 400:
            raise _Final(f"HTTP {status}: {_snippet(body)}")
        return _decode(body)

    def _read_body(self, response: httpcore.Response, headers: dict[str, str]) -> bytearray:
        cap = self.max_response_bytes
        declared = headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > cap:
            raise _Final(f"response body over the {cap} byte limit (Content-Length: {declared})")
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise _Final(f"response body is {encoding[:40]}-encoded though identity was asked")
        body = bytearray()
        for chunk in response.iter_stream():
            body += chunk
            if len(body) > cap:
                raise _Final(f"response body over the {cap} byte limit")
        return body  # not copied to bytes: json reads a bytearray as is

    def _reply(self, data: Any, started: float, attempt: int) -> AgentReply:
        reply = _read_reply(data)
        with self._lock:
            self.usage["prompt_tokens"] += reply.prompt_tokens or 0
            self.usage["completion_tokens"] += reply.completion_tokens or 0
        extra: dict[str, Any] = {"latency_s": time.perf_counter() - started, "attempts": attempt + 1}
        tokens = _token_trace(data) if self.token_ids else None
        if reply.logprobs is not None and (self.sampling.logprobs or tokens is None or tokens.logprobs is None):
            extra["logprobs"] = reply.logprobs  # not twice: asked for with the ids only, they are in ``tokens``
        return AgentReply(
            action=reply.action,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            finish_reason=reply.finish_reason,
            extra=extra,
            tokens=tokens,
        )


# -- reading a reply ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Read:
    action: Action
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    logprobs: list[float | None] | None = field(default=None)


def _decode(body: bytes | bytearray) -> Any:
    try:
        data = json.loads(body)
    except RecursionError as error:
        raise _Malformed(f"the body nests deeper than {MAX_NESTING} levels") from error
    except ValueError as error:  # also bytes that are not UTF-8, and 4300+ digit integers
        raise _Malformed(f"not JSON ({error}): {_snippet(body) or 'an empty body'}") from error
    return _clean(data, "the body")


def _clean(value: Any, where: str, depth: int = 0) -> Any:
    """``value`` with valid UTF-8 strings; ``_Malformed`` past ``MAX_NESTING`` levels or
    for an integer outside 64 bits. Recursion is bounded by ``MAX_NESTING``."""
    if isinstance(value, str):
        return clean_text(value)[0]
    if isinstance(value, int) and not isinstance(value, bool) and not _INT_MIN <= value <= _INT_MAX:
        raise _Malformed(f"{where} holds an integer outside the 64-bit range")
    if not isinstance(value, (list, dict)):
        return value
    if depth >= MAX_NESTING:
        raise _Malformed(f"{where} nests deeper than {MAX_NESTING} levels")
    if isinstance(value, list):
        return [_clean(v, where, depth + 1) for v in value]
    return {clean_text(k)[0]: _clean(v, where, depth + 1) for k, v in value.items()}


def _read_reply(data: Any) -> _Read:
    """The action and metadata of a decoded, cleaned body; ``_Malformed`` naming the first
    field the action cannot be read from."""
    choices = _member(data, "choices", "the body", list)
    if not choices:
        raise _Malformed("choices is empty")
    choice = _item(choices, 0, "choices", dict)
    message = _member(choice, "message", "choices[0]", dict)
    content = _content(message.get("content"))
    action: Action = content
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        where = "choices[0].message.tool_calls"
        if not isinstance(tool_calls, list):
            raise _Malformed(f"{where} is {_kind(tool_calls)}, expected an array")
        if tool_calls:
            action = {"content": content, "tool_calls": [_call(tool_calls, i) for i in range(len(tool_calls))]}
    finish = choice.get("finish_reason")
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return _Read(
        action=action,
        finish_reason=finish if isinstance(finish, str) and len(finish) <= _MAX_FINISH_REASON else None,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        logprobs=_logprobs(choice.get("logprobs")),
    )


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    # some servers send content as parts: [{"type": "text", "text": "..."}]
    if isinstance(value, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in value):
        return "".join(p["text"] for p in value)
    raise _Malformed(f"choices[0].message.content is {_kind(value)}, expected a string")


def _call(calls: list[Any], i: int) -> dict[str, Any]:
    where = f"choices[0].message.tool_calls[{i}]"
    call = _item(calls, i, "choices[0].message.tool_calls", dict)
    function = call
    if "function" in call:  # OpenAI wraps the call in {"type": "function", "function": {...}}
        function = _member(call, "function", where, dict)
        where += ".function"
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = _clean(json.loads(arguments), f"{where}.arguments")
        except RecursionError as error:
            raise _Malformed(f"{where}.arguments nests deeper than {MAX_NESTING} levels") from error
        except ValueError:
            pass  # stays a string: the env reports the malformed call, as for any model
    # a missing or odd name is the model's error, not the server's: the env reports it too
    return {"name": function.get("name"), "arguments": arguments}


def _member(parent: Any, key: str, where: str, kind: type[_T]) -> _T:
    if not isinstance(parent, dict):
        raise _Malformed(f"{where} is {_kind(parent)}, expected an object")
    path = f"{where}.{key}" if where != "the body" else key
    if key not in parent:
        raise _Malformed(f"{path} is missing")
    return _typed(parent[key], path, kind)


def _item(items: list[Any], i: int, where: str, kind: type[_T]) -> _T:
    return _typed(items[i], f"{where}[{i}]", kind)


def _typed(value: Any, path: str, kind: type[_T]) -> _T:
    if not isinstance(value, kind):
        raise _Malformed(f"{path} is {_kind(value)}, expected {_KINDS[kind]}")
    return value


_KINDS: dict[type, str] = {
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    list: "an array",
    dict: "an object",
}


def _kind(value: Any) -> str:
    return "null" if value is None else _KINDS.get(type(value), type(value).__name__)


def _count(value: Any) -> int | None:
    """A token count, or None for anything that is not one (text, NaN, negative, bool)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT:
        return value
    return None


def _logprobs(value: Any) -> list[float | None] | None:
    """Per-token logprobs of ``{"content": [{"logprob": x}, ...]}``; None when absent or
    not that shape; a token whose logprob is not a number reads as None."""
    if not isinstance(value, dict) or not value:
        return None
    tokens = value.get("content") or []
    if not isinstance(tokens, list):
        return None
    out: list[float | None] = []
    for token in tokens:
        logprob = token.get("logprob") if isinstance(token, dict) else None
        out.append(float(logprob) if isinstance(logprob, (int, float)) and not isinstance(logprob, bool) else None)
    return out


#: How ``return_tokens_as_token_ids`` spells a logprob's token.
_TOKEN_ID = re.compile(r"token_id:(\d{1,10})", re.ASCII)


def _token_trace(data: Any) -> TokenTrace | None:
    """The token ids and logprobs of a decoded, cleaned body that ``_read_reply`` read (so
    ``choices[0]`` is an object), as the module docstring says; None when it holds none.
    Never raises: whatever is malformed is left out."""
    choice = data["choices"][0]
    content = choice.get("logprobs")
    content = content.get("content") if isinstance(content, dict) else None
    entries = content if isinstance(content, list) else None
    completion = _token_ids(choice.get("token_ids"))
    if completion is None and entries:
        spelled = [
            _TOKEN_ID.fullmatch(e["token"]) if isinstance(e, dict) and isinstance(e.get("token"), str) else None
            for e in entries
        ]
        if all(spelled):
            completion = _token_ids([int(match[1]) for match in spelled if match])
    logprobs = None
    if entries is not None and (completion is None or len(entries) == len(completion)):
        logprobs = [_logprob(e.get("logprob") if isinstance(e, dict) else None) for e in entries]
    trace = TokenTrace(
        prompt_ids=_token_ids(data.get("prompt_token_ids")),
        completion_ids=completion,
        logprobs=logprobs,
        logprobs_of="server" if logprobs is not None else None,
    )
    return trace if trace != TokenTrace() else None


def _token_ids(value: Any) -> list[int] | None:
    """A list of token ids, or None for anything that is not one."""
    if not isinstance(value, list):
        return None
    for token in value:
        if type(token) is not int or not 0 <= token <= MAX_TOKEN_ID:
            return None
    return value


def _logprob(value: Any) -> float | None:
    """A logprob: a finite number <= 0, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -math.inf < value <= 0:
        return None
    return float(value)


def _snippet(body: bytes | bytearray) -> str:
    return _one_line(body[:200].decode("utf-8", errors="replace"))[:200]


def _one_line(text: str, limit: int = 600) -> str:
    return re.sub(r"\s+", " ", text).strip()[:limit]


# -- the request deadline ---------------------------------------------------------------------


class _Deadline(threading.local):
    """The deadline of the request the current thread is making. The connection pool does
    all of a request's socket work in the calling thread, so a thread-local reaches it."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.budget = 0.0

    @contextmanager
    def running(self, seconds: float) -> Iterator[None]:
        self.at, self.budget = time.monotonic() + seconds, seconds
        try:
            yield
        finally:
            self.at = None

    def bounded(
        self, timeout: float | None, late: type[httpcore.TimeoutException], operation: Callable[[float | None], _T]
    ) -> _T:
        """``operation(timeout)`` with the timeout cut to what is left of the deadline;
        raises ``late`` naming the deadline once it has passed."""
        if self.at is None:
            return operation(timeout)
        left = self.at - time.monotonic()
        if left <= 0:
            raise late(f"request deadline of {self.budget:g} s passed")
        try:
            return operation(left if timeout is None else min(timeout, left))
        except httpcore.TimeoutException as error:
            if time.monotonic() >= self.at:
                raise late(f"request deadline of {self.budget:g} s passed") from error
            raise


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._deadline.bounded(timeout, httpcore.ReadTimeout, lambda t: self._inner.read(max_bytes, t))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._deadline.bounded(timeout, httpcore.WriteTimeout, lambda t: self._inner.write(buffer, t))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._deadline.bounded(
            timeout, httpcore.ConnectTimeout, lambda t: self._inner.start_tls(ssl_context, server_hostname, t)
        )
        return _DeadlineStream(tls, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each of whose operations obeys the running request's deadline."""

    def __init__(self, deadline: _Deadline) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline
        self._streams: weakref.WeakSet[_DeadlineStream] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._shut = False

    def _track(self, stream: httpcore.NetworkStream) -> _DeadlineStream:
        tracked = _DeadlineStream(stream, self._deadline)
        with self._lock:
            self._streams.add(tracked)
            shut = self._shut
        if shut:  # opened while shut_all ran: it must not wait for a reply either
            _shut_socket(tracked)
        return tracked

    def shut_all(self) -> None:
        """Shut every socket this backend opened or opens from now on, so a thread blocked
        reading one wakes at once (closing a socket from another thread does not wake it;
        shutting it does)."""
        with self._lock:
            self._shut = True
            streams = list(self._streams)
        for stream in streams:
            _shut_socket(stream)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._deadline.bounded(
            timeout,
            httpcore.ConnectTimeout,
            lambda t: self._inner.connect_tcp(host, port, t, local_address, socket_options),
        )
        return self._track(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: typing.Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        stream = self._deadline.bounded(
            timeout, httpcore.ConnectTimeout, lambda t: self._inner.connect_unix_socket(path, t, socket_options)
        )
        return self._track(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _shut_socket(stream: httpcore.NetworkStream) -> None:
    sock = stream.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _connection_pool(url: str, backend: httpcore.NetworkBackend, concurrency: int) -> httpcore.ConnectionPool:
    """A pool over ``backend``, through the HTTP(S) proxy the environment names for ``url``
    (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), as httpx would. SSL settings come from
    httpx (certifi, ``SSL_CERT_FILE``)."""
    ssl_context = httpx.create_ssl_context()
    limits: dict[str, Any] = {
        "max_connections": None,  # the agent's thread pool bounds them: no request waits for a connection
        "max_keepalive_connections": max(1, concurrency),
        "keepalive_expiry": 5.0,  # as httpx
    }
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        proxy_url = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if proxy_url.scheme not in ("http", "https"):
            raise ValueError(
                f"the openai agent supports HTTP(S) proxies only, got {proxy_url.scheme}:// from the environment"
            )
        auth = None
        if proxy_url.username is not None:
            auth = (urllib.parse.unquote(proxy_url.username), urllib.parse.unquote(proxy_url.password or ""))
        return httpcore.HTTPProxy(
            proxy_url=proxy_url._replace(netloc=proxy_url.netloc.rpartition("@")[2]).geturl(),
            proxy_auth=auth,
            ssl_context=ssl_context,
            network_backend=backend,
            **limits,
        )
    return httpcore.ConnectionPool(ssl_context=ssl_context, network_backend=backend, **limits)
