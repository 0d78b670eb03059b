"""The support desk over TestClient (issue 17): amounts in the program's currency,
one timeline across funds, the adjust-balance form, the confirmation step before
capture and void, readable notification payloads and dismissal sentences.

Whatever reads or writes through the ledger runs on both engines; the browser
tests (test_browser.py) cover the same points at desktop and phone sizes.
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from urllib.parse import unquote, urlencode

import pytest
from fastapi.testclient import TestClient

from tallybook.admin.money import MINUS, format_amount
from tallybook.admin.timeline import timeline
from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import ItemStore, Page, Query

from .conftest import AdminClient
from .seeding import Seeded, split_payment

SQLITE_ONLY = pytest.mark.parametrize("engine", ["sqlite"])
_ADJUST_ID = re.compile(r'name="txn" value="([^"]+)"')


def _txn_rows(html: str) -> list[str]:
    return re.findall(r'<tr data-txn="([^"]+)"', html)


def test_amounts_are_shown_in_the_programs_currency_and_points_stay_whole(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    html = admin.client.get("/admin/accounts/alice").text
    cash = ledger.wallet.balance("shop", "alice").fund("cash")
    dollars = f"${cash.total // 100:,}.{cash.total % 100:02d}"
    row = html.split('<tr data-fund="cash">')[1].split("</tr>")[0]
    assert f">{dollars}<" in row
    assert ">$7.00<" in row  # withheld by the hold
    points = ledger.accounts.balances("shop", "alice")[0]
    assert points.fund == "points"
    prow = html.split('<tr data-fund="points">')[1].split("</tr>")[0]
    assert f">{points.balance:,}<" in prow  # whole, no currency, no decimals
    hold = html.split(f'data-hold="{seeded.hold}"')[1].split("</li>")[0]
    assert "$7.00" in hold


def test_one_timeline_across_funds_shows_a_split_payment_once(
    admin: AdminClient, seeded: Seeded, ledger: Ledger, clock: ManualClock
) -> None:
    split_payment(ledger, clock, "bob")
    admin.login(seeded.admin_secret)
    html = admin.client.get("/admin/accounts/bob").text  # the timeline is the default view
    rows = _txn_rows(html)
    assert rows.count("pay-bob") == 1
    event = html.split('<tr data-txn="pay-bob">')[1].split("</tr>")[0]
    changes = re.findall(r'<li data-fund="([a-z_]+)">', event)
    assert sorted(changes) == ["bonus", "cash", "store_credit"]
    assert MINUS + "$3.00" in event
    assert MINUS + "$5.00" in event
    assert MINUS + "$2.00" in event
    assert "groceries" in event
    # the per-fund view still lists one fund's entries only
    per_fund = admin.client.get("/admin/accounts/bob", params={"fund": "store_credit"}).text
    assert _txn_rows(per_fund) == ["pay-bob", "gift-bob"]
    assert _txn_rows(html)[0] == "pay-bob"  # newest first


def test_the_timeline_pages_through_every_transaction_once(
    admin: AdminClient, seeded: Seeded, ledger: Ledger, clock: ManualClock, engine: str
) -> None:
    ledger.accounts.open("shop", "carol")
    split_payment(ledger, clock, "carol")
    for i in range(3 if engine == "dynamodb" else 7):
        ledger.transactions.credit("shop", "carol", "points", 10 + i, txn_id=f"c-pt-{i}")
        ledger.transactions.credit("shop", "carol", "cash", 100 + i, txn_id=f"c-cash-{i}")
        if i % 2:
            clock.advance(timedelta(minutes=5))  # some share a time, some do not
    when = _transaction_times(ledger, "carol")
    expected = sorted(when)
    admin.login(seeded.admin_secret)
    for order in ("newest", "oldest"):
        seen: list[str] = []
        params = {"limit": "4", "order": order}
        while True:
            html = admin.client.get("/admin/accounts/carol", params=params).text
            rows = _txn_rows(html)
            assert len(rows) <= 4
            seen += rows
            nxt = re.search(r'href="([^"]+)#history" id="next-page"', html)
            if nxt is None:
                break
            cursor = re.search(r"cursor=([^&#]+)", nxt.group(1).replace("&amp;", "&"))
            assert cursor is not None
            params["cursor"] = unquote(cursor.group(1))
        assert sorted(seen) == sorted(expected)
        assert len(seen) == len(set(seen))
        times = [when[t] for t in seen]
        assert times == sorted(times, reverse=order == "newest")


def test_a_split_payment_in_the_same_microsecond_as_other_entries_is_never_cut_in_two(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    """The clock does not move: a cash credit, a store-credit credit and a payment over
    both share one time, and one entry a page still shows the payment once, whole."""
    ledger.accounts.open("shop", "dave")
    for i in range(2):
        ledger.wallet.credit("shop", "dave", "cash", 300, txn_id=f"d-cash-{i}")
        ledger.wallet.credit("shop", "dave", "store_credit", 200, txn_id=f"d-gift-{i}")
        ledger.wallet.debit("shop", "dave", 400, txn_id=f"d-pay-{i}")
    admin.login(seeded.admin_secret)
    for order in ("newest", "oldest"):
        seen: list[str] = []
        params = {"limit": "1", "order": order}
        while True:
            html = admin.client.get("/admin/accounts/dave", params=params).text
            for txn in _txn_rows(html):
                if txn.startswith("d-pay-"):
                    event = html.split(f'<tr data-txn="{txn}">')[1].split("</tr>")[0]
                    funds = re.findall(r'<li data-fund="([a-z_]+)">', event)
                    assert sorted(funds) == ["cash", "store_credit"], (order, txn)
            seen += _txn_rows(html)
            nxt = re.search(r'href="([^"]+)#history" id="next-page"', html)
            if nxt is None:
                break
            cursor = re.search(r"cursor=([^&#]+)", nxt.group(1).replace("&amp;", "&"))
            assert cursor is not None
            params["cursor"] = unquote(cursor.group(1))
        assert sorted(seen) == sorted(_transaction_times(ledger, "dave")), order


class WriteDuringPage(ForwardingStore):
    """Runs ``write`` once, right after the ``after``-th query: between a timeline
    page's first read of each fund and its second read of one."""

    def __init__(self, inner: ItemStore, after: int, write: Callable[[], object]) -> None:
        super().__init__(inner)
        self.left = after
        self.write = write

    def run_query(self, q: Query) -> Page:
        page = self.inner.run_query(q)
        self.left -= 1
        if self.left == 0:
            self.write()
        return page


@SQLITE_ONLY
def test_a_timeline_page_is_not_repeated_when_the_account_is_written_meanwhile(
    ledger: Ledger, store: ItemStore, clock: ManualClock
) -> None:
    """The first page, newest first, reads each fund from its newest entry; a fund not
    shown whole is read again for its position. A credit committed in between moved
    that position one entry up, and the next page showed an entry of this one again."""
    ledger.accounts.open("shop", "erin")
    for i in range(4):
        ledger.wallet.credit("shop", "erin", "cash", 100, txn_id=f"e-cash-{i}")
        clock.advance(timedelta(minutes=1))
        ledger.wallet.credit("shop", "erin", "store_credit", 100, txn_id=f"e-gift-{i}")
        clock.advance(timedelta(minutes=1))
    before = set(_transaction_times(ledger, "erin"))
    funds = ["points", "cash", "store_credit", "bonus"]

    def credit() -> None:
        clock.advance(timedelta(minutes=1))
        ledger.wallet.credit("shop", "erin", "cash", 100, txn_id="e-cash-late")

    racing = Ledger(WriteDuringPage(store, len(funds), credit), clock=clock)
    first = timeline(racing, "shop", "erin", funds, limit=3)
    seen = [e.txn_id for e in first.events]
    assert seen == ["e-gift-3", "e-cash-3", "e-gift-2"]
    cursor = first.cursor
    while cursor:
        page = timeline(ledger, "shop", "erin", funds, limit=3, cursor=cursor)
        seen += [e.txn_id for e in page.events]
        cursor = page.cursor
    assert len(seen) == len(set(seen)), seen
    assert set(seen) == before  # the late credit is newer than the first page


def _transaction_times(ledger: Ledger, account: str) -> dict[str, datetime]:
    """Every transaction in the account's funds' histories, with its time."""
    return {
        e.txn_id: e.created_at
        for fund in ("points", "cash", "store_credit", "bonus")
        for e in ledger.accounts.iter_history("shop", account, fund)
    }


def _adjust_form(admin: AdminClient, account: str = "alice") -> dict[str, str]:
    html = admin.client.get(f"/admin/accounts/{account}").text
    match = _ADJUST_ID.search(html)
    assert match, "no adjust form on the page"
    return {"txn": match.group(1)}


def test_adjust_balance_records_the_reason_and_shows_it_in_history(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    before = ledger.wallet.balance("shop", "alice").fund("cash").total
    form = {
        **_adjust_form(admin),
        "fund": "cash",
        "direction": "add",
        "amount": "12.50",
        "reason": "goodwill: parcel arrived late",
    }
    r = admin.post("/admin/accounts/alice/adjust", form)
    assert r.status_code == 303
    assert r.headers["location"] == "/admin/accounts/alice#history"
    txn = ledger.transactions.get("shop", form["txn"])
    assert txn.type == "adjust"
    assert txn.metadata["reason"] == "goodwill: parcel arrived late"
    assert txn.metadata["agent"] == "support desk"
    assert any(leg.account == "@adjustment" and leg.amount == -1250 for leg in txn.legs)
    assert ledger.wallet.balance("shop", "alice").fund("cash").total == before + 1250
    page = admin.client.get("/admin/accounts/alice").text
    assert "cash adjusted by +$12.50" in page  # the flash message
    event = page.split(f'<tr data-txn="{form["txn"]}">')[1].split("</tr>")[0]
    assert "Reason: goodwill: parcel arrived late" in event
    assert "+$12.50" in event
    per_fund = admin.client.get("/admin/accounts/alice", params={"fund": "cash"}).text
    assert "Reason: goodwill: parcel arrived late" in per_fund
    # the same form sent twice is applied once
    admin.post("/admin/accounts/alice/adjust", form)
    assert ledger.wallet.balance("shop", "alice").fund("cash").total == before + 1250
    assert "already applied" in admin.client.get("/admin/accounts/alice").text


def test_adjust_takes_points_whole_and_can_take_from_a_balance(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    points = ledger.accounts.balances("shop", "alice")[0].balance
    form = {"fund": "points", "direction": "remove", "amount": "25", "reason": "duplicate earn"}
    admin.post("/admin/accounts/alice/adjust", {**_adjust_form(admin), **form})
    assert ledger.accounts.balances("shop", "alice")[0].balance == points - 25
    half = {**form, "amount": "2.5"}
    admin.post("/admin/accounts/alice/adjust", {**_adjust_form(admin), **half})
    assert "no decimal places" in admin.client.get("/admin/accounts/alice").text
    assert ledger.accounts.balances("shop", "alice")[0].balance == points - 25


@SQLITE_ONLY
def test_adjust_needs_a_reason_an_amount_and_the_csrf_token(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    before = ledger.wallet.balance("shop", "alice").fund("cash").total
    good = {"fund": "cash", "direction": "add", "amount": "1.00", "reason": "test"}
    cases = [
        ({"reason": "   "}, "a reason is required"),
        ({"amount": "1.005"}, "more precision than USD allows"),
        ({"amount": "abc"}, "positive number of USD"),
        ({"amount": "12345678901234567"}, "too large: at most $10,000,000,000,000.00"),
        ({"fund": "gold"}, "has no fund"),
        ({"direction": "remove", "amount": "1000000"}, "Adjust failed"),
    ]
    for change, message in cases:
        admin.post("/admin/accounts/alice/adjust", {**_adjust_form(admin), **good, **change})
        assert message in admin.client.get("/admin/accounts/alice").text, change
    forged = {**_adjust_form(admin), **good, "csrf": "forged"}
    r = admin.client.post("/admin/accounts/alice/adjust", data=forged, follow_redirects=False)
    assert r.status_code == 403
    no_id = admin.post("/admin/accounts/alice/adjust", good)
    assert no_id.status_code == 303
    assert "no valid adjustment id" in admin.client.get("/admin/accounts/alice").text
    assert ledger.wallet.balance("shop", "alice").fund("cash").total == before


@SQLITE_ONLY
def test_the_adjust_form_shows_an_amount_as_the_currency_is_typed(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    """The form's hint and placeholder follow the currency's minor-unit exponent: a
    yen amount has no decimals (``14.50`` yen is refused), a dinar amount three."""
    admin.login(seeded.admin_secret)
    usd = admin.client.get("/admin/accounts/alice").text
    assert 'placeholder="14.50"' in usd
    assert "Amounts in USD (e.g. 14.50)" in usd
    for program, currency, shown, minor in (
        ("yen", "JPY", "14", 14),
        ("dinar", "KWD", "14.500", 14_500),
    ):
        ledger.programs.create(program, currency=currency)
        ledger.accounts.open(program, "taro")
        _, secret = ledger.keys.create(program, "admin", "desk")
        admin.client.cookies.clear()
        admin.login(secret)
        html = admin.client.get("/admin/accounts/taro").text
        assert (
            f'id="adjust-amount" required inputmode="decimal" maxlength="32" placeholder="{shown}"'
            in html
        )
        assert f"Amounts in {currency} (e.g. {shown})" in html
        form = {**_adjust_form(admin, "taro"), "fund": "cash", "amount": shown, "reason": "test"}
        admin.post("/admin/accounts/taro/adjust", form)
        assert ledger.accounts.get(program, "taro").funds["cash"].balance == minor


@SQLITE_ONLY
def test_taking_more_than_is_available_is_refused_in_the_funds_currency(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    """The ledger's refusal says "needed 1000000" (minor units); the page says it in
    dollars, what is available being what the balances table shows. The minor units are
    looked for as a number of their own: ids on the page (``n-<microseconds>-…``) can
    hold the digits."""
    admin.login(seeded.admin_secret)
    cash = ledger.wallet.balance("shop", "alice").fund("cash")
    form = {"fund": "cash", "direction": "remove", "amount": "10000", "reason": "test"}
    admin.post("/admin/accounts/alice/adjust", {**_adjust_form(admin), **form})
    page = admin.client.get("/admin/accounts/alice").text
    shown = format_amount(cash.available, "USD")
    assert f"Adjust failed: cash has {shown} available; $10,000.00 cannot be taken" in page
    assert not re.search(r"\b1,?000,?000\b", page)
    assert ledger.wallet.balance("shop", "alice").fund("cash") == cash


@SQLITE_ONLY
def test_a_form_giving_a_field_twice_is_refused_not_guessed(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    """``amount=1&amount=2`` adjusted by the last one ($2.00); which one was meant is a
    guess, so the form is refused (the API refuses a key given twice the same way)."""
    admin.login(seeded.admin_secret)
    before = ledger.wallet.balance("shop", "alice").fund("cash").total
    form = {**_adjust_form(admin), "csrf": admin.csrf(), "fund": "cash", "reason": "test"}
    body = urlencode([*form.items(), ("amount", "1.00"), ("amount", "2.00")])
    r = admin.client.post(
        "/admin/accounts/alice/adjust",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("text/html")
    assert "amount: given more than once" in r.text
    assert ledger.wallet.balance("shop", "alice").fund("cash").total == before
    once = urlencode([*form.items(), ("amount", "1.00")])
    r = admin.client.post(
        "/admin/accounts/alice/adjust",
        content=once,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert ledger.wallet.balance("shop", "alice").fund("cash").total == before + 100


@SQLITE_ONLY
def test_adjust_does_not_offer_or_take_the_bonus_fund(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    """Bonus is made of grants: a plain adjustment would be neither counted nor spent by
    the wallet (wallet.check would report it), so the form refuses it."""
    admin.login(seeded.admin_secret)
    html = admin.client.get("/admin/accounts/alice").text
    select = html.split('id="adjust-fund"')[1].split("</select>")[0]
    assert 'value="cash"' in select
    assert 'value="bonus"' not in select
    before = ledger.accounts.get("shop", "alice").funds["bonus"].balance
    for direction in ("add", "remove"):
        form = {"fund": "bonus", "direction": direction, "amount": "1", "reason": "goodwill"}
        admin.post("/admin/accounts/alice/adjust", {**_adjust_form(admin), **form})
        assert "grant bonus instead" in admin.client.get("/admin/accounts/alice").text
    assert ledger.accounts.get("shop", "alice").funds["bonus"].balance == before
    assert ledger.wallet.check("shop", "alice") == []


@SQLITE_ONLY
def test_adjust_needs_an_admin_session(admin: AdminClient, seeded: Seeded) -> None:
    r = admin.client.post(
        "/admin/accounts/alice/adjust",
        data={"fund": "cash", "amount": "1", "reason": "x", "csrf": "x"},
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert r.headers["location"] == "/admin/login"
    assert admin.login(seeded.read_secret).status_code == 403  # a key without admin scope


def test_capture_and_void_ask_for_confirmation_first(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    account = admin.client.get("/admin/accounts/alice").text
    hold = account.split(f'data-hold="{seeded.hold}"')[1].split("</li>")[0]
    assert 'method="get"' in hold  # the buttons lead to the confirmation page
    assert 'method="post"' not in hold
    ask = admin.client.get(f"/admin/accounts/alice/holds/{seeded.hold}/capture?amount=2.50")
    assert ask.status_code == 200
    assert "The customer is charged <strong>$2.50</strong>" in ask.text
    assert "the other <strong>$4.50</strong> is released" in ask.text
    assert 'id="cancel"' in ask.text
    assert ledger.wallet.hold("shop", seeded.hold).status == "active"  # asking changed nothing
    void = admin.client.get(f"/admin/accounts/alice/holds/{seeded.hold}/void")
    assert "All <strong>$7.00</strong> is released" in void.text
    assert ledger.wallet.hold("shop", seeded.hold).status == "active"
    too_much = admin.client.get(
        f"/admin/accounts/alice/holds/{seeded.hold}/capture",
        params={"amount": "8"},
        follow_redirects=False,
    )
    assert too_much.status_code == 303
    assert "more than the $7.00 held" in admin.client.get("/admin/accounts/alice").text
    # the confirmation page's own form does it
    form = re.search(r'<form method="post" action="([^"]+)" class="confirm-actions"', ask.text)
    assert form is not None
    assert form.group(1) == f"/admin/accounts/alice/holds/{seeded.hold}/capture"
    assert 'name="amount" value="2.50"' in ask.text
    admin.post(form.group(1), {"amount": "2.50"})
    done = ledger.wallet.hold("shop", seeded.hold)
    assert (done.status, done.captured) == ("captured", 250)
    assert "$2.50 captured" in admin.client.get("/admin/accounts/alice").text
    late = admin.client.get(
        f"/admin/accounts/alice/holds/{seeded.hold}/void", follow_redirects=False
    )
    assert late.status_code == 303  # nothing left to confirm
    assert "is captured; nothing to void" in admin.client.get("/admin/accounts/alice").text


@SQLITE_ONLY
def test_capturing_more_than_is_held_is_refused_in_the_customers_currency(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    """The confirmation page's form posts whatever amount it was given: the capture
    itself refuses more than is held the way the confirmation does, not in cents."""
    admin.login(seeded.admin_secret)
    r = admin.post(f"/admin/accounts/alice/holds/{seeded.hold}/capture", {"amount": "1,400.00"})
    assert r.status_code == 303
    page = admin.client.get("/admin/accounts/alice").text
    assert "Capture failed: the amount to capture is more than the $7.00 held" in page
    assert not re.search(r"\b140,?000\b", page)
    assert ledger.wallet.hold("shop", seeded.hold).status == "active"


def test_payloads_read_as_text_and_dismissals_as_sentences(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    html = admin.client.get("/admin/accounts/alice").text
    assert "\\u003c" not in html
    assert "&lt;b&gt;double&lt;/b&gt; points weekend &amp; more" in html
    assert "<dt>until</dt><dd>Sunday</dd>" in html
    admin.post(f"/admin/accounts/alice/notifications/{seeded.notification}/dismiss")
    ledger.notifications.add("shop", "alice", "Promo", {"text": "second"})
    ledger.notifications.add("shop", "alice", "Promo", {"text": "third"})
    html = admin.client.get("/admin/accounts/alice").text
    assert "user by user" not in html
    assert "Dismissed on request (through the API, the CLI or this page)." in html
    assert "Replaced by a newer Promo notification" in html


@SQLITE_ONLY
def test_a_tampered_timeline_cursor_is_a_clear_error(admin: AdminClient, seeded: Seeded) -> None:
    admin.login(seeded.admin_secret)
    gold = base64.urlsafe_b64encode(zlib.compress(b'{"gold":null}')).decode()  # no such fund
    for cursor in ("not-a-cursor", gold):
        r = admin.client.get("/admin/accounts/alice", params={"cursor": cursor})
        assert "the timeline cursor is not valid" in r.text  # said in the history section
        assert 'id="holds"' in r.text  # the rest of the page still shows


def test_the_account_page_shows_no_points_past_their_date(
    ledger: Ledger, clock: ManualClock
) -> None:
    """The page reads the loyalty status (which expires points past their date)
    before the balances, so both show what the member can spend."""
    from tallybook.admin.account_view import HistoryFilter, build

    ledger.programs.create("club")
    ledger.loyalty.configure("club", {"expiry": {"days": 5}})
    ledger.accounts.open("club", "ann")
    ledger.loyalty.earn("club", "ann", "o1", 3000)  # 30 points, expire in 5 days
    clock.advance(timedelta(days=6))
    page = build(ledger, "club", "ann", HistoryFilter(fund="points"), None)
    assert [b.total for b in page.balances if b.fund == "points"] == [0]


@SQLITE_ONLY
def test_a_form_over_the_body_limit_gets_an_admin_page(seeded: Seeded, ledger: Ledger) -> None:
    """A form body over the server's limit was answered the API's 413 JSON problem;
    an admin page answers its own HTML page, and the API keeps its problem+json."""
    with TestClient(create_app(ledger, max_body=1000)) as client:
        admin = AdminClient(client)
        admin.login(seeded.admin_secret)
        before = ledger.wallet.balance("shop", "alice").fund("cash").total
        form = {"fund": "cash", "direction": "add", "amount": "1.00", "reason": "x" * 2000}
        r = admin.post("/admin/accounts/alice/adjust", {**_adjust_form(admin), **form})
        assert r.status_code == 413
        assert r.headers["content-type"].startswith("text/html")
        assert "larger than the 1,000 bytes the server takes" in r.text
        assert r.headers["X-Frame-Options"] == "DENY"

        token = admin.csrf().encode()

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while reading
            yield b"csrf=" + token + b"&reason="
            yield b"x" * 2000

        kind = {"content-type": "application/x-www-form-urlencoded"}
        r = client.post("/admin/accounts/alice/adjust", content=chunks(), headers=kind)
        assert r.status_code == 413
        assert "larger than the 1,000 bytes" in r.text
        assert ledger.wallet.balance("shop", "alice").fund("cash").total == before
        api = client.post("/v1/accounts", json={"account": "x" * 2000})
        assert api.status_code == 413
        assert api.headers["content-type"] == "application/problem+json"
        assert api.json()["type"].endswith("payload-too-large")


@SQLITE_ONLY
def test_money_in_ledger_raised_notifications_reads_in_the_currency(
    admin: AdminClient, seeded: Seeded, ledger: Ledger, clock: ManualClock
) -> None:
    """A HoldExpired payload showed ``amount: 300`` (minor units), a LowBalance one its
    balance and threshold the same way; they read in the fund's unit, the stored
    value kept in the title. A client's own notification shows its payload as given."""
    ledger.accounts.open("shop", "carol")
    ledger.wallet.credit("shop", "carol", "cash", 1_000, txn_id="carol-cash")
    ledger.programs.set_low_balance_threshold("shop", "cash", 500)
    ledger.wallet.authorize("shop", "carol", 300, hold_id="carol-h", expires_in=60)
    ledger.wallet.debit("shop", "carol", 400, txn_id="carol-buy")  # available 300 < 500
    clock.advance(timedelta(seconds=61))
    ledger.wallet.reconcile("shop")  # the hold expires: HoldExpired
    ledger.notifications.add("shop", "carol", "Custom", {"amount": 300})
    admin.login(seeded.admin_secret)
    html = admin.client.get("/admin/accounts/carol").text
    assert '<dt>amount</dt><dd title="300 minor units">$3.00</dd>' in html
    assert '<dt>threshold</dt><dd title="500 minor units">$5.00</dd>' in html
    assert '<dt>available</dt><dd title="300 minor units">$3.00</dd>' in html
    assert "<dt>fund</dt><dd>cash</dd>" in html
    assert "<dt>amount</dt><dd>300</dd>" in html  # the client's Custom notification
