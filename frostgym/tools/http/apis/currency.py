"""The currency API (shaped like openexchangerates): latest and historical rates for
any base, conversion, the currency list, and a usage endpoint that, like the real one,
echoes the caller's ``app_id`` (the reason responses are scrubbed before recording)."""

from __future__ import annotations

import datetime as dt

from frostgym.core.seeding import derive_random
from frostgym.tools.http.apis.common import JSON, TODAY, ApiError, Request, date, number, require_key, required

#: Units of each currency per US dollar on ``TODAY``.
USD_RATES: dict[str, float] = {
    "USD": 1.0,
    "EUR": 0.9174,
    "GBP": 0.7851,
    "JPY": 148.92,
    "CHF": 0.8843,
    "CAD": 1.3532,
    "AUD": 1.5261,
    "NOK": 10.5847,
    "SEK": 10.3126,
    "DKK": 6.8437,
    "SGD": 1.3379,
    "INR": 82.87,
    "BRL": 4.9752,
    "MXN": 16.7419,
}
NAMES: dict[str, str] = {
    "USD": "United States Dollar",
    "EUR": "Euro",
    "GBP": "British Pound Sterling",
    "JPY": "Japanese Yen",
    "CHF": "Swiss Franc",
    "CAD": "Canadian Dollar",
    "AUD": "Australian Dollar",
    "NOK": "Norwegian Krone",
    "SEK": "Swedish Krona",
    "DKK": "Danish Krone",
    "SGD": "Singapore Dollar",
    "INR": "Indian Rupee",
    "BRL": "Brazilian Real",
    "MXN": "Mexican Peso",
}
HISTORY_FIRST = dt.date(2024, 1, 1)
HISTORY_LAST = TODAY - dt.timedelta(days=1)
USAGE = {"plan": "developer", "requests_quota": 10_000, "requests_today": 42, "quota_resets": "2024-04-01"}


def code(text: str, name: str) -> str:
    value = text.strip().upper()
    if value not in USD_RATES:
        raise ApiError(400, "invalid_currency", f"{name!r}: unknown currency code {text!r}")
    return value


def usd_rates(when: dt.date) -> dict[str, float]:
    if when == TODAY:
        return dict(USD_RATES)
    rng = derive_random("fx-history", when.isoformat())
    return {c: (r if c == "USD" else r * (1 + rng.uniform(-0.03, 0.03))) for c, r in USD_RATES.items()}


def cross_rate(rates: dict[str, float], base: str, target: str) -> float:
    return round(rates[target] / rates[base], 6)


def rates_for(base: str, when: dt.date) -> JSON:
    table = usd_rates(when)
    return {"base": base, "date": when.isoformat(), "rates": {c: cross_rate(table, base, c) for c in USD_RATES}}


def latest(request: Request) -> JSON:
    return rates_for(code(request.query.get("base", "USD"), "base"), TODAY)


def historical(request: Request) -> JSON:
    when = date(required(request.query, "date"), "date", HISTORY_FIRST, HISTORY_LAST)
    return rates_for(code(request.query.get("base", "USD"), "base"), when)


def convert(request: Request) -> JSON:
    source = code(required(request.query, "from"), "from")
    target = code(required(request.query, "to"), "to")
    amount = number(required(request.query, "amount"), "amount")
    if amount < 0:
        raise ApiError(400, "invalid_parameter", "'amount' must not be negative")
    rate = cross_rate(USD_RATES, source, target)
    return {
        "from": source,
        "to": target,
        "amount": amount,
        "rate": rate,
        "result": round(amount * rate, 2),
        "date": TODAY.isoformat(),
    }


def currencies(request: Request) -> JSON:
    return {"currencies": dict(NAMES)}


def usage(request: Request) -> JSON:
    return {"app_id": request.api_key, **USAGE}


def handle(request: Request) -> JSON:
    require_key(request)
    routes = {
        "/v1/latest": latest,
        "/v1/historical": historical,
        "/v1/convert": convert,
        "/v1/currencies": currencies,
        "/v1/usage": usage,
    }
    handler = routes.get(request.path) if request.method == "GET" else None
    if handler is None:
        raise ApiError(404, "not_found", f"no route {request.method} {request.path}")
    return handler(request)
