"""Recording the cassettes: every task's gold calls plus a few extras, per API, from
the fixture server on loopback; and the check that a re-recording is byte-identical.

``python -m frostgym.tools.http.record`` rewrites the committed cassettes;
``--check`` records into a temporary folder and fails if any file differs. Requests
are de-duplicated and sorted, so the cassettes do not depend on task order, and each
API's cassette is written in one vcrpy session.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from frostgym.tools.http.apis import APIS
from frostgym.tools.http.apis.currency import USD_RATES
from frostgym.tools.http.apis.parcels import parcels
from frostgym.tools.http.apis.weather import CITIES
from frostgym.tools.http.arguments import canonical_call, check_arguments
from frostgym.tools.http.clients import TOOL_BY_NAME
from frostgym.tools.http.fixture_server import fixture_server
from frostgym.tools.http.replay import VCR_LOCK, cassette_dir, cassette_path, make_vcr
from frostgym.tools.http.tasks import load_task_records
from frostgym.tools.http.transports import loopback_client

Call = tuple[str, dict[str, Any]]


def extra_calls() -> Iterator[Call]:
    """Requests beyond the gold ones, so a sensible exploring agent finds answers:
    every listing, the default view of each city and currency, every parcel."""
    for name in ("list_weather_cities", "list_currencies", "get_fx_usage", "search_airports", "list_carriers"):
        yield name, {}
    yield "list_units", {}
    for kind in ("length", "mass", "volume", "temperature"):
        yield "list_units", {"kind": kind}
    for city in CITIES:
        yield "get_current_weather", {"city": city.name}
        for days in (3, 7):
            yield "get_weather_forecast", {"city": city.name, "days": days}
    for code in USD_RATES:
        yield "get_exchange_rates", {"base": code}
    for number in parcels():
        yield "track_parcel", {"tracking_number": number}
    yield "get_current_weather", {"city": "Atlantis"}  # a recorded 404


def gold_calls() -> Iterator[Call]:
    for record in load_task_records():
        for call in record["gold_calls"]:
            yield call["name"], dict(call["arguments"])


def recording_plan() -> dict[str, list[Call]]:
    """Per API, the distinct calls to record (checked arguments), sorted canonically."""
    plan: dict[str, dict[str, Call]] = {api.name: {} for api in APIS}
    for name, arguments in [*extra_calls(), *gold_calls()]:
        tool = TOOL_BY_NAME[name]
        checked = check_arguments(tool.parameters, arguments)
        plan[tool.api][canonical_call(name, checked)] = (name, checked)
    return {api: [calls[k] for k in sorted(calls)] for api, calls in plan.items()}


def record_cassettes(out_dir: Path | None = None) -> list[Path]:
    """Start the fixture server, send every planned request through vcrpy, and write
    one cassette per API into ``out_dir`` (the committed folder by default)."""
    folder = Path(out_dir) if out_dir is not None else cassette_dir()
    folder.mkdir(parents=True, exist_ok=True)
    recorder = make_vcr("all")
    written: list[Path] = []
    # vcrpy patches httpx process-wide: no replay may run in another thread meanwhile.
    with VCR_LOCK, fixture_server() as port, loopback_client(port) as client:
        for api, calls in recording_plan().items():
            path = cassette_path(api, folder)
            path.unlink(missing_ok=True)
            with recorder.use_cassette(str(path)):
                for name, arguments in calls:
                    response = TOOL_BY_NAME[name].call(client, arguments)
                    if response.status_code >= 500:
                        raise RuntimeError(f"fixture server failed on {name} {json.dumps(arguments)}")
            written.append(path)
    return written


def check_cassettes(committed: Path | None = None) -> list[str]:
    """Re-record into a temporary folder; the names of committed cassettes that differ
    (or are missing, or extra). Empty when the recording is reproducible."""
    folder = Path(committed) if committed is not None else cassette_dir()
    with tempfile.TemporaryDirectory(prefix="frostgym-cassettes-") as tmp:
        fresh = {p.name: p for p in record_cassettes(Path(tmp))}
        old = {p.name: p for p in folder.glob("*.yaml")}
        problems = [f"{n}: missing" for n in sorted(set(fresh) - set(old))]
        problems += [f"{n}: not produced by recording" for n in sorted(set(old) - set(fresh))]
        problems += [f"{n}: differs" for n in sorted(set(fresh) & set(old)) if not filecmp.cmp(fresh[n], old[n], False)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frostgym.tools.http.record", description=__doc__)
    parser.add_argument("--check", action="store_true", help="re-record into a temp dir and compare bytes")
    parser.add_argument("--out", type=Path, default=None, help="folder to write (default: the committed one)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check_cassettes(args.out)
        for problem in problems:
            sys.stdout.write(f"cassette {problem}\n")
        sys.stdout.write("cassettes reproduce byte for byte\n" if not problems else "cassettes are stale\n")
        return 1 if problems else 0
    for path in record_cassettes(args.out):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
