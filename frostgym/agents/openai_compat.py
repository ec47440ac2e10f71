"""``OpenAIAgent``: any OpenAI-compatible chat-completions server (vLLM, TGI, hosted APIs).

Requests in a batch run concurrently (a thread pool over one ``httpx.Client``).
Transient failures are retried with exponential backoff, honouring ``Retry-After``:
connection errors, timeouts, 408, 409, 429 and 5xx. Other 4xx answers are final, since
retrying a bad request only repeats it. A request that still fails becomes an errored
reply for its own episode. Token usage is added up per agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from frostgym.agents.base import AgentReply, AgentRequest
from frostgym.agents.sampling import SamplingParams
from frostgym.core.seeding import derive_seed

TRANSIENT_STATUS = frozenset({408, 409, 429})
MAX_BACKOFF_S = 30.0


class _Final(Exception):
    """A failure that retrying cannot fix."""


class OpenAIAgent:
    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        sampling: SamplingParams | None = None,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        api_key: str | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.sampling = sampling or SamplingParams()
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        self._lock = threading.Lock()
        self.usage = {"requests": 0, "retries": 0, "failures": 0, "prompt_tokens": 0, "completion_tokens": 0}

    def describe(self) -> dict[str, Any]:
        return {
            "spec": f"openai:{self.url.rsplit('/chat/completions', 1)[0]}#{self.model}",
            "model": self.model,
            "sampling": self.sampling.to_dict(),
            "concurrency": self.concurrency,
            "usage": dict(self.usage),
        }

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(requests)))) as pool:
            return list(pool.map(self._one, requests))

    def close(self) -> None:
        self._client.close()

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
        if p.logprobs:
            body["logprobs"] = True
        if request.tools:
            body["tools"] = request.tools
        return body

    def _one(self, request: AgentRequest) -> AgentReply:
        body = self.payload(request)
        started = time.perf_counter()
        last_error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                with self._lock:
                    self.usage["retries"] += 1
            try:
                return self._parse(self._post(body), started, attempt)
            except _Final as error:
                last_error = str(error)
                break
            except (httpx.TransportError, _Transient) as error:
                last_error = f"{type(error).__name__}: {error}"
                if attempt < self.max_retries:
                    time.sleep(getattr(error, "retry_after", None) or min(MAX_BACKOFF_S, self.backoff_s * 2**attempt))
        with self._lock:
            self.usage["failures"] += 1
        return AgentReply(
            action="", error=f"{self.url}: {last_error}", extra={"latency_s": time.perf_counter() - started}
        )

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.usage["requests"] += 1
        response = self._client.post(self.url, json=body)
        if response.status_code in TRANSIENT_STATUS or response.status_code >= 500:
            raise _Transient(response)
        if response.status_code >= 400:
            raise _Final(f"HTTP {response.status_code}: {response.text[:500]}")
        try:
            data: dict[str, Any] = response.json()
            data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise _Final(f"not a chat-completions response: {response.text[:500]}") from error
        return data

    def _parse(self, data: dict[str, Any], started: float, attempt: int) -> AgentReply:
        choice = data["choices"][0]
        message = choice["message"]
        content = message.get("content") or ""
        action: str | dict[str, Any] = content
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call.get("function", call)
                arguments = function.get("arguments", {})
                if isinstance(arguments, str):
                    with contextlib.suppress(json.JSONDecodeError):  # else the env reports the malformed call
                        arguments = json.loads(arguments)
                calls.append({"name": function.get("name"), "arguments": arguments})
            action = {"content": content, "tool_calls": calls}
        usage = data.get("usage") or {}
        with self._lock:
            self.usage["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            self.usage["completion_tokens"] += int(usage.get("completion_tokens") or 0)
        extra: dict[str, Any] = {"latency_s": time.perf_counter() - started, "attempts": attempt + 1}
        if choice.get("logprobs"):
            extra["logprobs"] = [t.get("logprob") for t in (choice["logprobs"].get("content") or [])]
        return AgentReply(
            action=action,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
            extra=extra,
        )


class _Transient(Exception):
    """A failure worth retrying; carries the server's ``Retry-After`` when it gave one."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}: {response.text[:200]}")
        retry_after = response.headers.get("retry-after", "")
        self.retry_after = min(MAX_BACKOFF_S, float(retry_after)) if retry_after.replace(".", "", 1).isdigit() else None
