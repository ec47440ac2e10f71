"""The flights API: airport lookup, flight search for a route and day, flight details,
and booking. Offers are regenerated from (route, date) on every request, so an offer id
names the same flight in every process; a booking is a pure function of its body."""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

from frostgym.core.seeding import derive_random
from frostgym.tools.http.apis.common import (
    JSON,
    ApiError,
    Request,
    body_field,
    date,
    require_key,
    required,
    short_hash,
)


@dataclass(frozen=True)
class Airport:
    code: str
    name: str
    city: str
    country: str
    lat: float
    lon: float


AIRPORTS: tuple[Airport, ...] = (
    Airport("OSL", "Oslo Gardermoen", "Oslo", "NO", 60.19, 11.10),
    Airport("LHR", "London Heathrow", "London", "GB", 51.47, -0.45),
    Airport("LGW", "London Gatwick", "London", "GB", 51.15, -0.19),
    Airport("CDG", "Paris Charles de Gaulle", "Paris", "FR", 49.01, 2.55),
    Airport("BER", "Berlin Brandenburg", "Berlin", "DE", 52.37, 13.50),
    Airport("MAD", "Madrid Barajas", "Madrid", "ES", 40.47, -3.56),
    Airport("FCO", "Rome Fiumicino", "Rome", "IT", 41.80, 12.25),
    Airport("JFK", "New York John F. Kennedy", "New York", "US", 40.64, -73.78),
    Airport("SFO", "San Francisco International", "San Francisco", "US", 37.62, -122.38),
    Airport("HND", "Tokyo Haneda", "Tokyo", "JP", 35.55, 139.78),
    Airport("SIN", "Singapore Changi", "Singapore", "SG", 1.36, 103.99),
    Airport("KEF", "Reykjavik Keflavik", "Reykjavik", "IS", 63.99, -22.61),
)
AIRLINES = (("NX", "Nordlys Air"), ("BW", "Bluewing"), ("AT", "Atlantica"), ("SK", "Skyline Express"))
AIRCRAFT = ("Airbus A320neo", "Boeing 737-800", "Airbus A321", "Boeing 787-9", "Airbus A350-900")
FIRST_DAY = dt.date(2024, 4, 1)
LAST_DAY = dt.date(2024, 4, 30)
_OFFER_ID = re.compile(r"^([A-Z]{3})([A-Z]{3})-(\d{4})-(\d)$")


def airport(code: str) -> Airport:
    for entry in AIRPORTS:
        if entry.code == code.strip().upper():
            return entry
    raise ApiError(404, "airport_not_found", f"unknown airport code {code!r}")


def distance_km(a: Airport, b: Airport) -> float:
    la, lb = math.radians(a.lat), math.radians(b.lat)
    dlon = math.radians(b.lon - a.lon)
    cos = math.sin(la) * math.sin(lb) + math.cos(la) * math.cos(lb) * math.cos(dlon)
    return 6371.0 * math.acos(max(-1.0, min(1.0, cos)))


def offers(origin: Airport, destination: Airport, when: dt.date) -> list[JSON]:
    rng = derive_random("flights", origin.code, destination.code, when.isoformat())
    km = distance_km(origin, destination)
    rows: list[JSON] = []
    for n in range(1, 3 + rng.randint(0, 2) + 1):
        carrier, airline = rng.choice(AIRLINES)
        stops = 0 if km < 2500 or rng.random() < 0.5 else 1
        minutes = int(km / 800 * 60 + 35 + stops * rng.randint(70, 160))
        depart = dt.datetime.combine(when, dt.time(6, 0)) + dt.timedelta(minutes=rng.randrange(0, 15 * 60, 5))
        arrive = depart + dt.timedelta(minutes=minutes)
        price = round(km * rng.uniform(0.06, 0.14) + 49 - stops * 25, 2)
        rows.append(
            {
                "flight_id": f"{origin.code}{destination.code}-{when:%m%d}-{n}",
                "flight_number": f"{carrier}{rng.randint(100, 989)}",
                "airline": airline,
                "origin": origin.code,
                "destination": destination.code,
                "departure": depart.strftime("%Y-%m-%dT%H:%M"),
                "arrival": arrive.strftime("%Y-%m-%dT%H:%M"),
                "duration_min": minutes,
                "stops": stops,
                "price_usd": price,
                "seats_left": rng.randint(1, 9),
                "aircraft": rng.choice(AIRCRAFT),
                "checked_bags_included": rng.randint(0, 2),
            }
        )
    return rows


_SUMMARY = ("flight_id", "flight_number", "airline", "departure", "arrival", "duration_min", "stops", "price_usd")


def search_airports(request: Request) -> JSON:
    text = request.query.get("query", "").strip().lower()
    found = [a for a in AIRPORTS if not text or text in f"{a.code} {a.name} {a.city}".lower()]
    return {"airports": [{"code": a.code, "name": a.name, "city": a.city, "country": a.country} for a in found]}


def search(request: Request) -> JSON:
    origin = airport(required(request.query, "origin"))
    destination = airport(required(request.query, "destination"))
    if origin == destination:
        raise ApiError(400, "invalid_route", "origin and destination must differ")
    when = date(required(request.query, "date"), "date", FIRST_DAY, LAST_DAY)
    rows = offers(origin, destination, when)
    return {
        "origin": origin.code,
        "destination": destination.code,
        "date": when.isoformat(),
        "flights": [{k: row[k] for k in _SUMMARY} for row in rows],
    }


def find_offer(flight_id: str) -> JSON:
    match = _OFFER_ID.match(flight_id)
    if match:
        origin, destination, mmdd, n = match.groups()
        try:
            when = dt.date(2024, int(mmdd[:2]), int(mmdd[2:]))
            if FIRST_DAY <= when <= LAST_DAY and origin != destination:
                rows = offers(airport(origin), airport(destination), when)
                if 1 <= int(n) <= len(rows):
                    return rows[int(n) - 1]
        except (ValueError, ApiError):
            pass
    raise ApiError(404, "flight_not_found", f"no flight with id {flight_id!r}")


def details(request: Request) -> JSON:
    return find_offer(request.path.rsplit("/", 1)[-1])


def book(request: Request) -> JSON:
    offer = find_offer(body_field(request.body, "flight_id", str))
    passenger = body_field(request.body, "passenger_name", str).strip()
    seats = body_field(request.body, "seats", int, default=1)
    if not 1 <= seats <= offer["seats_left"]:
        raise ApiError(400, "not_enough_seats", f"{seats} seat(s) requested, {offer['seats_left']} left")
    return {
        "booking_id": "BK-" + short_hash(offer["flight_id"], passenger, seats).upper()[:6],
        "status": "confirmed",
        "flight_id": offer["flight_id"],
        "flight_number": offer["flight_number"],
        "passenger_name": passenger,
        "seats": seats,
        "total_usd": round(offer["price_usd"] * seats, 2),
    }


def handle(request: Request) -> JSON:
    require_key(request)
    if request.method == "GET" and request.path == "/v1/airports":
        return search_airports(request)
    if request.method == "GET" and request.path == "/v1/flights/search":
        return search(request)
    if request.method == "GET" and request.path.startswith("/v1/flights/") and request.path.count("/") == 3:
        return details(request)
    if request.method == "POST" and request.path == "/v1/bookings":
        return book(request)
    raise ApiError(404, "not_found", f"no route {request.method} {request.path}")
