"""Writes ``fixtures/tools_http/tasks.json``: the HTTP tool tasks, from templates.

Run ``python -m frostgym.tools.http.taskgen`` after changing the world or a template,
then re-record the cassettes (``python -m frostgym.tools.http.record``) and update the
lock. Each template draws its parameters from its own ``random.Random`` and asks the
APIs in-process (``world_call``) what the gold calls return, so every gold answer is
taken from the data the cassettes will hold. The file is committed; nothing here runs
at episode time.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from frostgym.tools.http.apis.calendar import events_on
from frostgym.tools.http.apis.currency import USD_RATES
from frostgym.tools.http.apis.flights import AIRCRAFT, AIRPORTS
from frostgym.tools.http.apis.parcels import STATUSES, parcels
from frostgym.tools.http.apis.weather import CITIES
from frostgym.tools.http.clients import TOOLS
from frostgym.tools.http.inprocess import world_call

JSON = dict[str, Any]
TASKS_FILE = Path(__file__).resolve().parents[2] / "fixtures" / "tools_http" / "tasks.json"
SEED = 20240315
WEEKDAYS = [d for d in (dt.date(2024, 3, 18) + dt.timedelta(days=n) for n in range(19)) if d.weekday() < 5]
CITY_NAMES = [c.name for c in CITIES]
CODES = [a.code for a in AIRPORTS]
STATUS_WORDS = {s: s.replace("_", " ") for s in STATUSES}


class Builder:
    """Collects one task: gold calls by round, what they returned, the check."""

    def __init__(self, task_id: str, kind: str, prompt: str, difficulty: str) -> None:
        self.task = {"id": task_id, "kind": kind, "prompt": prompt, "difficulty": difficulty}
        self.rounds: list[list[JSON]] = []

    def round(self, *calls: tuple[str, JSON, list[str] | None]) -> list[Any]:
        """Make one round of (parallel) gold calls; returns their JSON bodies."""
        results, gold = [], []
        for name, arguments, match in calls:
            status, body = world_call(name, arguments)
            if status >= 500:
                raise RuntimeError(f"{self.task['id']}: gold call {name} failed with {status}")
            entry: JSON = {"name": name, "arguments": arguments}
            if match is not None:
                entry["match"] = match
            gold.append(entry)
            results.append(body)
        self.rounds.append(gold)
        return results

    def done(self, answer: str, checks: list[JSON], rng: random.Random, extra_tools: int = 3) -> JSON:
        needed = {c["name"] for r in self.rounds for c in r}
        others = [t.name for t in TOOLS if t.name not in needed]
        offered = needed | set(rng.sample(others, extra_tools))
        return {
            **self.task,
            "tools": [t.name for t in TOOLS if t.name in offered],
            "gold_calls": [c for r in self.rounds for c in r],
            "gold_rounds": [len(r) for r in self.rounds],
            "answer": f"<answer>{answer}</answer>",
            "check": checks,
        }


def num(value: float, tol: float, forbid: list[float] | None = None) -> JSON:
    check: JSON = {"type": "number", "value": value, "tol": tol}
    if forbid:
        check["forbid"] = forbid
    return check


def text(any_of: list[str], forbid: list[str] | None = None) -> JSON:
    check: JSON = {"type": "text", "any_of": any_of}
    if forbid:
        check["forbid"] = forbid
    return check


def times(*values: str) -> list[str]:
    """A time and its spelling without the leading zero ("09:30", "9:30")."""
    out: list[str] = []
    for value in values:
        out += [value, value[1:]] if value.startswith("0") else [value]
    return out


def nice_date(day: dt.date) -> str:
    return f"{day:%A} {day:%B} {day.day}, {day.year}"


# -- single call --------------------------------------------------------------------------------
def weather_current(rng: random.Random) -> Iterator[JSON]:
    for city in CITY_NAMES:
        b = Builder(f"weather-current-{city.lower().replace(' ', '-')}", "single", "", "easy")
        phrasing = rng.choice(
            ["What is the temperature in {c} right now, in Celsius?", "How warm is it in {c} at the moment (°C)?"]
        )
        b.task["prompt"] = phrasing.format(c=city)
        (body,) = b.round(("get_current_weather", {"city": city}, None))
        t = body["temperature_c"]
        yield b.done(f"It is currently {t} °C in {city}.", [num(t, 0.05)], rng)


def weather_forecast(rng: random.Random) -> Iterator[JSON]:
    for city in rng.sample(CITY_NAMES, 12):
        n = rng.randint(1, 5)
        when = dt.date(2024, 3, 15) + dt.timedelta(days=n)
        b = Builder(f"weather-forecast-{city.lower().replace(' ', '-')}-{n}", "single", "", "easy")
        b.task["prompt"] = f"What is the forecast high temperature in {city} on {nice_date(when)}?"
        (body,) = b.round(("get_weather_forecast", {"city": city, "days": n}, ["city"]))
        high = body["days"][n - 1]["high_c"]
        yield b.done(f"The forecast high in {city} on {when} is {high} °C.", [num(high, 0.05)], rng)


def weather_history(rng: random.Random) -> Iterator[JSON]:
    for city in rng.sample(CITY_NAMES, 12):
        when = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 73))
        b = Builder(f"weather-history-{city.lower().replace(' ', '-')}-{when}", "single", "", "easy")
        b.task["prompt"] = f"How much precipitation (in mm) fell in {city} on {when}?"
        (body,) = b.round(("get_weather_history", {"city": city, "date": when.isoformat()}, None))
        mm = body["precip_mm"]
        yield b.done(f"{city} had {mm} mm of precipitation on {when}.", [num(mm, 0.05)], rng)


def currency_convert(rng: random.Random) -> Iterator[JSON]:
    codes = list(USD_RATES)
    for i in range(16):
        source, target = rng.sample(codes, 2)
        amount = rng.choice([25, 50, 100, 120, 250, 500, 1000, 75.5, 1999.99, 42])
        b = Builder(f"fx-convert-{i:02d}-{source}-{target}", "single", "", "easy")
        b.task["prompt"] = f"How much is {amount} {source} in {target} at today's rate?"
        args = {"amount": amount, "from_currency": source, "to_currency": target}
        (body,) = b.round(("convert_currency", args, None))
        yield b.done(f"{amount} {source} is {body['result']} {target}.", [num(body["result"], 0.01)], rng)


def currency_rate(rng: random.Random) -> Iterator[JSON]:
    codes = list(USD_RATES)
    for i in range(10):
        base, target = rng.sample(codes, 2)
        b = Builder(f"fx-rate-{i:02d}-{base}-{target}", "single", "", "easy")
        b.task["prompt"] = f"What is today's exchange rate from {base} to {target} (how many {target} per 1 {base})?"
        (body,) = b.round(("get_exchange_rates", {"base": base}, None))
        rate = body["rates"][target]
        yield b.done(f"1 {base} = {rate} {target}.", [num(rate, max(1e-4, rate * 1e-4))], rng)


def currency_history(rng: random.Random) -> Iterator[JSON]:
    codes = [c for c in USD_RATES if c != "USD"]
    for i in range(10):
        target = rng.choice(codes)
        when = dt.date(2024, 1, 2) + dt.timedelta(days=rng.randint(0, 70))
        b = Builder(f"fx-history-{i:02d}-{target}-{when}", "single", "", "medium")
        b.task["prompt"] = f"What was the USD to {target} exchange rate on {when}?"
        (body,) = b.round(("get_historical_rates", {"date": when.isoformat(), "base": "USD"}, ["date"]))
        rate = body["rates"][target]
        yield b.done(f"On {when}, 1 USD was {rate} {target}.", [num(rate, max(1e-4, rate * 1e-4))], rng)


UNIT_QUESTIONS = [
    (42.195, "km", "mi", "How many miles is a marathon of {v} km?"),
    (180, "cm", "ft", "How tall is {v} cm in feet?"),
    (5, "mi", "km", "How many kilometres are {v} miles?"),
    (12, "in", "cm", "How many centimetres is {v} inches?"),
    (70, "kg", "lb", "What is {v} kg in pounds?"),
    (16, "oz", "g", "How many grams are {v} ounces?"),
    (11, "st", "kg", "How many kilograms is {v} stone?"),
    (2.5, "t", "lb", "How many pounds are {v} tonnes?"),
    (1, "gal", "l", "How many litres are in {v} US gallon?"),
    (3, "cup", "ml", "How many millilitres are {v} US cups?"),
    (350, "F", "C", "An oven is set to {v} °F. What is that in °C?"),
    (-40, "C", "F", "What is {v} °C in Fahrenheit?"),
    (300, "K", "C", "What is {v} K in degrees Celsius?"),
    (10, "nmi", "km", "How many kilometres are {v} nautical miles?"),
    (500, "ml", "floz", "How many US fluid ounces are in {v} ml?"),
    (100, "yd", "m", "How many metres is {v} yards?"),
]


def units_convert(rng: random.Random) -> Iterator[JSON]:
    for i, (value, source, target, prompt) in enumerate(UNIT_QUESTIONS):
        b = Builder(f"units-{i:02d}-{source}-{target}", "single", prompt.format(v=value), "easy")
        (body,) = b.round(("convert_units", {"value": value, "from_unit": source, "to_unit": target}, None))
        result = body["result"]
        tol = max(0.01, abs(result) * 2e-3)
        yield b.done(f"{value} {source} is {result} {target}.", [num(result, tol)], rng)


def parcel_status(rng: random.Random) -> Iterator[JSON]:
    table = parcels()
    for number in sorted(table)[:10]:
        b = Builder(f"parcel-status-{number}", "single", f"What is the current status of my parcel {number}?", "easy")
        (body,) = b.round(("track_parcel", {"tracking_number": number}, None))
        status = body["status"]
        words = STATUS_WORDS[status]
        forbid = [STATUS_WORDS[s] for s in STATUSES if s != status and STATUS_WORDS[s] not in words]
        yield b.done(f"Parcel {number} is {words}.", [text([status, words], forbid)], rng)


def parcel_eta(rng: random.Random) -> Iterator[JSON]:
    table = parcels()
    waiting = [n for n in sorted(table) if table[n]["estimated_delivery"]]
    for number in waiting[-6:]:
        b = Builder(f"parcel-eta-{number}", "single", f"When is parcel {number} expected to be delivered?", "easy")
        (body,) = b.round(("track_parcel", {"tracking_number": number}, None))
        eta = dt.date.fromisoformat(body["estimated_delivery"])
        aliases = [eta.isoformat(), f"{eta:%B} {eta.day}", f"{eta.day} {eta:%B}", f"{eta:%b} {eta.day}"]
        yield b.done(f"Parcel {number} is expected on {eta.isoformat()}.", [text(aliases)], rng)


def parcel_missing(rng: random.Random) -> Iterator[JSON]:
    for number in ("FG0000000000", "FG1111111111", "FG9999999999"):
        b = Builder(f"parcel-missing-{number}", "single", f"Can you check where my parcel {number} is?", "medium")
        b.round(("track_parcel", {"tracking_number": number}, None))
        aliases = ["not found", "no parcel", "does not exist", "doesn't exist", "unknown tracking", "no record"]
        yield b.done(f"No parcel with tracking number {number} was found.", [text(aliases)], rng)


def calendar_count(rng: random.Random) -> Iterator[JSON]:
    for day in rng.sample(WEEKDAYS, 8):
        b = Builder(f"calendar-count-{day}", "single", f"How many events do I have on {nice_date(day)}?", "easy")
        (body,) = b.round(("list_events", {"date": day.isoformat()}, None))
        count = len(body["events"])
        yield b.done(f"You have {count} events on {day}.", [num(count, 0)], rng)


def calendar_event_time(rng: random.Random) -> Iterator[JSON]:
    for day in rng.sample(WEEKDAYS, 8):
        event = rng.choice(events_on(day))
        prompt = f"What time does my '{event['title']}' start on {nice_date(day)}?"
        b = Builder(f"calendar-time-{day}", "single", prompt, "easy")
        (body,) = b.round(("list_events", {"date": day.isoformat()}, None))
        start = next(e["start"] for e in body["events"] if e["title"] == event["title"])
        others = [e["start"] for e in body["events"] if e["start"] != start]
        yield b.done(f"It starts at {start}.", [text(times(start), times(*others))], rng)


def calendar_free(rng: random.Random) -> Iterator[JSON]:
    for day in rng.sample(WEEKDAYS, 8):
        minutes = rng.choice([60, 90, 120])
        prompt = f"When does my first free block of at least {minutes} minutes start on {nice_date(day)}?"
        b = Builder(f"calendar-free-{day}-{minutes}", "single", prompt, "medium")
        (body,) = b.round(("find_free_slots", {"date": day.isoformat(), "duration_min": minutes}, None))
        if not body["free"]:
            continue
        start = body["free"][0]["start"]
        others = [w["start"] for w in body["free"][1:]]
        yield b.done(
            f"Your first free {minutes}-minute block starts at {start}.", [text(times(start), times(*others))], rng
        )


def calendar_conflict(rng: random.Random) -> Iterator[JSON]:
    for day in rng.sample(WEEKDAYS, 5):
        event = events_on(day)[0]
        prompt = f"Please put a 'Coffee chat' in my calendar on {day} from {event['start']} to {event['end']}."
        b = Builder(f"calendar-conflict-{day}", "single", prompt, "medium")
        args = {"title": "Coffee chat", "date": day.isoformat(), "start": event["start"], "end": event["end"]}
        b.round(("create_event", args, None))
        aliases = ["conflict", "conflicts", "overlap", "overlaps", "clash", "clashes", "already booked", "already have"]
        yield b.done(f"I could not add it: it conflicts with '{event['title']}'.", [text(aliases)], rng)


def flight_seats(rng: random.Random) -> Iterator[JSON]:
    for _ in range(8):
        origin, destination = rng.sample(CODES, 2)
        day = dt.date(2024, 4, rng.randint(1, 30))
        _, body = world_call("search_flights", {"origin": origin, "destination": destination, "date": day.isoformat()})
        flight_id = rng.choice(body["flights"])["flight_id"]
        b = Builder(
            f"flight-seats-{flight_id}", "single", f"How many seats are left on flight offer {flight_id}?", "easy"
        )
        (details,) = b.round(("get_flight_details", {"flight_id": flight_id}, None))
        yield b.done(f"{details['seats_left']} seats are left.", [num(details["seats_left"], 0)], rng)


def airport_code(rng: random.Random) -> Iterator[JSON]:
    unique = [a for a in AIRPORTS if sum(x.city == a.city for x in AIRPORTS) == 1]
    for airport in rng.sample(unique, 8):
        prompt = f"What is the IATA code of the airport in {airport.city} that you can search flights from?"
        b = Builder(f"airport-code-{airport.code}", "single", prompt, "easy")
        b.round(("search_airports", {"query": airport.city}, None))
        forbid = [a.code for a in AIRPORTS if a.code != airport.code]
        yield b.done(f"The airport is {airport.name} ({airport.code}).", [text([airport.code], forbid)], rng)


def fx_usage(rng: random.Random) -> Iterator[JSON]:
    b = Builder("fx-usage", "single", "How many requests has my currency API account made today?", "easy")
    (body,) = b.round(("get_fx_usage", {}, None))
    yield b.done(
        f"The account has made {body['requests_today']} requests today.", [num(body["requests_today"], 0)], rng
    )
    b = Builder("fx-usage-quota", "single", "What is the daily request quota of my currency API plan?", "easy")
    (body,) = b.round(("get_fx_usage", {}, None))
    yield b.done(f"The quota is {body['requests_quota']} requests.", [num(body["requests_quota"], 0)], rng)


# -- multi-step ---------------------------------------------------------------------------------
def _route(rng: random.Random) -> tuple[str, str, dt.date]:
    origin, destination = rng.sample(CODES, 2)
    return origin, destination, dt.date(2024, 4, rng.randint(1, 30))


def _cheapest(flights: list[JSON]) -> JSON:
    return min(flights, key=lambda f: (f["price_usd"], f["flight_id"]))


def flight_aircraft(rng: random.Random) -> Iterator[JSON]:
    for _ in range(10):
        origin, destination, day = _route(rng)
        prompt = f"Find the cheapest flight from {origin} to {destination} on {day}. Which aircraft type operates it?"
        b = Builder(f"flight-aircraft-{origin}{destination}-{day}", "multi", prompt, "medium")
        (found,) = b.round(
            ("search_flights", {"origin": origin, "destination": destination, "date": day.isoformat()}, None)
        )
        cheapest = _cheapest(found["flights"])
        (details,) = b.round(("get_flight_details", {"flight_id": cheapest["flight_id"]}, None))
        forbid = [a for a in AIRCRAFT if a != details["aircraft"]]
        answer = f"The cheapest flight is {cheapest['flight_id']}; its aircraft is the {details['aircraft']}."
        yield b.done(answer, [text([details["aircraft"]], forbid)], rng)


PASSENGERS = ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Linus Pauling", "Mary Jackson")


def flight_booking(rng: random.Random) -> Iterator[JSON]:
    for _ in range(8):
        origin, destination, day = _route(rng)
        name = rng.choice(PASSENGERS)
        prompt = f"Book the cheapest flight from {origin} to {destination} on {day} for {name}. What is the booking id?"
        b = Builder(f"flight-book-{origin}{destination}-{day}", "multi", prompt, "hard")
        (found,) = b.round(
            ("search_flights", {"origin": origin, "destination": destination, "date": day.isoformat()}, None)
        )
        cheapest = _cheapest(found["flights"])
        (booking,) = b.round(
            ("book_flight", {"flight_id": cheapest["flight_id"], "passenger_name": name, "seats": 1}, None)
        )
        answer = f"Booked {cheapest['flight_id']} for {name}: booking id {booking['booking_id']}."
        yield b.done(answer, [text([booking["booking_id"]])], rng)


def flight_price_converted(rng: random.Random) -> Iterator[JSON]:
    for _ in range(8):
        origin, destination, day = _route(rng)
        target = rng.choice(["EUR", "GBP", "NOK", "JPY", "CHF", "SEK"])
        prompt = f"What does the cheapest flight from {origin} to {destination} on {day} cost in {target}?"
        b = Builder(f"flight-price-{origin}{destination}-{day}-{target}", "multi", prompt, "hard")
        (found,) = b.round(
            ("search_flights", {"origin": origin, "destination": destination, "date": day.isoformat()}, None)
        )
        price = _cheapest(found["flights"])["price_usd"]
        (converted,) = b.round(
            ("convert_currency", {"amount": price, "from_currency": "USD", "to_currency": target}, None)
        )
        answer = f"The cheapest flight costs {price} USD, which is {converted['result']} {target}."
        yield b.done(answer, [num(converted["result"], 0.01)], rng)


def weather_fahrenheit(rng: random.Random) -> Iterator[JSON]:
    for city in rng.sample(CITY_NAMES, 8):
        prompt = f"What is the current temperature in {city} in degrees Fahrenheit? Use the unit converter."
        b = Builder(f"weather-fahrenheit-{city.lower().replace(' ', '-')}", "multi", prompt, "medium")
        (now,) = b.round(("get_current_weather", {"city": city}, None))
        (conv,) = b.round(("convert_units", {"value": now["temperature_c"], "from_unit": "C", "to_unit": "F"}, None))
        answer = f"It is {conv['result']} °F in {city}."
        yield b.done(answer, [num(conv["result"], 0.05)], rng)


def calendar_schedule(rng: random.Random) -> Iterator[JSON]:
    titles = ("Focus time", "Call with Jonas", "Write quarterly report", "Code review", "Gym")
    for day in rng.sample(WEEKDAYS, 8):
        minutes = rng.choice([30, 60, 90])
        title = rng.choice(titles)
        prompt = f"Schedule '{title}' for {minutes} minutes in my first free slot on {day}. What is the new event's id?"
        b = Builder(f"calendar-schedule-{day}-{minutes}", "multi", prompt, "hard")
        (free,) = b.round(("find_free_slots", {"date": day.isoformat(), "duration_min": minutes}, None))
        if not free["free"]:
            continue
        start = free["free"][0]["start"]
        h, m = map(int, start.split(":"))
        end_min = h * 60 + m + minutes
        end = f"{end_min // 60:02d}:{end_min % 60:02d}"
        args = {"title": title, "date": day.isoformat(), "start": start, "end": end}
        (created,) = b.round(("create_event", args, None))
        answer = f"Created '{title}' on {day} from {start} to {end}, id {created['id']}."
        yield b.done(answer, [text([created["id"]])], rng)


def calendar_delete(rng: random.Random) -> Iterator[JSON]:
    for day in rng.sample(WEEKDAYS, 6):
        event = rng.choice(events_on(day))
        prompt = f"Cancel my '{event['title']}' on {day} and tell me the id of the deleted event."
        b = Builder(f"calendar-delete-{day}", "multi", prompt, "medium")
        (listing,) = b.round(("list_events", {"date": day.isoformat()}, None))
        event_id = next(e["id"] for e in listing["events"] if e["title"] == event["title"])
        b.round(("delete_event", {"event_id": event_id}, None))
        others = [e["id"] for e in listing["events"] if e["id"] != event_id]
        yield b.done(f"Deleted '{event['title']}' (id {event_id}).", [text([event_id], others)], rng)


def calendar_location(rng: random.Random) -> Iterator[JSON]:
    for day in rng.sample(WEEKDAYS, 6):
        event = rng.choice(events_on(day))
        prompt = f"Where is my '{event['title']}' on {day} taking place? Look the event up by its id."
        b = Builder(f"calendar-location-{day}", "multi", prompt, "medium")
        (listing,) = b.round(("list_events", {"date": day.isoformat()}, None))
        event_id = next(e["id"] for e in listing["events"] if e["title"] == event["title"])
        (detail,) = b.round(("get_event", {"event_id": event_id}, None))
        yield b.done(f"It takes place in {detail['location']}.", [text([detail["location"]])], rng)


def parcel_destination_weather(rng: random.Random) -> Iterator[JSON]:
    table = parcels()
    for number in rng.sample(sorted(table), 6):
        prompt = f"What is the current temperature (°C) in the destination city of parcel {number}?"
        b = Builder(f"parcel-weather-{number}", "multi", prompt, "medium")
        (parcel,) = b.round(("track_parcel", {"tracking_number": number}, None))
        city = parcel["destination_city"]
        (now,) = b.round(("get_current_weather", {"city": city}, None))
        answer = f"The parcel is going to {city}, where it is {now['temperature_c']} °C."
        yield b.done(answer, [num(now["temperature_c"], 0.05), text([city])], rng)


# -- parallel -----------------------------------------------------------------------------------
def weather_warmest(rng: random.Random) -> Iterator[JSON]:
    for i in range(10):
        cities = rng.sample(CITY_NAMES, 3)
        prompt = f"Which of these cities is warmest right now: {', '.join(cities)}?"
        b = Builder(f"weather-warmest-{i:02d}", "parallel", prompt, "medium")
        bodies = b.round(*[("get_current_weather", {"city": c}, None) for c in cities])
        temps = {body["city"]: body["temperature_c"] for body in bodies}
        if len(set(temps.values())) < 3:
            continue
        best = max(temps, key=lambda c: temps[c])
        forbid = [c for c in cities if c != best]
        yield b.done(f"{best} is the warmest at {temps[best]} °C.", [text([best], forbid)], rng)


def currency_many(rng: random.Random) -> Iterator[JSON]:
    for i in range(8):
        source = rng.choice(["USD", "EUR", "GBP"])
        targets = rng.sample([c for c in USD_RATES if c != source], 3)
        amount = rng.choice([100, 250, 1000, 50])
        prompt = f"Convert {amount} {source} into {', '.join(targets[:2])} and {targets[2]}."
        b = Builder(f"fx-many-{i:02d}-{source}", "parallel", prompt, "medium")
        calls = [
            ("convert_currency", {"amount": amount, "from_currency": source, "to_currency": t}, None) for t in targets
        ]
        bodies = b.round(*calls)
        parts = [f"{body['result']} {body['to']}" for body in bodies]
        checks = [num(body["result"], 0.01) for body in bodies]
        yield b.done(f"{amount} {source} is " + ", ".join(parts) + ".", checks, rng)


def forecast_rainiest(rng: random.Random) -> Iterator[JSON]:
    made = 0
    while made < 8:
        pair = rng.sample(CITY_NAMES, 2)
        prompt = f"Tomorrow, will {pair[0]} or {pair[1]} get more rain?"
        b = Builder(f"weather-rainier-{pair[0]}-{pair[1]}".lower().replace(" ", "-"), "parallel", prompt, "medium")
        bodies = b.round(*[("get_weather_forecast", {"city": c, "days": 1}, ["city"]) for c in pair])
        rain = {body["city"]: body["days"][0]["precip_mm"] for body in bodies}
        if rain[pair[0]] == rain[pair[1]]:
            continue
        wetter = max(rain, key=lambda c: rain[c])
        other = pair[1] if wetter == pair[0] else pair[0]
        answer = f"{wetter} will get more rain ({rain[wetter]} mm vs {rain[other]} mm)."
        made += 1
        yield b.done(answer, [text([wetter], [other])], rng)


# -- no call needed -----------------------------------------------------------------------------
def no_call(rng: random.Random) -> Iterator[JSON]:
    for i in range(6):
        count, minutes = rng.randint(2, 6), rng.choice([15, 25, 45, 50])
        prompt = f"If I have {count} meetings of {minutes} minutes each, how many minutes is that in total?"
        b = Builder(f"nocall-minutes-{i:02d}", "none", prompt, "easy")
        yield b.done(f"That is {count * minutes} minutes.", [num(count * minutes, 0)], rng)
    for i in range(6):
        price, pct = rng.choice([80, 120, 240, 64, 150]), rng.choice([10, 15, 20, 25])
        prompt = f"A ticket costs {price} USD and I get a {pct}% discount. What do I pay, in USD?"
        b = Builder(f"nocall-discount-{i:02d}", "none", prompt, "easy")
        paid = round(price * (100 - pct) / 100, 2)
        yield b.done(f"You pay {paid} USD.", [num(paid, 0.01)], rng)
    for i in range(6):
        first = dt.date(2024, 3, rng.randint(1, 20))
        last = first + dt.timedelta(days=rng.randint(3, 30))
        prompt = f"How many days are there from {first} to {last}?"
        b = Builder(f"nocall-days-{i:02d}", "none", prompt, "easy")
        yield b.done(f"There are {(last - first).days} days.", [num((last - first).days, 0)], rng)


TEMPLATES: tuple[Callable[[random.Random], Iterator[JSON]], ...] = (
    weather_current,
    weather_forecast,
    weather_history,
    currency_convert,
    currency_rate,
    currency_history,
    units_convert,
    parcel_status,
    parcel_eta,
    parcel_missing,
    calendar_count,
    calendar_event_time,
    calendar_free,
    calendar_conflict,
    flight_seats,
    airport_code,
    fx_usage,
    flight_aircraft,
    flight_booking,
    flight_price_converted,
    weather_fahrenheit,
    calendar_schedule,
    calendar_delete,
    calendar_location,
    parcel_destination_weather,
    weather_warmest,
    currency_many,
    forecast_rainiest,
    no_call,
)


def generate() -> list[JSON]:
    tasks: list[JSON] = []
    ids: set[str] = set()
    prompts: set[str] = set()
    for template in TEMPLATES:
        rng = random.Random(f"{SEED}:{template.__name__}")
        for task in template(rng):
            if task["id"] in ids or task["prompt"] in prompts:
                continue  # a repeated draw: keep the first
            ids.add(task["id"])
            prompts.add(task["prompt"])
            tasks.append(task)
    return tasks


def main(argv: list[str] | None = None) -> int:
    tasks = generate()
    data = {"version": 1, "about": "HTTP tool tasks; written by frostgym.tools.http.taskgen", "tasks": tasks}
    TASKS_FILE.parent.mkdir(parents=True, exist_ok=True)
    TASKS_FILE.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {len(tasks)} tasks to {TASKS_FILE}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
