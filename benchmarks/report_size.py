"""What a report costs: ``frostgym report`` on 1,000 / 10,000 / 100,000-episode cards, and
the page in real headless Chromium.

Targets (issue 18), on 2 cores for the 100,000-episode card: the report written in under
30 s, and the page interactive (index decoded, filters filled, the first page of episodes
listed) in under 2 s. Measured per card:

- ``frostgym report CARD --out DIR`` in a fresh process: wall time and peak RSS;
- the size of ``index.html`` and of its ``data/`` folder (index and chunks), beside the
  card's own ``episodes.jsonl``;
- in Chromium (Playwright, ``file://``, a fresh page each time): first contentful paint,
  time to interactive (the page's own ``data-ready-ms`` mark, from navigation start), a
  filter by failure label (select to rendered rows), opening one episode (click to its
  conversation shown: one chunk loaded and decoded), and a free-text search over every
  episode's text (chunk by chunk, to the final count).

The cards: ``frostgym/Math-v0``'s train split with the random agent (it fails in many ways,
so the labels are varied), 100 x 10, 500 x 20 and 5,000 x 20 tasks x samples, written
once into ``--cards`` (``benchmarks/compare_cards.py``'s cards are reused).

Run from the repository root: ``python benchmarks/report_size.py [--cards DIR] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import format_table, machine_info, write_json
from compare_cards import make_cards

SIZES = ((100, 10), (500, 20), (5000, 20))
_REPORT = """
import resource, sys, time
from pathlib import Path
began = time.perf_counter()
from frostgym.report.build import write_report
write_report([Path(sys.argv[1])], Path(sys.argv[2]))
print(time.perf_counter() - began, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def write(card: Path, out: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, str(card), str(out)], check=True, capture_output=True, text=True
    )
    seconds, rss = (float(x) for x in done.stdout.split())
    data = sum(p.stat().st_size for p in (out / "data").rglob("*") if p.is_file())
    return {
        "seconds": seconds,
        "peak_rss_mb": rss,
        "index_html_kb": (out / "index.html").stat().st_size / 1024,
        "data_mb": data / 2**20,
        "episodes_jsonl_mb": (card / "episodes.jsonl").stat().st_size / 2**20,
    }


def browse(index: Path, chromium: str) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=120_000)
        paint = page.evaluate("performance.getEntriesByName('first-contentful-paint').map(e => e.startTime)[0] ?? null")
        ready = float(page.evaluate("+document.body.dataset.readyMs"))
        filter_ms = page.evaluate(
            """() => { const s = document.getElementById('f-label'); const t = performance.now();
                s.value = s.options[2].value; s.dispatchEvent(new Event('change'));
                return performance.now() - t; }"""
        )
        began = time.perf_counter()
        page.locator("#episodes-body tr").first.click()
        page.locator("#episode .conversation").first.wait_for()
        open_ms = 1000 * (time.perf_counter() - began)
        page.select_option("#f-label", index=0)
        page.evaluate("document.getElementById('browser-status').textContent = ''")
        page.fill("#f-text", "total")
        began = time.perf_counter()
        page.press("#f-text", "Enter")
        status = "document.getElementById('browser-status').textContent"
        while not page.evaluate(f"{status} !== '' && !{status}.includes('searching')"):
            time.sleep(0.02)  # not wait_for_function: the page's CSP forbids the eval it polls with
        search_s = time.perf_counter() - began
        matches = int(page.locator("#match-count").inner_text())
        browser.close()
    if errors:
        raise RuntimeError(f"page errors: {errors}")
    return {
        "first_paint_ms": paint,
        "interactive_ms": ready,
        "filter_ms": filter_ms,
        "open_episode_ms": open_ms,
        "text_search_s": search_s,
        "text_matches": matches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", type=Path, default=Path("/tmp/frostgym-bench-cards"))
    parser.add_argument("--sizes", default=",".join(f"{t}x{s}" for t, s in SIZES))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    rows: list[dict[str, Any]] = []
    for size in args.sizes.split(","):
        tasks, samples = (int(x) for x in size.split("x"))
        _, card = make_cards(args.cards, tasks, samples)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report"
            row: dict[str, Any] = {"episodes": tasks * samples, **write(card, out)}
            if chromium is not None:
                row.update(browse(out / "index.html", chromium))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    columns = list(rows[0])
    cells = [[f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in columns] for r in rows]
    print(format_table(columns, cells, [True] * len(columns)))
    if args.json is not None:
        write_json(args.json, {"machine": machine_info(["matplotlib", "orjson", "playwright"]), "rows": rows})


if __name__ == "__main__":
    main()
