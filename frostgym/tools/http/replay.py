"""vcrpy configuration of the HTTP tool world: matching, secret filtering, and running a
tool call against a cassette where an unrecorded request becomes ``replay_miss``.

Requests match on method, host, path, query and the JSON body compared canonically
(sorted keys, compact separators), so ``{"a":1,"b":2}`` and ``{"b": 2, "a": 1}`` are one
request. The same filters run when recording and when matching (vcrpy applies
``before_record_request`` to both sides), so secrets are scrubbed before anything is
written and replay never needs them. Headers are cut to a short allow-list: the rest
(user agent, accept-encoding) depends on the installed httpx and would make
re-recordings differ by machine.

vcrpy patches ``httpx.HTTPTransport`` process-wide, so cassette use is serialised by a
lock: two envs replaying from two threads cannot unpatch each other mid-request.
"""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import httpx
import vcr
from vcr.cassette import Cassette
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.persisters.filesystem import FilesystemPersister
from vcr.request import Request as VcrRequest

from frostgym.core.errors import ArgumentError
from frostgym.tools.http.apis import FAKE_API_KEY
from frostgym.tools.http.clients import TOOL_BY_NAME
from frostgym.tools.http.transports import NetworkBlockedError, offline_client

REDACTED = "<FILTERED>"
MATCH_ON = ("method", "host", "path", "query", "json_body")
SECRET_HEADERS = ("authorization", "x-api-key")
SECRET_QUERY = ("app_id",)
KEEP_REQUEST_HEADERS = frozenset({"content-type", *SECRET_HEADERS})
KEEP_RESPONSE_HEADERS = frozenset({"content-type"})
VCR_LOCK = threading.RLock()


def cassette_dir() -> Path:
    return Path(str(resources.files("frostgym") / "fixtures" / "tools_http" / "cassettes"))


def cassette_path(api: str, folder: Path | None = None) -> Path:
    return (folder or cassette_dir()) / f"{api}.yaml"


# -- matching ------------------------------------------------------------------------------
def canonical_body(body: Any) -> bytes:
    """The body as canonical JSON when it is JSON, else its bytes (``b""`` for none)."""
    if body is None:
        return b""
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    if not raw.strip():
        return b""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return raw
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def json_body(r1: VcrRequest, r2: VcrRequest) -> None:
    """vcrpy matcher: the bodies are the same JSON value (or the same bytes)."""
    if canonical_body(r1.body) != canonical_body(r2.body):
        raise AssertionError(f"JSON bodies differ: {canonical_body(r1.body)!r} != {canonical_body(r2.body)!r}")


# -- filters -------------------------------------------------------------------------------
def _scrub(data: bytes) -> bytes:
    return data.replace(FAKE_API_KEY.encode(), REDACTED.encode())


def scrub_request(request: VcrRequest) -> VcrRequest:
    """Keep only allow-listed headers, store the body canonically, drop the key anywhere."""
    for name in list(request.headers):
        if name.lower() not in KEEP_REQUEST_HEADERS:
            del request.headers[name]
    body = canonical_body(request.body)
    request.body = _scrub(body) if body else None
    request.uri = request.uri.replace(FAKE_API_KEY, REDACTED)
    return request


def scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    """Keep only allow-listed headers and replace the key in the body (the currency
    API's usage endpoint echoes it, as openexchangerates' does)."""
    response["headers"] = {k: v for k, v in response["headers"].items() if k.lower() in KEEP_RESPONSE_HEADERS}
    body = response["body"].get("string", b"")
    if isinstance(body, str):
        body = body.encode("utf-8")
    response["body"] = {"string": _scrub(body)}
    return response


class _ReadOnlyPersister(FilesystemPersister):  # type: ignore[misc]
    @staticmethod
    def save_cassette(cassette_path: Any, cassette_dict: Any, serializer: Any) -> None:
        raise RuntimeError(f"replay never writes cassettes (tried {cassette_path})")


class _SharedCassette(Cassette):  # type: ignore[misc]
    """A cassette loaded once per process and path, then reused by every call: loading
    (parsing and filtering every interaction) costs far more than one matched replay."""

    _loaded: ClassVar[dict[str, Cassette]] = {}

    @classmethod
    def load(cls, **kwargs: Any) -> Cassette:
        path = str(kwargs["path"])
        cassette = cls._loaded.get(path)
        if cassette is None:
            cassette = cls._loaded[path] = super().load(**kwargs)
        return cassette


def make_vcr(record_mode: str) -> vcr.VCR:
    """The one vcrpy configuration, for recording (``"all"``) and replay (``"none"``)."""
    recorder = vcr.VCR(
        serializer="yaml",
        record_mode=record_mode,
        match_on=MATCH_ON,
        filter_headers=[(h, REDACTED) for h in SECRET_HEADERS],
        filter_query_parameters=[(q, REDACTED) for q in SECRET_QUERY],
        before_record_request=scrub_request,
        before_record_response=scrub_response,
        decode_compressed_response=True,
    )
    recorder.register_matcher("json_body", json_body)
    if record_mode == "none":
        recorder.register_persister(_ReadOnlyPersister)
    return recorder


@cache
def replay_vcr() -> vcr.VCR:
    return make_vcr("none")


def replaying(api: str) -> Any:
    """A context in which httpx requests are answered from ``api``'s cassette only
    (``CannotOverwriteExistingCassetteException`` for anything it does not hold)."""
    config = functools.partial(
        replay_vcr().get_merged_config, path=str(cassette_path(api)), allow_playback_repeats=True
    )
    return _SharedCassette.use_arg_getter(config)


# -- running a call ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CallResult:
    """What one tool call returned: an HTTP status and JSON body, or an error.

    ``error`` is ``None`` for any HTTP answer (4xx included: the API answered), else
    ``unknown_tool``, ``invalid_arguments``, ``replay_miss`` or ``network_blocked``."""

    name: str
    status: int | None
    content: Any
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.status, "content": self.content}
        if self.error is not None:
            out["error"] = self.error
        return out


@cache
def _client() -> httpx.Client:
    """One offline client for every replayed call (callers hold ``VCR_LOCK``)."""
    return offline_client()


def _decode(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def run_call(name: str, arguments: dict[str, Any], offered: frozenset[str] | None = None) -> CallResult:
    """Run one tool call against its API's cassette. Never raises for agent input and
    never opens a connection: an unrecorded request is a ``replay_miss`` result."""
    tool = TOOL_BY_NAME.get(name)
    if tool is None or (offered is not None and name not in offered):
        names = sorted(offered) if offered is not None else sorted(TOOL_BY_NAME)
        return CallResult(name, None, f"unknown tool {name!r}; available tools: {', '.join(names)}", "unknown_tool")
    try:
        with VCR_LOCK, replaying(tool.api):
            response = tool.call(_client(), arguments)
            return CallResult(name, response.status_code, _decode(response))
    except ArgumentError as error:
        return CallResult(name, None, f"invalid arguments for {name}: {error}", "invalid_arguments")
    except CannotOverwriteExistingCassetteException:
        message = f"replay_miss: the frozen {tool.api} API has no recorded response for this {name} request"
        return CallResult(name, None, message, "replay_miss")
    except NetworkBlockedError as error:
        return CallResult(name, None, f"network_blocked: {error}", "network_blocked")
    except httpx.HTTPError as error:  # a request httpx cannot even build (e.g. an invalid URL)
        return CallResult(name, None, f"request_error: {error}", "request_error")
