"""Issue 17 defects 9 and 10 over HTTP, both engines: paged expiring points with a
total over every lot, and members of a tier with their points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from tallybook.ledger import Ledger

Headers = dict[str, str]
RULES: dict[str, Any] = {
    "tiers": [{"name": "base", "threshold": 0}, {"name": "silver", "threshold": 50}],
    "expiry": {"days": 30},
}


def test_expiring_total_covers_every_lot_and_lots_are_paged(
    app_client: TestClient, ledger: Ledger, read_headers: Headers
) -> None:
    """Defect 9: 120 one-point lots answered ``points: 100`` (the page) and no cursor."""
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "alice")
    for i in range(120):
        ledger.loyalty.earn("shop", "alice", f"o-{i}", 100)  # one point each
    url = "/v1/accounts/alice/expiring?days=31"
    first = app_client.get(url, headers=read_headers).json()
    assert first["points"] == 120
    assert len(first["lots"]) == 100
    assert first["cursor"] is not None
    # the same listing (days=31: params replace the URL's query)
    params = {"days": 31, "cursor": first["cursor"]}
    second = app_client.get(url, params=params, headers=read_headers).json()
    assert (second["points"], len(second["lots"]), second["cursor"]) == (120, 20, None)
    orders = [lot["order_id"] for lot in first["lots"] + second["lots"]]
    assert orders == [f"o-{i}" for i in range(120)]
    small = app_client.get(url, params={"limit": 7}, headers=read_headers).json()
    assert (small["points"], len(small["lots"])) == (120, 7)


def test_members_by_tier_list_points_and_qualifying_points(
    app_client: TestClient,
    ledger: Ledger,
    read_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    """Defect 10: ``GET /v1/tiers/silver/members`` answered ids only."""
    ledger.loyalty.configure("shop", RULES)
    for i, amount in enumerate((6000, 7000, 8000)):
        ledger.accounts.open("shop", f"m{i}")
        ledger.loyalty.earn("shop", f"m{i}", f"o-{i}", amount)
    ledger.loyalty.redeem("shop", "m1", 10, "mug", txn_id="r-1")
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        r = app_client.get("/v1/tiers/silver/members", params=params, headers=read_headers)
        assert r.status_code == 200, r.text
        page = r.json()
        assert page["accounts"] == [m["account"] for m in page["members"]]
        seen += page["members"]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert sorted(seen, key=lambda m: m["account"]) == [
        {"account": "m0", "points": 60, "qualifying_points": 60},
        {"account": "m1", "points": 60, "qualifying_points": 70},  # earned, not redeemed
        {"account": "m2", "points": 80, "qualifying_points": 80},
    ]


def test_a_cursor_is_refused_on_another_tier_or_member(
    app_client: TestClient, ledger: Ledger, read_headers: Headers
) -> None:
    """A members cursor of one tier continued on another skipped that tier's first
    shards, and an expiring cursor of one member skipped another's first lots,
    answering 200 with members or lots missing; both are a 400 now."""
    ledger.loyalty.configure("shop", RULES)
    for i in range(6):
        ledger.accounts.open("shop", f"m{i}")
        ledger.loyalty.earn("shop", f"m{i}", f"o-{i}", 100)  # base tier
        ledger.loyalty.earn("shop", f"m{i}", f"p-{i}", 100 * (60 + i))  # silver
    for i in range(6):
        ledger.accounts.open("shop", f"b{i}")
        ledger.loyalty.earn("shop", f"b{i}", f"q-{i}", 100)
    cursors: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = app_client.get("/v1/tiers/base/members", params=params, headers=read_headers)
        cursor = page.json()["cursor"]
        if cursor is None:
            break
        cursors.append(cursor)
    assert len(cursors) == 5
    for c in cursors:
        r = app_client.get("/v1/tiers/silver/members", params={"cursor": c}, headers=read_headers)
        assert r.status_code == 400, r.text
        assert r.headers["content-type"].startswith("application/problem+json")

    first = app_client.get(
        "/v1/accounts/m0/expiring", params={"days": 31, "limit": 1}, headers=read_headers
    ).json()
    assert first["cursor"] is not None
    other = app_client.get(
        "/v1/accounts/m1/expiring",
        params={"days": 31, "cursor": first["cursor"]},
        headers=read_headers,
    )
    assert other.status_code == 400, other.text
    same = app_client.get(
        "/v1/accounts/m0/expiring",
        params={"days": 31, "cursor": first["cursor"]},
        headers=read_headers,
    ).json()
    assert [lot["order_id"] for lot in same["lots"]] == ["p-0"]
