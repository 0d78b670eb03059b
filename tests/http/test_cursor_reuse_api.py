"""A cursor continues the listing that returned it, and no other.

A cursor from a newest-first page continued oldest first answered the page
it had just shown; an account's transactions cursor continued another
account's from the first one's position; an expiring-points cursor was read
under another ``days``, and a billing cursor under another range (listing
records before ``since``). Each is now a 400 ``cursor does not belong to this
query`` on every listing that takes a cursor, over HTTP, in the Python API
and the CLI, on both engines.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.cli import main
from tallybook.errors import StoreValidationError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore

Headers = dict[str, str]
RULES: dict[str, Any] = {
    "tiers": [
        {"name": "base", "threshold": 0},
        {"name": "silver", "threshold": 50},
        {"name": "gold", "threshold": 150},
    ],
    "expiry": {"days": 30},
}
FOREIGN = "cursor does not belong to this query"


def _refused(client: TestClient, url: str, params: dict[str, Any], headers: Headers) -> None:
    r = client.get(url, params=params, headers=headers)
    assert r.status_code == 400, (url, params, r.text)
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"] == FOREIGN, (url, params)


def _first_page(
    client: TestClient, url: str, params: dict[str, Any], headers: Headers
) -> tuple[list[Any], str]:
    r = client.get(url, params={**params, "limit": 1}, headers=headers)
    assert r.status_code == 200, (url, r.text)
    body = r.json()
    assert body["cursor"], (url, body)
    items = next(v for k, v in body.items() if isinstance(v, list) and k != "accounts")
    return items, str(body["cursor"])


def _seed(ledger: Ledger, clock: ManualClock) -> None:
    ledger.loyalty.configure("shop", RULES)
    for account in ("ann", "bob"):
        ledger.accounts.open("shop", account)
        for i, amount in enumerate((4000, 6000, 10000)):  # base -> silver -> gold
            ledger.loyalty.earn("shop", account, f"{account}-o{i}", amount)
            clock.advance(timedelta(seconds=1))
        for i in range(3):
            ledger.notifications.add("shop", account, "Promo", {"n": i})
            clock.advance(timedelta(seconds=1))
    for i in range(3):
        ledger.billing.ingest(
            "shop",
            f"r{i}",
            partner="acme",
            order_id=f"b-{i}",
            amount=1000,
            currency="USD",
            rate="0.05",
            time=clock.now() - timedelta(minutes=1),
        )


def test_a_cursor_is_refused_by_every_other_listing(
    app_client: TestClient, ledger: Ledger, clock: ManualClock, read_headers: Headers
) -> None:
    _seed(ledger, clock)
    since = (clock.now() - timedelta(hours=1)).isoformat()
    until = (clock.now() + timedelta(hours=1)).isoformat()
    # url, the listing's own parameters, and other listings' (same url) to refuse
    listings: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = [
        (
            "/v1/accounts/ann/entries",
            {"fund": "points"},
            [
                {"fund": "points", "order": "oldest"},
                {"fund": "points", "since": since},
                {"fund": "points", "until": until},
            ],
        ),
        (
            "/v1/accounts/ann/entries",
            {"fund": "points", "order": "oldest"},
            [{"fund": "points"}, {"fund": "points", "order": "newest"}],
        ),
        ("/v1/accounts/ann/transactions", {}, []),
        ("/v1/accounts/ann/wallet/transactions", {}, []),
        (
            "/v1/accounts/ann/notifications/history",
            {},
            [{"order": "oldest"}, {"since": since}, {"until": until}],
        ),
        (
            "/v1/accounts/ann/notifications/history",
            {"order": "oldest"},
            [{}, {"order": "oldest", "since": since}],
        ),
        ("/v1/accounts/ann/tier/history", {}, []),
        ("/v1/accounts/ann/expiring", {"days": 31}, [{"days": 60}, {}]),
        (
            "/v1/billing/records",
            {"since": since, "until": until},
            [
                {"since": since, "until": (clock.now() + timedelta(hours=2)).isoformat()},
                {"since": (clock.now() - timedelta(hours=2)).isoformat(), "until": until},
            ],
        ),
    ]
    for url, params, others in listings:
        first, cursor = _first_page(app_client, url, params, read_headers)
        for other in others:
            _refused(app_client, url, {**other, "cursor": cursor}, read_headers)
        if "/ann/" in url:  # another account's listing
            _refused(
                app_client,
                url.replace("/ann/", "/bob/"),
                {**params, "cursor": cursor},
                read_headers,
            )
        # the listing itself goes on, with any page size, and never repeats an item
        rest = app_client.get(url, params={**params, "cursor": cursor}, headers=read_headers)
        assert rest.status_code == 200, (url, rest.text)
        items = next(v for k, v in rest.json().items() if isinstance(v, list) and k != "accounts")
        assert items, url
        assert first[0] not in items, (url, first, items)
    # each engine's own refusal of a tier's cursor on another tier stays
    _, members = _first_page(app_client, "/v1/tiers/gold/members", {}, read_headers)
    _refused(app_client, "/v1/tiers/silver/members", {"cursor": members}, read_headers)


def test_python_api_and_cli_refuse_a_cursor_continued_in_the_other_order(
    ledger: Ledger,
    store: ItemStore,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _seed(ledger, clock)
    page = ledger.accounts.history("shop", "ann", "points", limit=1)
    assert page.cursor is not None
    with pytest.raises(StoreValidationError, match=FOREIGN):
        ledger.accounts.history("shop", "ann", "points", newest_first=False, cursor=page.cursor)
    notes = ledger.notifications.history("shop", "ann", limit=1)
    assert notes.cursor is not None
    with pytest.raises(StoreValidationError, match=FOREIGN):
        ledger.notifications.history("shop", "ann", newest_first=False, cursor=notes.cursor)
    txns = ledger.transactions.for_owner("shop", "ann", limit=1)
    assert txns.cursor is not None
    with pytest.raises(StoreValidationError, match=FOREIGN):
        ledger.transactions.for_owner("shop", "bob", cursor=txns.cursor)

    argv = ["tallybook", "history", "ann", "-p", "shop", "--fund", "points", "--oldest-first"]
    monkeypatch.setattr(sys, "argv", [*argv, "--cursor", page.cursor, "--store", store.describe()])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    assert exited.value.code == 2, (out, err)
    assert err.strip().splitlines() == [f"error: {FOREIGN}"], err
    assert "Traceback" not in out + err


def test_a_webhook_deliveries_cursor_is_refused_by_another_subscription(
    app_client: TestClient,
    ledger: Ledger,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TALLYBOOK_WEBHOOKS_ALLOW_HTTP", "1")
    subs = []
    for _ in range(2):
        r = app_client.post(
            "/v1/webhooks",
            json={"url": "http://127.0.0.1:9/h", "allow_http": True},
            headers=idem(admin_headers),
        )
        assert r.status_code == 201, r.text
        subs.append(r.json()["id"])
    for account in ("ann", "bob", "cy"):
        ledger.accounts.open("shop", account)
        ledger.transactions.credit("shop", account, "points", 5, txn_id=f"c-{account}")
    ledger.webhooks.worker().run_once()  # nothing listens on port 9: failed attempts
    url = f"/v1/webhooks/{subs[0]}/deliveries"
    first, cursor = _first_page(app_client, url, {}, admin_headers)
    _refused(app_client, f"/v1/webhooks/{subs[1]}/deliveries", {"cursor": cursor}, admin_headers)
    rest = app_client.get(url, params={"cursor": cursor}, headers=admin_headers)
    assert rest.status_code == 200, rest.text
    assert rest.json()["deliveries"]
    assert first[0] not in rest.json()["deliveries"]
