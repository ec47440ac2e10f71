"""The unit-conversion API: length, mass, volume and temperature. Public (no key), as
many such APIs are, so the world also has tools whose requests carry no secret."""

from __future__ import annotations

from frostgym.tools.http.apis.common import JSON, ApiError, Request, number, required

#: Size of each unit in its kind's base unit (metre, kilogram, litre).
FACTORS: dict[str, dict[str, float]] = {
    "length": {
        "m": 1.0,
        "km": 1000.0,
        "cm": 0.01,
        "mm": 0.001,
        "mi": 1609.344,
        "yd": 0.9144,
        "ft": 0.3048,
        "in": 0.0254,
        "nmi": 1852.0,
    },
    "mass": {"kg": 1.0, "g": 0.001, "mg": 1e-6, "t": 1000.0, "lb": 0.45359237, "oz": 0.028349523125, "st": 6.35029318},
    "volume": {
        "l": 1.0,
        "ml": 0.001,
        "m3": 1000.0,
        "gal": 3.785411784,
        "qt": 0.946352946,
        "cup": 0.2365882365,
        "floz": 0.0295735295625,
    },
}
TEMPERATURE = ("C", "F", "K")
NAMES = {
    "m": "metre", "km": "kilometre", "cm": "centimetre", "mm": "millimetre", "mi": "mile", "yd": "yard",
    "ft": "foot", "in": "inch", "nmi": "nautical mile", "kg": "kilogram", "g": "gram", "mg": "milligram",
    "t": "tonne", "lb": "pound", "oz": "ounce", "st": "stone", "l": "litre", "ml": "millilitre",
    "m3": "cubic metre", "gal": "US gallon", "qt": "US quart", "cup": "US cup", "floz": "US fluid ounce",
    "C": "degree Celsius", "F": "degree Fahrenheit", "K": "kelvin",
}  # fmt: skip
KINDS = (*FACTORS, "temperature")


def kind_of(unit: str) -> str:
    if unit in TEMPERATURE:
        return "temperature"
    for kind, table in FACTORS.items():
        if unit in table:
            return kind
    raise ApiError(400, "unknown_unit", f"unknown unit {unit!r}; see /v1/units")


def to_kelvin(value: float, unit: str) -> float:
    return {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[unit]


def from_kelvin(value: float, unit: str) -> float:
    return {"C": value - 273.15, "F": (value - 273.15) * 9 / 5 + 32, "K": value}[unit]


def convert_value(value: float, source: str, target: str) -> float:
    kind = kind_of(source)
    if kind_of(target) != kind:
        raise ApiError(400, "incompatible_units", f"cannot convert {kind} ({source}) to {kind_of(target)} ({target})")
    if kind == "temperature":
        result = from_kelvin(to_kelvin(value, source), target)
    else:
        result = value * FACTORS[kind][source] / FACTORS[kind][target]
    return float(f"{result:.6g}")


def convert(request: Request) -> JSON:
    value = number(required(request.query, "value"), "value")
    source, target = required(request.query, "from"), required(request.query, "to")
    result = convert_value(value, source, target)
    return {"value": value, "from": source, "to": target, "kind": kind_of(source), "result": result}


def units(request: Request) -> JSON:
    kind = request.query.get("kind", "").strip().lower()
    if kind and kind not in KINDS:
        raise ApiError(400, "invalid_parameter", f"'kind' must be one of {', '.join(KINDS)}")
    chosen = [kind] if kind else list(KINDS)
    listing = {k: [{"symbol": u, "name": NAMES[u]} for u in (TEMPERATURE if k == "temperature" else FACTORS[k])]
               for k in chosen}  # fmt: skip
    return {"units": listing}


def handle(request: Request) -> JSON:
    if request.method == "GET" and request.path == "/v1/convert":
        return convert(request)
    if request.method == "GET" and request.path == "/v1/units":
        return units(request)
    raise ApiError(404, "not_found", f"no route {request.method} {request.path}")
