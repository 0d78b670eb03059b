"""End-to-end: the admin page in headless Chromium (Debian's, driven by Playwright).

A real server (uvicorn in a thread, 127.0.0.1, a free port) over a temp SQLite
store seeded through the Python API. Screenshots go to test-output/screenshots/.
Skipped, with the reason, when /usr/bin/chromium or playwright is missing;
``.ci/run`` installs both.
"""

from __future__ import annotations

import importlib.util
import re
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.sqlite import SqliteStore

from .seeding import Seeded, seed

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="needs playwright (pip install playwright; no 'playwright install' needed)",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Seeded]]:
    """A seeded store served on 127.0.0.1; yields (base URL, what was seeded)."""
    import uvicorn

    root = tmp_path_factory.mktemp("admin-e2e")
    path = root / "tallybook.db"
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0) - timedelta(days=12))
    with Ledger(SqliteStore(path), clock=clock) as seeding:
        seeding.programs.create("shop")
        seeded = seed(seeding, clock, root / "reports")
    ledger = Ledger(SqliteStore(path))  # the real clock from here on
    port = _free_port()
    config = uvicorn.Config(
        create_app(ledger), host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not srv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", seeded
    finally:
        srv.should_exit = True
        thread.join(10)
        ledger.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def login(page: Any, base: str, secret: str) -> None:
    page.goto(f"{base}/admin/")
    assert page.url.endswith("/admin/login")
    page.fill("#api_key", secret)
    page.click("button[type=submit]:has-text('Sign in')")


def no_horizontal_overflow(page: Any) -> bool:
    width = page.evaluate("document.documentElement.scrollWidth")
    return bool(width <= page.viewport_size["width"] + 1)


def test_a_wrong_key_is_refused(server: tuple[str, Seeded], browser: Any) -> None:
    base, _ = server
    page = browser.new_page(viewport=LAPTOP)
    login(page, base, "tb_0123456789abcdef_" + "x" * 43)
    assert page.locator("#login-error").inner_text() == "Unknown or revoked API key."
    shot(page, "login-refused")
    page.goto(f"{base}/admin/accounts/alice")
    assert page.url.endswith("/admin/login")
    page.close()


def test_support_agent_journey(server: tuple[str, Seeded], browser: Any) -> None:
    base, seeded = server
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    login(page, base, seeded.admin_secret)
    page.wait_for_url(f"{base}/admin/")
    assert page.locator("#tiers table").is_visible()
    assert page.locator("#reports a.file").count() >= 1
    shot(page, "laptop-home")

    # find an account by order id
    page.fill("#q", seeded.order)
    page.select_option("select[name=by]", "order")
    page.click("form.search button[type=submit]")
    page.wait_for_url(f"{base}/admin/accounts/{seeded.account}")
    assert page.locator("#account-id").inner_text() == seeded.account

    # its chart, for the cash fund
    page.select_option("#history select[name=fund]", "cash")
    page.click("#history button:has-text('Apply')")
    page.wait_for_url("**fund=cash**")
    chart = page.locator("#chart svg.chart")
    assert chart.is_visible()
    assert chart.locator("circle").count() >= 8
    box = chart.bounding_box()
    assert box is not None
    assert box["width"] > 400
    assert box["height"] > 100
    shot(page, "laptop-account")

    # void the hold
    row = page.locator(f"tr[data-hold='{seeded.hold}']")
    assert row.locator(".badge").inner_text() == "active"
    row.locator("button:has-text('Void')").click()
    page.wait_for_url(re.compile(r"fund=cash.*#holds$"))
    assert "is voided" in page.locator(".flash.ok").inner_text()
    assert page.locator(f"tr[data-hold='{seeded.hold}'] .badge").inner_text() == "voided"
    cash = page.locator("#balances tr[data-fund='cash'] td")
    assert cash.nth(3).inner_text() == "0"  # nothing withheld any more

    # dismiss a notification
    note = page.locator(f"tr[data-notification='{seeded.notification}']")
    assert note.count() == 1
    note.locator("button:has-text('Dismiss')").click()
    page.wait_for_load_state()
    assert "dismissed" in page.locator(".flash.ok").inner_text()
    assert page.locator(f"tr[data-notification='{seeded.notification}']").count() == 0
    assert page.locator("#sent td:has-text('Promo')").count() >= 1
    shot(page, "laptop-after-actions")

    # readable on a phone: nothing but the tables scrolls sideways
    page.set_viewport_size(PHONE)
    page.reload()
    assert no_horizontal_overflow(page)
    assert page.locator("#chart svg.chart").is_visible()
    shot(page, "phone-account")
    page.goto(f"{base}/admin/")
    assert no_horizontal_overflow(page)
    card = page.locator("#reports").bounding_box()
    assert card is not None
    for link in page.locator("#reports a.file").all():  # downloads in view, not scrolled off
        box = link.bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= card["x"] + card["width"]
    shot(page, "phone-home")

    # sign out: the session is gone
    page.click("#logout")
    page.wait_for_url(f"{base}/admin/login")
    assert "Signed out." in page.locator(".flash.ok").inner_text()
    page.goto(f"{base}/admin/accounts/{seeded.account}")
    assert page.url.endswith("/admin/login")
    shot(page, "signed-out")
    context.close()
