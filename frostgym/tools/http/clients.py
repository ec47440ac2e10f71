"""The HTTP tools: one small ``httpx`` function per endpoint, and their OpenAI schemas.

Every function takes the ``httpx.Client`` to send with, so the same code records
against the fixture server (a loopback transport) and replays from cassettes (an
offline transport under vcrpy). Requests always name the API's canonical host, send
every default explicitly and format numbers one way, so each distinct call is exactly
one distinct recorded request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from frostgym.tools.http.apis import API_BY_NAME, FAKE_API_KEY, Api
from frostgym.tools.http.arguments import check_arguments
from frostgym.tools.schemas import function_tool

TIMEOUT_S = 5.0


def _q(value: Any) -> str:
    """A query value: integral numbers without ``.0``, floats by ``repr``."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def _seg(value: str) -> str:
    return quote(value, safe="")


def _send(
    client: httpx.Client,
    api_name: str,
    method: str,
    path: str,
    params: Mapping[str, Any] | None = None,
    body: Mapping[str, Any] | None = None,
) -> httpx.Response:
    api: Api = API_BY_NAME[api_name]
    query = {k: _q(v) for k, v in (params or {}).items() if v is not None}
    headers: dict[str, str] = {"Accept": "application/json"}
    if api.auth == "x-api-key":
        headers["X-Api-Key"] = FAKE_API_KEY
    elif api.auth == "bearer":
        headers["Authorization"] = f"Bearer {FAKE_API_KEY}"
    elif api.auth == "query:app_id":
        query["app_id"] = FAKE_API_KEY
    return client.request(
        method,
        f"{api.base_url}{path}",
        params=query,
        headers=headers,
        json=dict(body) if body is not None else None,
        timeout=TIMEOUT_S,
    )


# -- weather -------------------------------------------------------------------------------
def get_current_weather(client: httpx.Client, city: str) -> httpx.Response:
    return _send(client, "weather", "GET", "/v1/current", {"city": city})


def get_weather_forecast(client: httpx.Client, city: str, days: int = 3) -> httpx.Response:
    return _send(client, "weather", "GET", "/v1/forecast", {"city": city, "days": days})


def get_weather_history(client: httpx.Client, city: str, date: str) -> httpx.Response:
    return _send(client, "weather", "GET", "/v1/history", {"city": city, "date": date})


def list_weather_cities(client: httpx.Client) -> httpx.Response:
    return _send(client, "weather", "GET", "/v1/cities")


# -- currency ------------------------------------------------------------------------------
def get_exchange_rates(client: httpx.Client, base: str = "USD") -> httpx.Response:
    return _send(client, "currency", "GET", "/v1/latest", {"base": base})


def get_historical_rates(client: httpx.Client, date: str, base: str = "USD") -> httpx.Response:
    return _send(client, "currency", "GET", "/v1/historical", {"date": date, "base": base})


def convert_currency(client: httpx.Client, amount: float, from_currency: str, to_currency: str) -> httpx.Response:
    return _send(client, "currency", "GET", "/v1/convert", {"from": from_currency, "to": to_currency, "amount": amount})


def list_currencies(client: httpx.Client) -> httpx.Response:
    return _send(client, "currency", "GET", "/v1/currencies")


def get_fx_usage(client: httpx.Client) -> httpx.Response:
    return _send(client, "currency", "GET", "/v1/usage")


# -- flights -------------------------------------------------------------------------------
def search_airports(client: httpx.Client, query: str | None = None) -> httpx.Response:
    return _send(client, "flights", "GET", "/v1/airports", {"query": query})


def search_flights(client: httpx.Client, origin: str, destination: str, date: str) -> httpx.Response:
    params = {"origin": origin, "destination": destination, "date": date}
    return _send(client, "flights", "GET", "/v1/flights/search", params)


def get_flight_details(client: httpx.Client, flight_id: str) -> httpx.Response:
    return _send(client, "flights", "GET", f"/v1/flights/{_seg(flight_id)}")


def book_flight(client: httpx.Client, flight_id: str, passenger_name: str, seats: int = 1) -> httpx.Response:
    body = {"flight_id": flight_id, "passenger_name": passenger_name, "seats": seats}
    return _send(client, "flights", "POST", "/v1/bookings", body=body)


# -- calendar ------------------------------------------------------------------------------
def list_events(client: httpx.Client, date: str) -> httpx.Response:
    return _send(client, "calendar", "GET", "/v1/events", {"date": date})


def get_event(client: httpx.Client, event_id: str) -> httpx.Response:
    return _send(client, "calendar", "GET", f"/v1/events/{_seg(event_id)}")


def create_event(
    client: httpx.Client, title: str, date: str, start: str, end: str, location: str | None = None
) -> httpx.Response:
    body = {"title": title, "date": date, "start": start, "end": end}
    if location is not None:
        body["location"] = location
    return _send(client, "calendar", "POST", "/v1/events", body=body)


def find_free_slots(client: httpx.Client, date: str, duration_min: int = 30) -> httpx.Response:
    return _send(client, "calendar", "GET", "/v1/free_slots", {"date": date, "duration_min": duration_min})


def delete_event(client: httpx.Client, event_id: str) -> httpx.Response:
    return _send(client, "calendar", "DELETE", f"/v1/events/{_seg(event_id)}")


# -- units ---------------------------------------------------------------------------------
def convert_units(client: httpx.Client, value: float, from_unit: str, to_unit: str) -> httpx.Response:
    return _send(client, "units", "GET", "/v1/convert", {"value": value, "from": from_unit, "to": to_unit})


def list_units(client: httpx.Client, kind: str | None = None) -> httpx.Response:
    return _send(client, "units", "GET", "/v1/units", {"kind": kind})


# -- parcels -------------------------------------------------------------------------------
def track_parcel(client: httpx.Client, tracking_number: str) -> httpx.Response:
    return _send(client, "parcels", "GET", f"/v1/parcels/{_seg(tracking_number)}")


def list_carriers(client: httpx.Client) -> httpx.Response:
    return _send(client, "parcels", "GET", "/v1/carriers")


# -- schemas -------------------------------------------------------------------------------
def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


_DATE = "Date as YYYY-MM-DD."
_CITY = "City name, e.g. 'Oslo' or 'New York'."


@dataclass(frozen=True)
class HttpTool:
    name: str
    api: str
    description: str
    properties: Mapping[str, Mapping[str, Any]]
    required: tuple[str, ...]
    function: Callable[..., httpx.Response]
    #: Whether a call changes the API's state (its request is a POST or a DELETE: a
    #: booking made, an event created or deleted); the others are GETs that only read.
    writes: bool = False

    @property
    def parameters(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {k: dict(v) for k, v in self.properties.items()},
            "required": list(self.required),
            "additionalProperties": False,
        }

    def call(self, client: httpx.Client, arguments: Mapping[str, Any]) -> httpx.Response:
        """Send the request for ``arguments`` (checked: ``ArgumentError`` when they do not fit)."""
        return self.function(client, **check_arguments(self.parameters, arguments))


TOOLS: tuple[HttpTool, ...] = (
    HttpTool(
        "get_current_weather",
        "weather",
        "Current weather (temperature in Celsius, condition, humidity, wind) in a city.",
        {"city": _s(_CITY)},
        ("city",),
        get_current_weather,
    ),
    HttpTool(
        "get_weather_forecast",
        "weather",
        "Daily forecast (high/low in Celsius, condition, precipitation in mm) for the next days, starting tomorrow.",
        {
            "city": _s(_CITY),
            "days": {
                "type": "integer",
                "description": "Number of days, 1-7.",
                "minimum": 1,
                "maximum": 7,
                "default": 3,
            },
        },
        ("city",),
        get_weather_forecast,
    ),
    HttpTool(
        "get_weather_history",
        "weather",
        "Observed weather of a past day (2024-01-01 to yesterday) in a city.",
        {"city": _s(_CITY), "date": _s(_DATE)},
        ("city", "date"),
        get_weather_history,
    ),
    HttpTool("list_weather_cities", "weather", "The cities with a weather station.", {}, (), list_weather_cities),
    HttpTool(
        "get_exchange_rates",
        "currency",
        "Today's exchange rates: units of every currency per one unit of the base currency.",
        {"base": _s("Base currency, ISO 4217 code.", default="USD")},
        (),
        get_exchange_rates,
    ),
    HttpTool(
        "get_historical_rates",
        "currency",
        "Exchange rates of a past day (2024-01-01 to yesterday) for a base currency.",
        {"date": _s(_DATE), "base": _s("Base currency, ISO 4217 code.", default="USD")},
        ("date",),
        get_historical_rates,
    ),
    HttpTool(
        "convert_currency",
        "currency",
        "Convert an amount between currencies at today's rate (result rounded to 2 decimals).",
        {
            "amount": {"type": "number", "description": "Amount to convert.", "minimum": 0},
            "from_currency": _s("ISO 4217 code of the source currency."),
            "to_currency": _s("ISO 4217 code of the target currency."),
        },
        ("amount", "from_currency", "to_currency"),
        convert_currency,
    ),
    HttpTool("list_currencies", "currency", "All supported currency codes and names.", {}, (), list_currencies),
    HttpTool("get_fx_usage", "currency", "Usage and quota of this currency API account.", {}, (), get_fx_usage),
    HttpTool(
        "search_airports",
        "flights",
        "Find airports by city, name or IATA code (all airports when no query).",
        {"query": _s("Text to search for, e.g. 'London'.")},
        (),
        search_airports,
    ),
    HttpTool(
        "search_flights",
        "flights",
        "Flights between two airports on one day (April 2024), with prices in USD.",
        {
            "origin": _s("IATA code of the departure airport, e.g. 'OSL'."),
            "destination": _s("IATA code of the arrival airport."),
            "date": _s(_DATE),
        },
        ("origin", "destination", "date"),
        search_flights,
    ),
    HttpTool(
        "get_flight_details",
        "flights",
        "Full details of one flight offer: aircraft, seats left, included bags.",
        {"flight_id": _s("The flight_id from search_flights.")},
        ("flight_id",),
        get_flight_details,
    ),
    HttpTool(
        "book_flight",
        "flights",
        "Book seats on a flight offer; returns the booking id and total price.",
        {
            "flight_id": _s("The flight_id from search_flights."),
            "passenger_name": _s("Full name of the passenger."),
            "seats": {"type": "integer", "description": "Number of seats.", "minimum": 1, "maximum": 9, "default": 1},
        },
        ("flight_id", "passenger_name"),
        book_flight,
        writes=True,
    ),
    HttpTool(
        "list_events",
        "calendar",
        "The user's calendar events on one day.",
        {"date": _s(_DATE)},
        ("date",),
        list_events,
    ),
    HttpTool(
        "get_event",
        "calendar",
        "One calendar event by id.",
        {"event_id": _s("Event id, e.g. 'evt_1a2b3c4d'.")},
        ("event_id",),
        get_event,
    ),
    HttpTool(
        "create_event",
        "calendar",
        "Create a calendar event; refused with 409 when it overlaps an existing one.",
        {
            "title": _s("Event title."),
            "date": _s(_DATE),
            "start": _s("Start time HH:MM (24h)."),
            "end": _s("End time HH:MM (24h)."),
            "location": _s("Where it takes place."),
        },
        ("title", "date", "start", "end"),
        create_event,
        writes=True,
    ),
    HttpTool(
        "find_free_slots",
        "calendar",
        "Free windows of at least duration_min minutes on a day, within working hours 09:00-17:00.",
        {
            "date": _s(_DATE),
            "duration_min": {
                "type": "integer",
                "description": "Minimum length in minutes.",
                "minimum": 15,
                "maximum": 480,
                "default": 30,
            },
        },
        ("date",),
        find_free_slots,
    ),
    HttpTool(
        "delete_event",
        "calendar",
        "Delete a calendar event by id.",
        {"event_id": _s("Event id.")},
        ("event_id",),
        delete_event,
        writes=True,
    ),
    HttpTool(
        "convert_units",
        "units",
        "Convert a value between units of length, mass, volume or temperature (symbols from list_units).",
        {
            "value": {"type": "number", "description": "The value to convert."},
            "from_unit": _s("Unit symbol, e.g. 'km', 'lb', 'C'."),
            "to_unit": _s("Unit symbol, e.g. 'mi', 'kg', 'F'."),
        },
        ("value", "from_unit", "to_unit"),
        convert_units,
    ),
    HttpTool(
        "list_units",
        "units",
        "The supported unit symbols, all kinds or one.",
        {"kind": _s("One kind of unit.", enum=["length", "mass", "volume", "temperature"])},
        (),
        list_units,
    ),
    HttpTool(
        "track_parcel",
        "parcels",
        "Status, route, estimated delivery and scan history of a parcel.",
        {"tracking_number": _s("Tracking number, e.g. 'FG1234567890'.")},
        ("tracking_number",),
        track_parcel,
    ),
    HttpTool("list_carriers", "parcels", "Carriers this tracker covers.", {}, (), list_carriers),
)
TOOL_BY_NAME: dict[str, HttpTool] = {t.name: t for t in TOOLS}


def tool_schemas(names: tuple[str, ...] | list[str] | None = None) -> list[dict[str, Any]]:
    """OpenAI function tools (``frostgym.tools.schemas.function_tool``) of the named tools
    (all when ``None``), in the order given. Raises ``KeyError`` for a name not in ``TOOL_BY_NAME``."""
    chosen = [TOOL_BY_NAME[n] for n in names] if names is not None else list(TOOLS)
    return [function_tool(t.name, t.description, t.parameters) for t in chosen]
