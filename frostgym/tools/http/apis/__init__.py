"""The fixture APIs of the HTTP tool world and the one router in front of them.

Each API lives at its own realistic host and reads its credential the way its real
counterpart would: an ``X-Api-Key`` header, an ``Authorization: Bearer`` header, or an
``app_id`` query parameter. ``dispatch`` is a pure function of the request; the fixture
server only moves bytes, and the task generator calls it directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from frostgym.tools.http.apis import calendar, currency, flights, parcels, units, weather
from frostgym.tools.http.apis.common import FAKE_API_KEY, JSON, ApiError, ApiResponse, Request

Auth = Literal["x-api-key", "bearer", "query:app_id", "none"]


@dataclass(frozen=True)
class Api:
    name: str
    host: str
    auth: Auth
    handler: Callable[[Request], JSON]

    @property
    def base_url(self) -> str:
        return f"https://{self.host}"


APIS: tuple[Api, ...] = (
    Api("weather", "api.weather.frostgym.test", "x-api-key", weather.handle),
    Api("currency", "api.fx.frostgym.test", "query:app_id", currency.handle),
    Api("flights", "api.flights.frostgym.test", "x-api-key", flights.handle),
    Api("calendar", "api.calendar.frostgym.test", "bearer", calendar.handle),
    Api("units", "api.units.frostgym.test", "none", units.handle),
    Api("parcels", "api.parcels.frostgym.test", "bearer", parcels.handle),
)
API_BY_NAME: dict[str, Api] = {a.name: a for a in APIS}
API_BY_HOST: dict[str, Api] = {a.host: a for a in APIS}


def credential(api: Api, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    if api.auth == "x-api-key":
        return lowered.get("x-api-key")
    if api.auth == "bearer":
        value = lowered.get("authorization", "")
        return value[7:] if value.startswith("Bearer ") else None
    if api.auth == "query:app_id":
        return query.get("app_id")
    return None


def dispatch(
    host: str, method: str, path: str, query: Mapping[str, str], body: bytes, headers: Mapping[str, str]
) -> ApiResponse:
    """The response of the world to one request (errors included, never an exception)."""
    api = API_BY_HOST.get(host.split(":", 1)[0].lower())
    if api is None:
        return ApiError(404, "unknown_host", f"no API at host {host!r}").response()
    try:
        parsed = json.loads(body) if body.strip() else None
    except (ValueError, UnicodeDecodeError):
        return ApiError(400, "invalid_json", "the request body is not valid JSON").response()
    request = Request(method.upper(), path.rstrip("/") or "/", query, parsed, credential(api, headers, query))
    try:
        payload = api.handler(request)
    except ApiError as error:
        return error.response()
    return ApiResponse(201 if request.method == "POST" else 200, payload)


__all__ = ["APIS", "API_BY_HOST", "API_BY_NAME", "FAKE_API_KEY", "Api", "ApiResponse", "dispatch"]
