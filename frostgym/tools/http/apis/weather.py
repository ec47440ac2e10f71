"""The weather API: current conditions, a 7-day forecast and daily history for a fixed
set of cities, each value drawn from a private RNG seeded by (city, date)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from frostgym.core.seeding import derive_random
from frostgym.tools.http.apis.common import JSON, TODAY, ApiError, Request, date, integer, require_key, required


@dataclass(frozen=True)
class City:
    name: str
    country: str
    march_mean_c: float  # climate the draws centre on
    rainy: float  # chance of rain on a day


CITIES: tuple[City, ...] = (
    City("Oslo", "NO", 0.5, 0.35),
    City("London", "GB", 8.5, 0.45),
    City("Paris", "FR", 9.5, 0.4),
    City("Berlin", "DE", 5.0, 0.35),
    City("Madrid", "ES", 12.0, 0.2),
    City("Rome", "IT", 12.5, 0.3),
    City("New York", "US", 6.0, 0.35),
    City("San Francisco", "US", 13.0, 0.3),
    City("Tokyo", "JP", 10.0, 0.4),
    City("Singapore", "SG", 28.0, 0.55),
    City("Sydney", "AU", 22.0, 0.4),
    City("Reykjavik", "IS", 0.0, 0.5),
    City("Cairo", "EG", 19.0, 0.05),
    City("Toronto", "CA", 1.0, 0.35),
)
CONDITIONS_DRY = ("clear", "sunny", "partly cloudy", "cloudy", "overcast")
CONDITIONS_WET = ("light rain", "rain", "showers", "drizzle", "thunderstorm")
HISTORY_FIRST = dt.date(2024, 1, 1)
HISTORY_LAST = TODAY - dt.timedelta(days=1)


def city(name: str) -> City:
    for entry in CITIES:
        if entry.name.lower() == name.strip().lower():
            return entry
    raise ApiError(404, "city_not_found", f"no weather station for city {name!r}")


def day(entry: City, when: dt.date) -> JSON:
    """The weather of one city on one day: the same numbers for every endpoint."""
    rng = derive_random("weather", entry.name, when.isoformat())
    seasonal = (when - dt.date(2024, 3, 15)).days * 0.12  # spring warms ~1 degree a week
    high = round(entry.march_mean_c + seasonal + rng.uniform(1.0, 6.0), 1)
    low = round(high - rng.uniform(3.0, 9.0), 1)
    wet = rng.random() < entry.rainy
    condition = rng.choice(CONDITIONS_WET if wet else CONDITIONS_DRY)
    precip = round(rng.uniform(0.4, 18.0), 1) if wet else 0.0
    return {
        "date": when.isoformat(),
        "high_c": high,
        "low_c": low,
        "condition": condition,
        "precip_mm": precip,
        "humidity_pct": rng.randint(55, 95) if wet else rng.randint(25, 70),
        "wind_kph": round(rng.uniform(2.0, 38.0), 1),
    }


def current(request: Request) -> JSON:
    entry = city(required(request.query, "city"))
    today = day(entry, TODAY)
    rng = derive_random("weather-now", entry.name)
    temperature = round(today["low_c"] + (today["high_c"] - today["low_c"]) * rng.uniform(0.55, 0.95), 1)
    return {
        "city": entry.name,
        "country": entry.country,
        "observed_at": f"{TODAY.isoformat()}T12:00:00Z",
        "temperature_c": temperature,
        "condition": today["condition"],
        "humidity_pct": today["humidity_pct"],
        "wind_kph": today["wind_kph"],
    }


def forecast(request: Request) -> JSON:
    entry = city(required(request.query, "city"))
    days = integer(request.query.get("days", "3"), "days", 1, 7)
    rows = [day(entry, TODAY + dt.timedelta(days=n)) for n in range(1, days + 1)]
    return {
        "city": entry.name,
        "country": entry.country,
        "issued": TODAY.isoformat(),
        "days": [{k: row[k] for k in ("date", "high_c", "low_c", "condition", "precip_mm")} for row in rows],
    }


def history(request: Request) -> JSON:
    entry = city(required(request.query, "city"))
    when = date(required(request.query, "date"), "date", HISTORY_FIRST, HISTORY_LAST)
    return {"city": entry.name, "country": entry.country, **day(entry, when)}


def cities(request: Request) -> JSON:
    return {"cities": [{"name": c.name, "country": c.country} for c in CITIES]}


def handle(request: Request) -> JSON:
    require_key(request)
    routes = {"/v1/current": current, "/v1/forecast": forecast, "/v1/history": history, "/v1/cities": cities}
    handler = routes.get(request.path) if request.method == "GET" else None
    if handler is None:
        raise ApiError(404, "not_found", f"no route {request.method} {request.path}")
    return handler(request)
