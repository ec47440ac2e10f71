"""The parcel-tracking API: a fixed table of shipments (drawn once from a private RNG)
with their scan history, and the list of carriers."""

from __future__ import annotations

import datetime as dt
from functools import cache

from frostgym.core.seeding import derive_random
from frostgym.tools.http.apis.common import JSON, TODAY, ApiError, Request, require_key
from frostgym.tools.http.apis.weather import CITIES

CARRIERS = (
    ("postnord", "PostNord"),
    ("dhl", "DHL Express"),
    ("ups", "UPS"),
    ("fedex", "FedEx"),
    ("royalmail", "Royal Mail"),
)
STATUSES = ("label_created", "in_transit", "out_for_delivery", "delivered", "exception")
SCANS = {
    "label_created": "Shipping label created",
    "in_transit": "Departed sorting facility",
    "out_for_delivery": "Out for delivery",
    "delivered": "Delivered to recipient",
    "exception": "Delivery attempt failed: recipient not available",
}
PARCEL_COUNT = 16


@cache
def parcels() -> dict[str, JSON]:
    rng = derive_random("parcels", "v1")
    table: dict[str, JSON] = {}
    for n in range(PARCEL_COUNT):
        number = f"FG{rng.randint(10**9, 10**10 - 1)}"
        slug, carrier = CARRIERS[n % len(CARRIERS)]
        status = STATUSES[n % len(STATUSES)]
        origin, destination = rng.sample(CITIES, 2)
        shipped = TODAY - dt.timedelta(days=rng.randint(2, 9))
        stages = STATUSES[: STATUSES.index(status) + 1] if status != "exception" else (*STATUSES[:3], "exception")
        events = []
        for i, stage in enumerate(stages):
            when = dt.datetime.combine(
                shipped + dt.timedelta(days=i), dt.time(8 + rng.randint(0, 9), 5 * rng.randint(0, 11))
            )
            place = origin.name if i == 0 else (destination.name if i >= 2 else "Hub " + rng.choice("ABCDE"))
            events.append({"time": when.strftime("%Y-%m-%dT%H:%M"), "location": place, "description": SCANS[stage]})
        delivered = status == "delivered"
        table[number] = {
            "tracking_number": number,
            "carrier": carrier,
            "carrier_code": slug,
            "status": status,
            "origin_city": origin.name,
            "destination_city": destination.name,
            "weight_kg": round(rng.uniform(0.2, 14.0), 2),
            "estimated_delivery": None if delivered else (TODAY + dt.timedelta(days=rng.randint(0, 4))).isoformat(),
            "delivered_at": events[-1]["time"] if delivered else None,
            "events": list(reversed(events)),
        }
    return table


def track(number: str) -> JSON:
    parcel = parcels().get(number.strip().upper())
    if parcel is None:
        raise ApiError(404, "parcel_not_found", f"no parcel with tracking number {number!r}")
    return dict(parcel)


def handle(request: Request) -> JSON:
    require_key(request)
    if request.method == "GET" and request.path == "/v1/carriers":
        return {"carriers": [{"code": c, "name": n} for c, n in CARRIERS]}
    if request.method == "GET" and request.path.startswith("/v1/parcels/") and request.path.count("/") == 3:
        return track(request.path.rsplit("/", 1)[-1])
    raise ApiError(404, "not_found", f"no route {request.method} {request.path}")
