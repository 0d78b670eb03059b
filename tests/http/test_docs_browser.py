"""/docs and /redoc render in headless Chromium with the network cut off but for the app.

A real server (uvicorn in a thread on 127.0.0.1) over a temp SQLite store.
Every request the page makes to anywhere but the app is aborted and
recorded, so a CDN asset would leave the page blank and fail the test.
Screenshots go to test-output/screenshots/ (docs-swagger.png, docs-redoc.png).
Skipped, with the reason, when /usr/bin/chromium or playwright is missing;
``.ci/run`` installs both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from browsers import BROWSER_TEST, CHROMIUM, SHOTS
from servers import serving
from tallybook.ledger import Ledger
from tallybook.store.sqlite import SqliteStore

REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

pytestmark = BROWSER_TEST


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = SqliteStore(tmp_path_factory.mktemp("docs") / "tallybook.db")
    with Ledger(store) as ledger, serving(ledger) as url:
        yield url


@pytest.fixture
def page(base: str) -> Iterator[tuple[Any, list[str]]]:
    """A page whose requests outside the app are aborted; yields (page, aborted URLs)."""
    from playwright.sync_api import sync_playwright

    outside: list[str] = []

    def only_the_app(route: Any) -> None:
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort("internetdisconnected")

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.route("**/*", only_the_app)
            yield context.new_page(), outside
        finally:
            browser.close()


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


def test_swagger_ui_renders_offline_with_authorize(base: str, page: Any) -> None:
    tab, outside = page
    tab.goto(f"{base}/docs")
    tab.wait_for_selector(".swagger-ui .information-container .title", timeout=20_000)
    assert "tallybook" in tab.inner_text(".swagger-ui .information-container .title")
    tab.wait_for_selector("#operations-ledger-ledger_post_transaction", timeout=20_000)
    assert tab.locator(".btn.authorize").is_visible()
    _shot(tab, "docs-swagger")
    tab.click(".btn.authorize")
    dialog = tab.locator(".dialog-ux")
    dialog.wait_for(timeout=10_000)
    assert "ApiKey" in dialog.inner_text()
    assert "bearer" in dialog.inner_text().lower()
    _shot(tab, "docs-swagger-authorize")
    assert outside == []


def test_redoc_renders_offline(base: str, page: Any) -> None:
    tab, outside = page
    tab.goto(f"{base}/redoc")
    tab.wait_for_selector("h1", timeout=20_000)
    assert "tallybook" in tab.inner_text("h1")
    operation = tab.locator("h2", has_text="Post a credit, debit, adjustment or raw balanced")
    operation.first.wait_for(timeout=20_000)
    _shot(tab, "docs-redoc")
    # ReDoc's bundle always asks for its "API docs by Redocly" logo and hides
    # the image when that fails; nothing else leaves the app
    assert set(outside) <= {REDOC_LOGO}
