"""Templated questions for the ``train`` split: seeded, unbounded, and never equal to a
hand-written question (the source rejects any collision).

Each template draws its parameters from the database itself, with queries that read in
key order, so a seed picks the same values on every machine. A template raises
``ValueError`` when a draw gives an empty answer, and the source moves to the next draw.
A query that does not run to its end (an error, the deadline, a signal) must not look
like an empty answer, or the task under an id would depend on the machine's load or on
a Ctrl-C: it raises ``RuntimeError`` (the source does not catch it) or, for a signal, the
signal's own exception. Template queries use the long trusted deadline.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from frostgym.core.tasks import Draft
from frostgym.sql.connections import shared_database
from frostgym.sql.executor import TRUSTED_TIMEOUT_S

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@cache
def _values(database: str, sql: str) -> tuple[tuple[Any, ...], ...]:
    result = shared_database(database).run(sql, timeout_s=TRUSTED_TIMEOUT_S)
    if not result.ok or not result.rows:
        raise RuntimeError(f"template parameter query failed on {database}: {sql} ({result.error})")
    return result.rows


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _draft(database: str, question: str, sql: str, difficulty: str, features: tuple[str, ...]) -> Draft:
    result = shared_database(database).run(sql, timeout_s=TRUSTED_TIMEOUT_S)
    if not result.ok:  # not an empty answer: rejecting the draw would change the task
        raise RuntimeError(f"template query failed on {database} ({result.status}: {result.error}): {sql}")
    if not result.rows or all(v is None for row in result.rows for v in row):
        raise ValueError("empty answer")  # the source rejects this draw
    return Draft(
        prompt=question,
        answer=sql,
        metadata={"database": database, "features": list(features), "template": True},
        difficulty=difficulty,
        tags=features,
    )


@dataclass(frozen=True)
class Template:
    """One train-question template: the database it asks about, its difficulty and SQL
    features (which set its level, ``frostgym.envs.sql.tasks.question_level``), and
    ``write``, which draws its parameters from ``rng`` and returns the question and its gold
    query. Calling it makes the draft: ``ValueError`` for an empty answer (see ``_draft``)."""

    database: str
    difficulty: str
    features: tuple[str, ...]
    write: Callable[[random.Random], tuple[str, str]]

    def __call__(self, rng: random.Random) -> Draft:
        question, sql = self.write(rng)
        return _draft(self.database, question, sql, self.difficulty, self.features)


def template(
    database: str, difficulty: str, *features: str
) -> Callable[[Callable[[random.Random], tuple[str, str]]], Template]:
    """Declare a function ``rng -> (question, sql)`` a ``Template`` of ``database``."""

    def declare(write: Callable[[random.Random], tuple[str, str]]) -> Template:
        return Template(database, difficulty, features, write)

    return declare


@template("chinook", "medium", "aggregate", "join")
def album_track_count(rng: random.Random) -> tuple[str, str]:
    (title,) = rng.choice(_values("chinook", "SELECT title FROM album ORDER BY id"))
    return (
        f"How many tracks are on the album titled {title!r}?",
        f"SELECT COUNT(*) FROM track t JOIN album a ON a.id = t.album_id WHERE a.title = {_quote(title)}",
    )


@template("chinook", "medium", "join", "order_limit")
def artist_albums(rng: random.Random) -> tuple[str, str]:
    (name,) = rng.choice(
        _values("chinook", "SELECT name FROM artist WHERE id IN (SELECT artist_id FROM album) ORDER BY id")
    )
    return (
        f"List the titles of all albums by {name}, in alphabetical order.",
        f"SELECT a.title FROM album a JOIN artist ar ON ar.id = a.artist_id WHERE ar.name = {_quote(name)} "
        "ORDER BY a.title",
    )


@template("chinook", "medium", "aggregate", "join")
def country_revenue(rng: random.Random) -> tuple[str, str]:
    (country,) = rng.choice(_values("chinook", "SELECT DISTINCT country FROM customer ORDER BY country"))
    return (
        f"What is the total amount invoiced to customers located in {country}, rounded to 2 decimal places?",
        "SELECT ROUND(SUM(i.total), 2) FROM invoice i JOIN customer c ON c.id = i.customer_id "
        f"WHERE c.country = {_quote(country)}",
    )


@template("chinook", "medium", "aggregate", "join")
def genre_long_tracks(rng: random.Random) -> tuple[str, str]:
    (genre,) = rng.choice(_values("chinook", "SELECT name FROM genre ORDER BY id"))
    minutes = rng.randint(2, 8)
    return (
        f"How many {genre} tracks are longer than {minutes} minutes?",
        f"SELECT COUNT(*) FROM track t JOIN genre g ON g.id = t.genre_id WHERE g.name = {_quote(genre)} "
        f"AND t.milliseconds > {minutes * 60_000}",
    )


@template("chinook", "hard", "join", "group_by", "order_limit")
def top_genres(rng: random.Random) -> tuple[str, str]:
    n = rng.randint(2, 10)
    return (
        f"Which {n} genres have the most tracks? Give each genre's name and its number of tracks, "
        "ordered by the number of tracks from most to fewest, then by genre name.",
        "SELECT g.name, COUNT(*) AS n FROM track t JOIN genre g ON g.id = t.genre_id GROUP BY g.id "
        f"ORDER BY n DESC, g.name LIMIT {n}",
    )


@template("cars", "easy", "aggregate", "null")
def make_horsepower(rng: random.Random) -> tuple[str, str]:
    (make,) = rng.choice(_values("cars", "SELECT DISTINCT make FROM car WHERE horsepower IS NOT NULL ORDER BY make"))
    return (
        f"What is the average horsepower of cars made by {make}, rounded to 1 decimal place, "
        "ignoring cars with unknown horsepower?",
        f"SELECT ROUND(AVG(horsepower), 1) FROM car WHERE make = {_quote(make)} AND horsepower IS NOT NULL",
    )


@template("cars", "medium", "join", "order_limit")
def origin_year_cars(rng: random.Random) -> tuple[str, str]:
    origin, year = rng.choice(
        _values(
            "cars", "SELECT DISTINCT o.name, c.model_year FROM car c JOIN origin o ON o.id = c.origin_id ORDER BY 1, 2"
        )
    )
    return (
        f"List the names of the cars from {origin} with model year {year}, in alphabetical order "
        "(repeat a name if several cars share it).",
        f"SELECT c.name FROM car c JOIN origin o ON o.id = c.origin_id WHERE o.name = {_quote(origin)} "
        f"AND c.model_year = {year} ORDER BY c.name",
    )


@template("weather", "easy", "aggregate", "date")
def weather_days(rng: random.Random) -> tuple[str, str]:
    year = rng.randint(2012, 2015)
    (weather,) = rng.choice(_values("weather", "SELECT DISTINCT weather FROM daily_weather ORDER BY weather"))
    return (
        f"On how many days in {year} was the weather in Seattle recorded as {weather}?",
        f"SELECT COUNT(*) FROM daily_weather WHERE weather = {_quote(weather)} AND strftime('%Y', date) = '{year}'",
    )


@template("weather", "easy", "aggregate", "date")
def month_max_temp(rng: random.Random) -> tuple[str, str]:
    year, month = rng.randint(2012, 2015), rng.randint(1, 12)
    return (
        f"What was the highest daily maximum temperature, in degrees Celsius, in Seattle in {_MONTHS[month - 1]} "
        f"{year}?",
        f"SELECT MAX(temp_max_c) FROM daily_weather WHERE strftime('%Y-%m', date) = '{year}-{month:02d}'",
    )


@template("economy", "medium", "join", "date")
def stock_price_month(rng: random.Random) -> tuple[str, str]:
    name, month = rng.choice(
        _values(
            "economy",
            "SELECT c.name, p.month FROM stock_price p "
            "JOIN company c ON c.symbol = p.symbol ORDER BY p.symbol, p.month",
        )
    )
    label = f"{_MONTHS[int(month[5:7]) - 1]} {month[:4]}"
    return (
        f"What was {name}'s monthly closing stock price for {label}?",
        f"SELECT p.price FROM stock_price p JOIN company c ON c.symbol = p.symbol WHERE c.name = {_quote(name)} "
        f"AND p.month = '{month}'",
    )


@template("economy", "medium", "aggregate", "join", "date")
def stock_year_average(rng: random.Random) -> tuple[str, str]:
    (name,) = rng.choice(_values("economy", "SELECT name FROM company ORDER BY symbol"))
    year = rng.randint(2000, 2010)
    return (
        f"What was the average monthly closing price of {name} stock in {year}, rounded to 2 decimal places?",
        f"SELECT ROUND(AVG(p.price), 2) FROM stock_price p JOIN company c ON c.symbol = p.symbol "
        f"WHERE c.name = {_quote(name)} AND strftime('%Y', p.month) = '{year}'",
    )


@template("economy", "hard", "aggregate", "case")
def electricity_share(rng: random.Random) -> tuple[str, str]:
    year = rng.randint(2001, 2017)
    (source,) = rng.choice(_values("economy", "SELECT DISTINCT source FROM iowa_electricity ORDER BY source"))
    return (
        f"What percentage of Iowa's net electricity generation came from {source} in {year}, rounded to 1 decimal "
        "place?",
        "SELECT ROUND(100.0 * SUM(CASE WHEN source = " + _quote(source) + " THEN net_generation_gwh END) "
        f"/ SUM(net_generation_gwh), 1) FROM iowa_electricity WHERE year = {year}",
    )


TEMPLATES: tuple[Template, ...] = (
    album_track_count,
    artist_albums,
    country_revenue,
    genre_long_tracks,
    top_genres,
    make_horsepower,
    origin_year_cars,
    weather_days,
    month_max_temp,
    stock_price_month,
    stock_year_average,
    electricity_share,
)
