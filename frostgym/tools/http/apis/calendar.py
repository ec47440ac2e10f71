"""The calendar API: one user's work calendar for March and April 2024. Listing, event
lookup, free slots in working hours, creation (refused on overlap) and deletion. It
keeps no state: a created event is echoed with an id hashed from its content, and a
deletion only checks that the event exists."""

from __future__ import annotations

import datetime as dt
from functools import cache

from frostgym.core.seeding import derive_random
from frostgym.tools.http.apis.common import (
    JSON,
    ApiError,
    Request,
    body_field,
    date,
    integer,
    require_key,
    required,
    short_hash,
)

FIRST_DAY = dt.date(2024, 3, 1)
LAST_DAY = dt.date(2024, 4, 30)
DAY_START, DAY_END = 9 * 60, 17 * 60
TITLES = (
    "Team standup",
    "1:1 with Priya",
    "Design review",
    "Lunch with Marco",
    "Budget sync",
    "Customer call: Acme",
    "Sprint planning",
    "Interview: backend candidate",
    "Dentist appointment",
    "Quarterly roadmap",
    "Vendor demo",
    "Security training",
)
ROOMS = ("Fjord", "Glacier", "Aurora", "Video call")


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(text: str, name: str) -> int:
    try:
        parsed = dt.time.fromisoformat(text)
    except ValueError:
        raise ApiError(400, "invalid_field", f"{name!r} must be a time HH:MM, got {text!r}") from None
    return parsed.hour * 60 + parsed.minute


@cache
def events_on(when: dt.date) -> tuple[JSON, ...]:
    if when.weekday() >= 5:
        return ()
    rng = derive_random("calendar", when.isoformat())
    count = rng.randint(2, 4)
    titles = rng.sample(TITLES, count)
    slots = sorted(rng.sample(range(DAY_START, DAY_END - 60, 30), count))
    events: list[JSON] = []
    busy_until = DAY_START
    for title, start in zip(titles, slots, strict=True):
        start = max(start, busy_until)
        length = rng.choice((30, 30, 60, 60, 90))
        end = min(start + length, DAY_END)
        if end - start < 30:
            continue
        events.append(
            {
                "id": "evt_" + short_hash("calendar", when.isoformat(), title),
                "title": title,
                "date": when.isoformat(),
                "start": _hhmm(start),
                "end": _hhmm(end),
                "location": rng.choice(ROOMS),
            }
        )
        busy_until = end
    return tuple(events)


@cache
def _index() -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    when = FIRST_DAY
    while when <= LAST_DAY:
        out.update({e["id"]: e for e in events_on(when)})
        when += dt.timedelta(days=1)
    return out


def find_event(event_id: str) -> JSON:
    event = _index().get(event_id)
    if event is None:
        raise ApiError(404, "event_not_found", f"no event with id {event_id!r}")
    return dict(event)


def free_windows(when: dt.date, minimum: int) -> list[JSON]:
    windows: list[JSON] = []
    cursor = DAY_START
    for event in [*events_on(when), {"start": _hhmm(DAY_END), "end": _hhmm(DAY_END)}]:
        start = _minutes(event["start"], "start")
        if start - cursor >= minimum:
            windows.append({"start": _hhmm(cursor), "end": _hhmm(start), "minutes": start - cursor})
        cursor = max(cursor, _minutes(event["end"], "end"))
    return windows


def list_events(request: Request) -> JSON:
    when = date(required(request.query, "date"), "date", FIRST_DAY, LAST_DAY)
    return {"date": when.isoformat(), "events": [dict(e) for e in events_on(when)]}


def free_slots(request: Request) -> JSON:
    when = date(required(request.query, "date"), "date", FIRST_DAY, LAST_DAY)
    minimum = integer(request.query.get("duration_min", "30"), "duration_min", 15, 480)
    return {
        "date": when.isoformat(),
        "working_hours": {"start": _hhmm(DAY_START), "end": _hhmm(DAY_END)},
        "duration_min": minimum,
        "free": free_windows(when, minimum),
    }


def create_event(request: Request) -> JSON:
    title = body_field(request.body, "title", str).strip()
    when = date(body_field(request.body, "date", str), "date", FIRST_DAY, LAST_DAY)
    start = _minutes(body_field(request.body, "start", str), "start")
    end = _minutes(body_field(request.body, "end", str), "end")
    if end <= start:
        raise ApiError(400, "invalid_time_range", "'end' must be after 'start'")
    for event in events_on(when):
        if start < _minutes(event["end"], "end") and _minutes(event["start"], "start") < end:
            raise ApiError(409, "conflict", f"overlaps {event['title']!r} ({event['start']}-{event['end']})")
    location = request.body.get("location") or "Video call"
    return {
        "id": "evt_" + short_hash("created", title, when.isoformat(), start, end, location),
        "title": title,
        "date": when.isoformat(),
        "start": _hhmm(start),
        "end": _hhmm(end),
        "location": str(location),
        "status": "created",
    }


def handle(request: Request) -> JSON:
    require_key(request)
    if request.path == "/v1/events" and request.method == "GET":
        return list_events(request)
    if request.path == "/v1/events" and request.method == "POST":
        return create_event(request)
    if request.path == "/v1/free_slots" and request.method == "GET":
        return free_slots(request)
    if request.path.startswith("/v1/events/") and request.path.count("/") == 3:
        event = find_event(request.path.rsplit("/", 1)[-1])
        if request.method == "GET":
            return event
        if request.method == "DELETE":
            return {"id": event["id"], "deleted": True, "title": event["title"]}
    raise ApiError(404, "not_found", f"no route {request.method} {request.path}")
