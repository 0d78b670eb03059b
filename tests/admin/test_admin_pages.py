"""The admin page over TestClient: sign-in, CSRF, sign-out, revocation, the account
page, and its actions."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from tallybook.admin.session import SESSION_COOKIE
from tallybook.errors import StoreUnavailable
from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.reliability.faults import FaultPlan, FaultyStore
from tallybook.services.clock import ManualClock
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import ItemStore

from .conftest import AdminClient, csrf_of
from .seeding import Seeded

#: the page's own logic (forms, CSRF, filters) does not depend on the engine, and
#: DynamoDB Local is slow: those tests run on SQLite; the ones reading and writing
#: through each capability run on both engines
SQLITE_ONLY = pytest.mark.parametrize("engine", ["sqlite"])
T = TypeVar("T")


@SQLITE_ONLY
def test_pages_need_a_session(admin: AdminClient) -> None:
    for path in ("/admin/", "/admin/accounts/alice", "/admin/search?q=alice"):
        r = admin.client.get(path, follow_redirects=False)
        assert r.status_code == 303
        assert r.headers["location"] == "/admin/login"


def test_login_sets_a_strict_http_only_cookie_and_shows_the_program(
    admin: AdminClient, seeded: Seeded
) -> None:
    r = admin.login(seeded.admin_secret)
    assert r.status_code == 303
    assert r.headers["location"] == "/admin/"
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE))
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert seeded.admin_secret not in cookie
    page = admin.client.get("/admin/")
    assert page.status_code == 200
    assert "Members per tier" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")


@SQLITE_ONLY
def test_a_wrong_key_or_a_key_without_admin_scope_is_refused(
    admin: AdminClient, seeded: Seeded
) -> None:
    wrong = admin.login("tb_0123456789abcdef_" + "x" * 40)
    assert wrong.status_code == 401
    assert "Unknown or revoked API key" in wrong.text
    no_scope = admin.login(seeded.read_secret)
    assert no_scope.status_code == 403
    assert "lacks the admin scope" in no_scope.text
    assert admin.client.get("/admin/", follow_redirects=False).status_code == 303


@SQLITE_ONLY
def test_login_without_the_form_token_is_refused(admin: AdminClient, seeded: Seeded) -> None:
    r = admin.client.post(
        "/admin/login", data={"api_key": seeded.admin_secret}, follow_redirects=False
    )
    assert r.status_code == 403
    assert f"{SESSION_COOKIE}=" not in r.headers.get("set-cookie", "")


@SQLITE_ONLY
def test_actions_without_csrf_token_change_nothing(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    url = f"/admin/accounts/alice/holds/{seeded.hold}/void"
    for data in ({}, {"csrf": "forged"}):
        r = admin.client.post(url, data=data, follow_redirects=False)
        assert r.status_code == 403
    assert ledger.wallet.hold("shop", seeded.hold).status == "active"
    r = admin.client.post("/admin/logout", data={"csrf": "forged"}, follow_redirects=False)
    assert r.status_code == 403
    assert admin.client.get("/admin/").status_code == 200


@SQLITE_ONLY
def test_a_forged_session_cookie_is_ignored(admin: AdminClient, seeded: Seeded) -> None:
    admin.login(seeded.admin_secret)
    value = admin.client.cookies[SESSION_COOKIE]
    payload, mac = value.split(".")
    admin.client.cookies.clear()
    admin.client.cookies.set(SESSION_COOKIE, payload + "." + mac[::-1])
    r = admin.client.get("/admin/", follow_redirects=False)
    assert r.status_code == 303


@SQLITE_ONLY
def test_non_ascii_tokens_and_cookies_are_refused_not_a_500(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    login_page = admin.client.get("/admin/login")
    assert login_page.status_code == 200
    r = admin.client.post("/admin/login", data={"api_key": seeded.admin_secret, "csrf": "é"})
    assert r.status_code == 403
    assert "The form expired" in r.text
    admin.login(seeded.admin_secret)
    url = f"/admin/accounts/alice/holds/{seeded.hold}/void"
    r = admin.client.post(url, data={"csrf": "jeton-é"}, follow_redirects=False)
    assert r.status_code == 403
    assert ledger.wallet.hold("shop", seeded.hold).status == "active"
    session = admin.client.cookies[SESSION_COOKIE]
    admin.client.cookies.clear()
    for cookie in (f"{session[:-1]}\xe9", "x.\xe9", "tb.\xe9.x"):
        for name in (SESSION_COOKIE, "tb_admin_login"):
            raw = f"{name}={cookie}".encode("latin-1")
            r = admin.client.get("/admin/", headers={"Cookie": raw}, follow_redirects=False)
            assert r.status_code == 303, (name, cookie)
    r = admin.client.post(
        "/admin/login",
        data={"api_key": seeded.admin_secret, "csrf": "x"},
        headers={"Cookie": "tb_admin_login=a.1.\xe9".encode("latin-1")},
    )
    assert r.status_code == 403


def test_a_revoked_key_is_signed_out_on_the_next_request(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    assert admin.client.get("/admin/").status_code == 200
    key = ledger.keys.authenticate(seeded.admin_secret)
    ledger.keys.revoke(key.id)
    r = admin.client.get("/admin/accounts/alice", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/admin/login"
    login = admin.client.get("/admin/login")
    assert "revoked" in login.text


@SQLITE_ONLY
def test_a_busy_store_is_a_page_saying_so_and_keeps_the_session(
    store: ItemStore, clock: ManualClock, seeded: Seeded
) -> None:
    """The store throttling the read of the agent's key is not a sign-out ("your API
    key no longer exists"), nor at sign-in an "unknown key": the page says the ledger
    could not answer, and the session holds once the store answers again."""
    faulty = FaultyStore(store)
    with TestClient(create_app(Ledger(faulty, clock=clock))) as client:
        admin = AdminClient(client)
        assert admin.login(seeded.admin_secret).status_code == 303
        faulty.plan = FaultPlan(throttle=1.0, throttle_burst=1_000_000)
        for path in ("/admin/", "/admin/accounts/alice", "/admin/webhooks"):
            r = client.get(path, follow_redirects=False)
            assert r.status_code in (429, 503), path
            assert r.headers["content-type"].startswith("text/html")
            assert "could not answer just now; try again" in r.text
            assert "no longer exists" not in r.text
            assert SESSION_COOKIE not in r.headers.get("set-cookie", "")
        client.cookies.delete(SESSION_COOKIE)
        token = csrf_of(client.get("/admin/login").text)
        r = client.post("/admin/login", data={"api_key": seeded.admin_secret, "csrf": token})
        assert r.status_code in (429, 503)
        assert "Unknown or revoked" not in r.text
        assert "could not answer just now" in r.text
        faulty.armed = False
        assert admin.login(seeded.admin_secret).status_code == 303
        assert client.get("/admin/accounts/alice").status_code == 200


class ReadsFail(ForwardingStore):
    """Answers ``answered`` more reads, then refuses every read as unavailable."""

    answered: int | None = None  # None: every read is answered

    def around_read(self, read: Callable[[], T]) -> T:
        if self.answered is not None:
            if self.answered <= 0:
                raise StoreUnavailable("injected: the store did not answer")
            self.answered -= 1
        return read()


@SQLITE_ONLY
def test_a_store_failing_after_the_sign_in_check_is_a_503_page_not_a_500(
    store: ItemStore, clock: ManualClock, seeded: Seeded
) -> None:
    """The agent's key is read (the first read of a request); the page's own reads then
    fail: the account, tier, search and report pages answer 503 saying so, not 500 or
    422 ("not valid")."""
    failing = ReadsFail(store)
    with TestClient(create_app(Ledger(failing, clock=clock))) as client:
        assert AdminClient(client).login(seeded.admin_secret).status_code == 303
        for path in (
            "/admin/accounts/alice",
            "/admin/tiers/member",
            "/admin/search?q=alice",
            "/admin/reports/billing/20260101T000000Z_20260101T010000Z/billing.json",
        ):
            failing.answered = 1
            r = client.get(path, follow_redirects=False)
            assert r.status_code == 503, path
            assert r.headers["content-type"].startswith("text/html"), path
            assert "the store did not answer" in r.text, path
        failing.answered = None
        assert client.get("/admin/accounts/alice").status_code == 200


def test_logout_ends_the_session(admin: AdminClient, seeded: Seeded) -> None:
    admin.login(seeded.admin_secret)
    r = admin.post("/admin/logout")
    assert r.status_code == 303
    assert r.headers["location"] == "/admin/login"
    assert admin.client.get("/admin/", follow_redirects=False).status_code == 303


def test_search_by_account_and_by_order(admin: AdminClient, seeded: Seeded) -> None:
    admin.login(seeded.admin_secret)
    by_account = admin.client.get("/admin/search", params={"q": "alice"}, follow_redirects=False)
    assert by_account.headers["location"] == "/admin/accounts/alice"
    by_order = admin.client.get(
        "/admin/search", params={"q": seeded.order, "by": "order"}, follow_redirects=False
    )
    assert by_order.headers["location"] == "/admin/accounts/alice"
    missing = admin.client.get("/admin/search", params={"q": "nobody"})
    assert missing.status_code == 404
    assert "no account or order" in missing.text
    bad = admin.client.get("/admin/search", params={"q": "a/b"})
    assert bad.status_code == 422


def test_account_page_shows_every_section(admin: AdminClient, seeded: Seeded) -> None:
    admin.login(seeded.admin_secret)
    r = admin.client.get("/admin/accounts/alice", params={"fund": "cash"})
    assert r.status_code == 200
    html = r.text
    for section in ('id="balances"', 'id="history"', 'id="holds"', 'id="notifications"'):
        assert section in html
    assert "<svg" in html
    assert "<circle" in html  # the chart has points
    assert 'data-hold="hold-1"' in html
    assert f'data-notification="{seeded.notification}"' in html
    assert 'id="tier"' in html
    assert ">member<" in html or ">silver<" in html or ">gold<" in html
    # the cash row: $7.00 withheld by the hold (700 cents, shown in the program's currency)
    row = html.split('data-fund="cash"')[1].split("</tr>")[0]
    assert ">$7.00<" in row


@SQLITE_ONLY
def test_a_held_credit_shows_when_it_is_released_not_a_capture_deadline(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    """A held credit (sale proceeds) is released on its date; "Captured $0.00" and a
    "Deadline" told the agent of a capture that never comes."""
    held = ledger.wallet.credit_held(
        "shop", "alice", "store_credit", 2_500, release_in_days=3, txn_id="sale-1"
    ).hold
    admin.login(seeded.admin_secret)
    page = admin.client.get("/admin/accounts/alice").text
    card = page.split('data-hold="sale-1"')[1].split("</li>")[0]
    assert "<dt>Releases (UTC)</dt>" in card
    assert held.deadline.strftime("%Y-%m-%d %H:%M:%S") in card
    assert "Captured" not in card
    assert "Deadline" not in card
    assert "Capture…" not in card  # released by the reconcile job, not by an agent
    debit = page.split(f'data-hold="{seeded.hold}"')[1].split("</li>")[0]
    assert "<dt>Captured</dt>" in debit
    assert "<dt>Deadline (UTC)</dt>" in debit


@SQLITE_ONLY
def test_history_pages_and_filters(admin: AdminClient, seeded: Seeded) -> None:
    admin.login(seeded.admin_secret)
    first = admin.client.get("/admin/accounts/alice", params={"fund": "cash", "limit": 1})
    assert 'id="next-page"' in first.text
    assert (
        admin.client.get("/admin/accounts/alice", params={"since": "2999-01-01"}).text.count(
            "No entry in this range"
        )
        == 1
    )
    bad = admin.client.get("/admin/accounts/alice", params={"since": "yesterday"})
    assert bad.status_code == 422
    assert "2026-01-31" in bad.text
    missing = admin.client.get("/admin/accounts/nobody")
    assert missing.status_code == 404


def test_void_a_hold_and_dismiss_a_notification(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    r = admin.post(f"/admin/accounts/alice/holds/{seeded.hold}/void")
    assert r.status_code == 303
    assert r.headers["location"] == "/admin/accounts/alice#holds"
    assert ledger.wallet.hold("shop", seeded.hold).status == "voided"
    assert "is voided" in admin.client.get("/admin/accounts/alice").text
    r = admin.post(f"/admin/accounts/alice/notifications/{seeded.notification}/dismiss")
    assert r.status_code == 303
    active = ledger.notifications.list("shop", "alice")
    assert seeded.notification not in {n.id for n in active}


@SQLITE_ONLY
def test_capture_part_of_a_hold(admin: AdminClient, seeded: Seeded, ledger: Ledger) -> None:
    admin.login(seeded.admin_secret)
    bad = admin.post(f"/admin/accounts/alice/holds/{seeded.hold}/capture", {"amount": "-5"})
    assert bad.status_code == 303
    assert "positive number of USD" in admin.client.get("/admin/accounts/alice").text
    assert ledger.wallet.hold("shop", seeded.hold).status == "active"
    admin.post(f"/admin/accounts/alice/holds/{seeded.hold}/capture", {"amount": "2.00"})
    hold = ledger.wallet.hold("shop", seeded.hold)
    assert (hold.status, hold.captured) == ("captured", 200)


@SQLITE_ONLY
def test_a_hold_of_another_account_is_refused(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    admin.login(seeded.admin_secret)
    admin.post(f"/admin/accounts/bob/holds/{seeded.hold}/void")
    assert ledger.wallet.hold("shop", seeded.hold).status == "active"
    assert "not on account bob" in admin.client.get("/admin/accounts/bob").text


def test_overview_tiers_and_report_download(
    admin: AdminClient, seeded: Seeded, ledger: Ledger, engine: str
) -> None:
    admin.login(seeded.admin_secret)
    home = admin.client.get("/admin/")
    assert 'href="/admin/tiers/member"' in home.text
    members = admin.client.get("/admin/tiers/member")
    assert members.status_code == 200
    assert admin.client.get("/admin/tiers/nosuch").status_code == 404
    if engine != "sqlite":
        return  # the lean DynamoDB seed writes no report
    reports = ledger.billing.reports.list("shop")
    assert reports
    info = reports[0]
    name = sorted(info.sha256)[0]
    url = f"/admin/reports/{info.kind}/{info.window}/{name}"
    assert f'href="{url}"' in home.text
    r = admin.client.get(url)
    assert r.status_code == 200
    assert r.headers["content-disposition"] == f'attachment; filename="{name}"'
    assert r.content == ledger.billing.reports.render("shop", info.kind, info.window)[name]
    assert admin.client.get(f"/admin/reports/{info.kind}/{info.window}/nope.csv").status_code == 404


@SQLITE_ONLY
def test_an_action_returns_to_the_same_history_filter(admin: AdminClient, seeded: Seeded) -> None:
    admin.login(seeded.admin_secret)
    page = admin.client.get("/admin/accounts/alice", params={"fund": "cash", "limit": 10})
    assert 'name="view" value="fund=cash&amp;order=newest&amp;limit=10"' in page.text
    r = admin.post(
        f"/admin/accounts/alice/holds/{seeded.hold}/void",
        {"view": "fund=cash&limit=10&next=https://evil.example/&cursor=x"},
    )
    assert r.headers["location"] == "/admin/accounts/alice?fund=cash&limit=10#holds"


@SQLITE_ONLY
def test_a_bare_program_says_what_is_not_set_up(ledger: Ledger) -> None:
    from fastapi.testclient import TestClient

    from tallybook.http.app import create_app

    ledger.programs.create("bare")
    _, secret = ledger.keys.create("bare", "admin")
    with TestClient(create_app(ledger)) as client:
        admin = AdminClient(client)
        assert admin.login(secret).status_code == 303
        home = client.get("/admin/")
        assert home.status_code == 200
        assert "no loyalty configuration" in home.text
        assert "No report has been written yet" in home.text
        ledger.accounts.open("bare", "carol")
        page = client.get("/admin/accounts/carol")
        assert page.status_code == 200
        assert "no loyalty program" in page.text
        assert "No hold." in page.text
        assert "No entry in this range." in page.text  # the timeline of all funds
        cash = client.get("/admin/accounts/carol", params={"fund": "cash"})
        assert "no entries in this range" in cash.text  # the chart of one fund


@SQLITE_ONLY
def test_an_order_on_several_accounts_lists_them(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    ledger.transactions.credit("shop", "alice", "cash", 5, txn_id="refund-a", order_id="o-77")
    ledger.transactions.credit("shop", "bob", "cash", 5, txn_id="refund-b", order_id="o-77")
    admin.login(seeded.admin_secret)
    r = admin.client.get("/admin/search", params={"q": "o-77"})
    assert r.status_code == 200
    assert 'href="/admin/accounts/alice"' in r.text
    assert 'href="/admin/accounts/bob"' in r.text
    assert "refund-a" in r.text
    assert "+$0.05" in r.text  # legs in the program's currency


def test_a_bad_value_on_a_page_is_an_html_page_and_the_api_keeps_problem_json(
    admin: AdminClient, seeded: Seeded
) -> None:
    admin.login(seeded.admin_secret)
    for path in (
        f"/admin/accounts/{seeded.account}?limit=0",
        f"/admin/accounts/{seeded.account}?order=sideways",
    ):
        r = admin.client.get(path)
        assert r.status_code == 422, path
        assert r.headers["content-type"].startswith("text/html"), path
        assert "Not a valid request" in r.text
        assert "Go back, correct it" in r.text
    api = admin.client.get(
        f"/v1/accounts/{seeded.account}/entries?fund=cash&limit=0",
        headers={"Authorization": f"Bearer {seeded.read_secret}"},
    )
    assert api.status_code == 422
    assert api.headers["content-type"].startswith("application/problem+json")


@SQLITE_ONLY
def test_an_unknown_admin_address_is_an_html_page_and_the_api_keeps_problem_json(
    admin: AdminClient, seeded: Seeded
) -> None:
    admin.login(seeded.admin_secret)
    for path in (
        "/admin/reports/billing/..%2F..%2Fetc/passwd",  # traversal in a report download
        "/admin/static/..%2fweb.py",
        "/admin/static/no-such.css",
        f"/admin/accounts/{seeded.account}/holds/{seeded.hold}",
        "/admin/no-such-page",
    ):
        r = admin.client.get(path)
        assert r.status_code == 404, path
        assert r.headers["content-type"].startswith("text/html"), path
        assert "There is no such page." in r.text
        # its links lead to the page's own addresses, also under the static files' mount
        assert 'href="/admin/static/admin.css"' in r.text, path
        assert 'href="/admin/">Back to the search' in r.text, path
        assert r.headers["x-frame-options"] == "DENY"
    wrong_method = admin.client.get("/admin/logout")
    assert wrong_method.status_code == 405
    assert wrong_method.headers["content-type"].startswith("text/html")
    assert "POST" in wrong_method.headers["allow"]
    api = admin.client.get("/v1/no-such-thing")
    assert api.status_code == 404
    assert api.headers["content-type"].startswith("application/problem+json")


@SQLITE_ONLY
def test_paging_notifications_keeps_the_history_view_and_paging_history_keeps_them(
    admin: AdminClient, seeded: Seeded, ledger: Ledger
) -> None:
    for i in range(25):  # more than one page of notification history
        ledger.notifications.add("shop", "alice", "Note", {"i": i})
    admin.login(seeded.admin_secret)
    view = {"fund": "cash", "limit": "2", "order": "oldest"}
    html = admin.client.get("/admin/accounts/alice", params=view).text
    older = re.search(r'href="([^"]+)#sent" id="older-notifications"', html)
    assert older is not None
    query = parse_qs(urlsplit(older.group(1).replace("&amp;", "&")).query)
    assert {k: query[k] for k in view} == {k: [v] for k, v in view.items()}
    assert query["ncursor"]
    html = admin.client.get(
        "/admin/accounts/alice", params={**view, "ncursor": query["ncursor"][0]}
    ).text
    nxt = re.search(r'href="([^"]+)#history" id="next-page"', html)
    assert nxt is not None
    following = parse_qs(urlsplit(nxt.group(1).replace("&amp;", "&")).query)
    assert following["ncursor"] == query["ncursor"]  # still on the older notifications
    assert following["fund"] == ["cash"]
