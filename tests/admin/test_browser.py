"""End-to-end: the admin page in headless Chromium (Debian's, driven by Playwright).

A real server (uvicorn in a thread, 127.0.0.1, a free port) over a temp SQLite
store seeded through the Python API. Screenshots go to test-output/screenshots/.
Skipped, with the reason, when /usr/bin/chromium or playwright is missing;
``.ci/run`` installs both.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from browsers import BROWSER_TEST, CHROMIUM, SHOTS
from servers import serving
from tallybook.admin.money import MINUS
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.sqlite import SqliteStore

from .seeding import PROMO, Seeded, customer, seed

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SIZES = {"laptop": LAPTOP, "phone": PHONE}
LONG_URL = "https://hooks.example.com/tallybook/" + "x" * 300
#: one customer per test that changes things, so tests do not depend on their order
CUSTOMERS = ("layout", "desk-laptop", "desk-phone")
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

pytestmark = BROWSER_TEST


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("admin-e2e") / "tallybook.db"


@pytest.fixture(scope="module")
def server(store_path: Path) -> Iterator[tuple[str, Seeded]]:
    """A seeded store served on 127.0.0.1; yields (base URL, what was seeded)."""
    path = store_path
    root = path.parent
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0) - timedelta(days=12))
    with Ledger(SqliteStore(path), clock=clock) as seeding:
        seeding.programs.create("shop")
        seeded = seed(seeding, clock, root / "reports")
        for account in CUSTOMERS:
            customer(seeding, clock, account)
        # a subscription whose URL is one long word: its pages must still fit
        seeding.webhooks.create("shop", LONG_URL, sub_id="sub_long_url")
        for account in ("alice", "bob"):  # an order on two accounts: the search lists both
            seeding.transactions.credit(
                "shop", account, "cash", 5, txn_id=f"refund-{account}", order_id="o-77"
            )
    # the real clock from here on
    with Ledger(SqliteStore(path)) as ledger, serving(ledger) as base:
        yield base, seeded


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


def page_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def fits(page: Any) -> None:
    """Nothing scrolls the page sideways (tables scroll inside their cards)."""
    width = page.viewport_size["width"]
    assert page_width(page) <= width, f"{page.url} is {page_width(page)} px wide at {width} px"


def no_dialogs(page: Any) -> list[str]:
    """Record any JavaScript dialog (alert, confirm): the desk must not use them."""
    seen: list[str] = []

    def record(dialog: Any) -> None:
        seen.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    return seen


#: ids and names as long as they may be, each one word: no page may scroll for them
LONG_ACCOUNT = "acct-" + "w" * 123
LONG_ORDER = "order-" + "o" * 122


@pytest.fixture(scope="module")
def long_key(server: tuple[str, Seeded], store_path: Path) -> str:
    """The secret of an admin key with a 64-character name, on a program with an
    account, an order on two accounts and a gold member whose ids are 128 characters."""
    with Ledger(SqliteStore(store_path)) as ledger:
        ledger.accounts.open("shop", LONG_ACCOUNT)
        for account in (LONG_ACCOUNT, "alice"):
            ledger.transactions.credit(
                "shop", account, "cash", 5, txn_id=f"long-{account[:8]}", order_id=LONG_ORDER
            )
        ledger.loyalty.earn("shop", LONG_ACCOUNT, "long-order", 900_000)  # gold
        _, secret = ledger.keys.create("shop", "admin", "K" * 64)
    return secret


@pytest.mark.parametrize("size", SIZES)
def test_long_ids_and_names_fit_the_screen(
    server: tuple[str, Seeded], browser: Any, long_key: str, size: str
) -> None:
    base, _ = server
    context = browser.new_context(viewport=SIZES[size])
    page = context.new_page()
    login(page, base, long_key)
    page.wait_for_url(f"{base}/admin/")
    for name, url in {
        "home": "/admin/",
        "account": f"/admin/accounts/{LONG_ACCOUNT}",
        "tier": "/admin/tiers/gold",
        "order-on-two-accounts": f"/admin/search?q={LONG_ORDER}",
        "search-not-found": "/admin/search?q=" + "q" * 128,
        "account-not-found": "/admin/accounts/" + "n" * 128,
    }.items():
        page.goto(base + url)
        fits(page)
        shot(page, f"{size}-long-{name}")
    context.close()


def test_a_wrong_key_is_refused(server: tuple[str, Seeded], browser: Any) -> None:
    base, _ = server
    page = browser.new_page(viewport=LAPTOP)
    login(page, base, "tb_0123456789abcdef_" + "x" * 43)
    assert page.locator("#login-error").inner_text() == "Unknown or revoked API key."
    shot(page, "login-refused")
    page.goto(f"{base}/admin/accounts/alice")
    assert page.url.endswith("/admin/login")
    page.close()


@pytest.mark.parametrize("size", SIZES)
def test_every_page_fits_the_screen(server: tuple[str, Seeded], browser: Any, size: str) -> None:
    """Point 3: at 390x844 (and 1280x800) no page scrolls sideways, with active holds
    and notifications on the account page."""
    base, seeded = server
    context = browser.new_context(viewport=SIZES[size])
    page = context.new_page()
    page.goto(f"{base}/admin/login")
    fits(page)
    shot(page, f"{size}-login")
    login(page, base, seeded.admin_secret)
    page.wait_for_url(f"{base}/admin/")
    acct = f"{base}/admin/accounts/layout"
    pages = {
        "home": f"{base}/admin/",
        "search-two-accounts": f"{base}/admin/search?q=o-77",
        "search-not-found": f"{base}/admin/search?q=nobody",
        "account-timeline": acct,
        "account-cash": f"{acct}?fund=cash",
        "account-points": f"{acct}?fund=points&order=oldest&limit=10",
        "confirm-capture": f"{acct}/holds/hold-layout/capture?amount=2.50",
        "confirm-void": f"{acct}/holds/hold-layout/void",
        "tier": f"{base}/admin/tiers/member",
        "webhooks": f"{base}/admin/webhooks",
        "webhook-deliveries": f"{base}/admin/webhooks/sub_long_url",
        "error": f"{base}/admin/accounts/nobody",
    }
    for name, url in pages.items():
        page.goto(url)
        fits(page)
        shot(page, f"{size}-{name}")
    page.goto(acct)
    assert page.locator("[data-hold='hold-layout'] .badge").inner_text() == "active"
    assert page.locator("#notifications tr[data-notification]").count() == 2
    context.close()


@pytest.mark.parametrize("size", SIZES)
def test_support_agent_journey(server: tuple[str, Seeded], browser: Any, size: str) -> None:
    """Points 1-5 as an agent does them, at desktop and phone sizes."""
    base, seeded = server
    account = f"desk-{size}"
    context = browser.new_context(viewport=SIZES[size])
    page = context.new_page()
    dialogs = no_dialogs(page)
    login(page, base, seeded.admin_secret)
    page.wait_for_url(f"{base}/admin/")
    assert page.locator("#tiers table").is_visible()
    assert page.locator("#reports a.file").count() >= 1
    fits(page)
    shot(page, f"{size}-journey-home")

    # find the account
    page.fill("#q", account)
    page.select_option("select[name=by]", "account")
    page.click("form.search button[type=submit]")
    page.wait_for_url(f"{base}/admin/accounts/{account}")
    assert page.locator("#account-id").inner_text() == account
    fits(page)

    # 1. amounts in dollars; points whole
    cash = page.locator("#balances tr[data-fund='cash'] td")
    assert re.fullmatch(r"\$[\d,]+\.\d\d", cash.nth(1).inner_text())
    assert cash.nth(2).inner_text() == "$11.00"  # withheld by the two holds
    assert page.locator("#balances tr[data-fund='points'] td").nth(1).inner_text() == "1,250"
    assert page.locator(f"[data-hold='hold-{account}'] .hold-amount").inner_text() == "$7.00"

    # 2. one timeline: the split payment is one event with a line per fund
    event = page.locator(f"#history tr[data-txn='pay-{account}']")
    assert event.count() == 1
    assert sorted(event.locator("li[data-fund]").all_inner_texts()) == [
        f"bonus {MINUS}$3.00 → $0.00",
        f"cash {MINUS}$2.00 → $53.00",
        f"store_credit {MINUS}$5.00 → $0.00",
    ]
    shot(page, f"{size}-journey-timeline")
    page.select_option("#history select[name=fund]", "cash")
    page.click("#history button:has-text('Apply')")
    page.wait_for_url("**fund=cash**")
    assert page.locator("#chart svg.chart").is_visible()
    assert "$" in page.locator("#chart svg.chart").get_attribute("aria-label")
    assert page.locator(f"#history tr[data-txn='pay-{account}'] td").nth(3).inner_text() == (
        MINUS + "$2.00"
    )
    fits(page)
    shot(page, f"{size}-journey-cash")

    # 4. adjust a balance with a reason; the reason shows in the history
    page.select_option("#adjust-fund", "cash")
    page.select_option("#adjust-direction", "add")
    page.fill("#adjust-amount", "12.50")
    page.fill("#adjust-reason", "goodwill: parcel arrived late")
    page.click("#adjust button[type=submit]")
    page.wait_for_url(re.compile(r"fund=cash.*#history$"))
    assert "cash adjusted by +$12.50" in page.locator(".flash.ok").inner_text()
    row = page.locator("#history tr:has-text('goodwill')")
    assert row.count() == 1
    assert "Reason: goodwill: parcel arrived late" in row.inner_text()
    assert "+$12.50" in row.inner_text()
    fits(page)
    shot(page, f"{size}-journey-adjusted")

    # 5. void asks first (a page, not a dialog); cancel keeps the hold
    hold = page.locator(f"[data-hold='hold-{account}']")
    hold.locator("button:has-text('Void')").click()
    page.wait_for_url(f"**/holds/hold-{account}/void**")
    assert "All $7.00 is released" in page.locator("#confirm-what").inner_text()
    fits(page)
    shot(page, f"{size}-journey-confirm-void")
    page.click("#cancel")
    page.wait_for_url(re.compile(r"#holds$"))
    assert hold.locator(".badge").inner_text() == "active"
    hold.locator("button:has-text('Void')").click()
    page.wait_for_url(f"**/holds/hold-{account}/void**")
    page.click("#confirm-button")
    page.wait_for_url(re.compile(r"#holds$"))
    assert "is voided" in page.locator(".flash.ok").inner_text()
    assert hold.locator(".badge").inner_text() == "voided"

    # capture part of the other hold, after confirming the amount
    other = page.locator(f"[data-hold='hold2-{account}']")
    other.locator("input[name=amount]").fill("2.50")
    other.locator("button:has-text('Capture')").click()
    page.wait_for_url(f"**/holds/hold2-{account}/capture**")
    what = page.locator("#confirm-what").inner_text()
    assert "charged $2.50" in what
    assert "$1.50 is released" in what
    shot(page, f"{size}-journey-confirm-capture")
    page.click("#confirm-button")
    page.wait_for_url(re.compile(r"#holds$"))
    assert "$2.50 captured" in page.locator(".flash.ok").inner_text()
    assert other.locator(".badge").inner_text() == "captured"
    assert page.locator("#balances tr[data-fund='cash'] td").nth(2).inner_text() == "$0.00"
    assert dialogs == []

    # payloads as text; a dismissal as a sentence
    promo = page.locator("#notifications tr:has-text('Promo')")
    text = promo.locator("dl.payload").inner_text()
    assert PROMO["text"] in text
    assert "\\u003c" not in page.content()
    promo.locator("button:has-text('Dismiss')").click()
    page.wait_for_url(re.compile(r"#notifications$"))
    assert "dismissed" in page.locator(".flash.ok").inner_text()
    sent = page.locator("#sent tr:has-text('Promo')")
    assert "Dismissed on request" in sent.inner_text()
    assert "user by user" not in page.content()
    fits(page)
    shot(page, f"{size}-journey-after-actions")

    # sign out: the session is gone
    page.click("#logout")
    page.wait_for_url(f"{base}/admin/login")
    assert "Signed out." in page.locator(".flash.ok").inner_text()
    page.goto(f"{base}/admin/accounts/{account}")
    assert page.url.endswith("/admin/login")
    shot(page, f"{size}-signed-out")
    context.close()
