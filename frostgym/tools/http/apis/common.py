"""What every fixture API shares: the response type, errors, parameter readers, and
the fixed clock of the frozen world.

The APIs are pure functions of the request: no state survives a request, no clock or
global randomness is read, so the same request always gets the same bytes back, which
is what lets a re-recording reproduce the committed cassettes exactly.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frostgym.core.errors import FrostgymError

#: The one fake credential of the world. Clients send it; cassettes must never hold it.
FAKE_API_KEY = "fgk_live_5c1e9a7d3b2f4e60a8d1"
#: "Today" in the frozen world.
TODAY = dt.date(2024, 3, 15)

JSON = dict[str, Any]


@dataclass(frozen=True)
class ApiResponse:
    status: int
    payload: JSON

    def body(self) -> bytes:
        return json.dumps(self.payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class ApiError(FrostgymError):
    """A 4xx answer: raised deep inside a handler, turned into an error JSON by the router
    (``frostgym.tools.http.apis.dispatch``), so only a caller of a handler itself sees it."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> ApiResponse:
        return ApiResponse(self.status, {"error": {"code": self.code, "message": self.message}})


@dataclass(frozen=True)
class Request:
    """One request as an API sees it: the path below the host, query, JSON body, auth."""

    method: str
    path: str
    query: Mapping[str, str]
    body: Any
    api_key: str | None


def required(query: Mapping[str, str], name: str) -> str:
    value = query.get(name)
    if value is None or not value.strip():
        raise ApiError(400, "missing_parameter", f"query parameter {name!r} is required")
    return value.strip()


def number(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ApiError(400, "invalid_parameter", f"{name!r} must be a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ApiError(400, "invalid_parameter", f"{name!r} must be a finite number")
    return value


def integer(text: str, name: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ApiError(400, "invalid_parameter", f"{name!r} must be an integer, got {text!r}") from None
    if not low <= value <= high:
        raise ApiError(400, "invalid_parameter", f"{name!r} must be between {low} and {high}, got {value}")
    return value


def date(text: str, name: str, first: dt.date, last: dt.date) -> dt.date:
    try:
        value = dt.date.fromisoformat(text)
    except ValueError:
        raise ApiError(400, "invalid_parameter", f"{name!r} must be a date YYYY-MM-DD, got {text!r}") from None
    if not first <= value <= last:
        raise ApiError(400, "out_of_range", f"{name!r} must be between {first} and {last}, got {value}")
    return value


def body_field(body: Any, name: str, kind: type, *, default: Any = None) -> Any:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the request body must be a JSON object")
    value = body.get(name, default)
    if value is None:
        raise ApiError(400, "missing_field", f"body field {name!r} is required")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ApiError(400, "invalid_field", f"body field {name!r} must be an integer")
    if kind is str and (not isinstance(value, str) or not value.strip()):
        raise ApiError(400, "invalid_field", f"body field {name!r} must be a non-empty string")
    return value


def short_hash(*parts: object) -> str:
    """A stable 8-hex id from content (never from a clock or a counter)."""
    text = json.dumps([str(p) for p in parts], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def require_key(request: Request) -> None:
    if request.api_key is None:
        raise ApiError(401, "unauthorized", "an API key is required")
    if request.api_key != FAKE_API_KEY:
        raise ApiError(403, "forbidden", "the API key is not valid")
