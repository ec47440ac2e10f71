"""The report in real headless Chromium (Debian's ``chromium``) driven by Playwright.

Opened from disk as a user would: no console error, no request that is not a file beside
the page, the views table showing the card's numbers, a failure-label filter listing
exactly the card's episodes with that label, an opened episode showing its messages (and
a reply's markup as text, never as markup), both cards side by side in compare mode, and a
drop link filtering to the drops. Skipped, with the reason, where Chromium or Playwright
is missing (``.ci/run`` installs Chromium; the dev extra installs Playwright). Screenshots
go to ``$FROSTGYM_SCREENSHOTS`` when set, else the test's temporary directory.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frostgym.agents import OracleAgent
from frostgym.cards.card import load_card
from frostgym.report.build import write_report
from tests.report_cards import ENVS, MARKUP, MarkupAgent, make_card

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install '.[dev]')")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("report-browser")
    oracle = make_card(root / "oracle", OracleAgent(), ENVS, 8)
    markup = make_card(root / "markup", MarkupAgent(), ENVS, 8)
    return write_report([markup, oracle], root / "report"), markup, oracle


class Page:
    """One browser page on the report, recording console messages and requests."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console: list[tuple[str, str]] = []
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, index: Path) -> None:
        self.page.goto(index.as_uri())
        self.page.wait_for_selector("body[data-ready=true]", timeout=30_000)

    def shown_plan_ids(self) -> list[str]:
        """Every plan id the table lists for the current filters, paging to the end."""
        ids: list[str] = []
        while True:
            ids += self.page.locator("#episodes-body tr").evaluate_all("rows => rows.map(r => r.dataset.planId)")
            if self.page.locator("#page-next").is_disabled():
                return ids
            self.page.click("#page-next")

    def select(self, name: str, label: str) -> None:
        self.page.select_option(f"#f-{name}", label=label)
        self.wait_until("!document.getElementById('browser-status').textContent.includes('searching')")

    def wait_until(self, condition: str, timeout: float = 30.0) -> None:
        """Poll ``condition`` (a JavaScript expression) until it is true. Not
        ``wait_for_function``: its polling evaluates a string in the page, which the
        report's Content-Security-Policy forbids (as it should)."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(condition):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {condition}")
            time.sleep(0.02)

    def screenshot(self, name: str) -> Path:
        folder = Path(os.environ.get("FROSTGYM_SCREENSHOTS", self._tmp))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    _tmp = "."


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    wrapped = Page(context.new_page())
    wrapped._tmp = str(tmp_path)
    yield wrapped
    context.close()


def test_report_opens_clean_from_disk_and_shows_the_cards_numbers(report: tuple[Path, Path, Path], page: Page) -> None:
    index, markup, _ = report
    page.open(index)
    card, episodes, drops = load_card(markup)
    first = page.page.locator(".views").first
    overall = first.locator("tr", has_text="overall").first.locator("td").all_inner_texts()
    view = card["views"]["overall"]["errors_as_failures"]
    assert overall[1:4] == [str(view["episodes"]), str(view["tasks"]), f"{view['mean_reward']:.3f}"]
    assert f"{view['pass@k']['1']['value']:.3f}" in overall
    assert page.page.locator("#match-count").inner_text() == str(len(episodes) + len(drops))
    page.screenshot("report-top")
    assert [m for m in page.console if m[0] in ("error", "pageerror", "warning")] == []
    assert all(url.startswith("file://") for url in page.requests), page.requests
    assert page.dialogs == []


def test_a_failure_label_filter_lists_exactly_its_episodes(report: tuple[Path, Path, Path], page: Page) -> None:
    index, markup, _ = report
    page.open(index)
    _, episodes, _ = load_card(markup)
    labels = sorted({e.grade.get("label") for e in episodes if e.grade is not None and e.grade.get("label")})
    assert labels, "the markup card has failure labels"
    for label in labels:
        page.select("label", label)
        expected = [e.plan_id for e in episodes if e.grade is not None and e.grade.get("label") == label]
        assert page.shown_plan_ids() == expected
        assert page.page.locator("#match-count").inner_text() == str(len(expected))
    page.select("label", "every label")
    page.select("outcome", "dropped")
    _, _, drops = load_card(markup)
    assert page.shown_plan_ids() == [d.plan_id for d in drops]
    assert all(url.startswith("file://") for url in page.requests)


def test_an_opened_episode_shows_its_messages_side_by_side_and_markup_as_text(
    report: tuple[Path, Path, Path], page: Page
) -> None:
    index, markup, _ = report
    page.open(index)
    _, episodes, _ = load_card(markup)
    wrong = next(e for e in episodes if e.steps and e.steps[0].action == MARKUP and e.env_id == ENVS[0])
    page.page.fill("#f-text", wrong.task_id)
    page.wait_until(
        "document.querySelectorAll('#episodes-body tr').length > 0 && "
        "!document.getElementById('browser-status').textContent.includes('searching')"
    )
    page.page.locator(f'#episodes-body tr[data-plan-id="{wrong.plan_id}"]').click()
    panel = page.page.locator("#episode")
    panel.locator(".episode-card").nth(1).wait_for()
    cards = panel.locator(".episode-card")
    assert cards.count() == 2  # both cards hold the episode: markup, then the oracle
    text = cards.nth(0).inner_text()
    for message in wrong.observation:
        assert str(message["content"]).strip().splitlines()[0] in text
    assert MARKUP in text and wrong.plan_id in panel.inner_text() and str(wrong.seed) in text
    assert cards.nth(0).locator("table.grade td", has_text="correctness").count() == 1
    assert page.page.locator("#episode img").count() == 0 and page.dialogs == []
    page.screenshot("report-episode")
    assert [m for m in page.console if m[0] in ("error", "pageerror")] == []


def test_a_drop_link_filters_to_the_drops_and_opens_one(report: tuple[Path, Path, Path], page: Page) -> None:
    index, markup, _ = report
    page.open(index)
    _, _, drops = load_card(markup)
    page.page.click('a[href="#drop=agent_error"]')
    page.wait_until(f"document.getElementById('match-count').textContent === '{len(drops)}'")
    assert page.shown_plan_ids() == [d.plan_id for d in drops]
    page.page.locator("a.episode-link").first.click()
    page.page.locator("#episode .drop").first.wait_for()
    assert "agent_error" in page.page.locator("#episode .drop").first.inner_text()
    assert "503 <html>busy</html>" in page.page.locator("#episode").inner_text()
    page.screenshot("report-drop")


def test_the_first_screen_is_the_headline(report: tuple[Path, Path, Path], page: Page) -> None:
    """At 1400 x 1000 the chart, its numbers and the failure labels are all in view before
    any scrolling, and the bookkeeping (the cards table first) starts below them."""
    index, _, _ = report
    page.open(index)
    height = page.page.viewport_size["height"]
    headline = page.page.locator("#headline")
    boxes = {
        name: headline.locator(selector).first.bounding_box()
        for name, selector in (("chart", "svg"), ("numbers", "table"), ("failures", "p:has-text('failure labels')"))
    }
    for name, box in boxes.items():
        assert box is not None and box["height"] > 0 and box["y"] + box["height"] <= height, (name, box)
    cards = page.page.locator("#cards").bounding_box()
    assert cards is not None and cards["y"] > max(b["y"] + b["height"] for b in boxes.values() if b)
    folder = Path(os.environ.get("FROSTGYM_SCREENSHOTS", page._tmp))
    page.page.screenshot(path=str(folder / "report-first-screen.png"))  # the viewport only: what a person sees
    assert [m for m in page.console if m[0] in ("error", "pageerror", "warning")] == []
