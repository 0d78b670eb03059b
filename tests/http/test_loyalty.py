"""The loyalty HTTP API on both engines."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from tallybook.services.clock import ManualClock

Headers = dict[str, str]
RULES: dict[str, Any] = {
    "tiers": [
        {"name": "base", "threshold": 0},
        {"name": "gold", "threshold": 100, "multiplier": 1.5},
    ],
    "expiry": {"days": 5},
}


def _setup(client: TestClient, admin: Headers, open_account: Callable[..., Any]) -> None:
    r = client.put("/v1/program/loyalty", json=RULES, headers=admin)
    assert r.status_code == 200, r.text
    assert r.json()["tiers"][1]["multiplier"] == "1.5"
    open_account("alice")


def test_rules_need_admin_and_are_validated(
    app_client: TestClient, write_headers: Headers, admin_headers: Headers
) -> None:
    assert (
        app_client.put("/v1/program/loyalty", json=RULES, headers=write_headers).status_code == 403
    )
    r = app_client.put(
        "/v1/program/loyalty", json={"earn": {"rounding": "sideways"}}, headers=admin_headers
    )
    assert r.status_code == 400
    assert r.json()["type"].endswith("/invalid-config")
    assert "earn.rounding" in r.json()["detail"]
    # no rules yet: nothing to read (was 400 invalid-config)
    assert app_client.get("/v1/program/loyalty", headers=write_headers).status_code == 404


def test_earn_redeem_tier_order_expiring(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    _setup(app_client, admin_headers, open_account)
    body = {"order_id": "o-1", "amount": 12000}
    first = app_client.post("/v1/accounts/alice/earn", json=body, headers=write_headers)
    assert first.status_code == 201, first.text
    assert (first.json()["points"], first.json()["tier"]) == (120, "gold")
    again = app_client.post("/v1/accounts/alice/earn", json=body, headers=write_headers)
    assert again.status_code == 200
    assert again.json()["transaction"]["id"] == "order:o-1"
    conflict = app_client.post(
        "/v1/accounts/alice/earn", json={"order_id": "o-1", "amount": 1}, headers=write_headers
    )
    assert conflict.status_code == 409

    order = app_client.get("/v1/orders/o-1", headers=write_headers)
    assert (order.json()["account"], order.json()["points"]) == ("alice", 120)
    assert app_client.get("/v1/orders/nope", headers=write_headers).status_code == 404

    tier = app_client.get("/v1/accounts/alice/tier", headers=write_headers).json()
    assert (tier["tier"], tier["balance"], tier["qualifying_points"]) == ("gold", 120, 120)
    history = app_client.get("/v1/accounts/alice/tier/history", headers=write_headers).json()
    assert [c["tier"] for c in history["changes"]] == ["gold"]
    members = app_client.get("/v1/tiers/gold/members?limit=10", headers=write_headers).json()
    assert members["accounts"] == ["alice"]

    poor = app_client.post(
        "/v1/accounts/alice/redeem", json={"points": 500, "reward_id": "tv"}, headers=idem()
    )
    assert poor.status_code == 422
    assert poor.json()["type"].endswith("/insufficient-funds")
    assert "insufficient points" in poor.json()["detail"]
    ok = app_client.post(
        "/v1/accounts/alice/redeem", json={"points": 20, "reward_id": "mug"}, headers=idem()
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["balance"] == 100

    soon = app_client.get("/v1/accounts/alice/expiring?days=10", headers=write_headers).json()
    assert soon["points"] == 100
    assert soon["lots"][0]["order_id"] == "o-1"


def test_expire_job_over_http(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    open_account: Callable[..., Any],
    clock: ManualClock,
) -> None:
    _setup(app_client, admin_headers, open_account)
    app_client.post(
        "/v1/accounts/alice/earn", json={"order_id": "o-2", "amount": 3000}, headers=write_headers
    )
    assert app_client.post("/v1/loyalty/expire", headers=write_headers).status_code == 403
    clock.advance(timedelta(days=6))
    r = app_client.post("/v1/loyalty/expire", headers=admin_headers)
    assert r.status_code == 200, r.text
    assert (r.json()["points"], r.json()["lots"]) == (30, 1)
    again = app_client.post("/v1/loyalty/expire", headers=admin_headers).json()
    assert again["points"] == 0
    tier = app_client.get("/v1/accounts/alice/tier", headers=write_headers).json()
    assert tier["balance"] == 0
    review = app_client.post("/v1/loyalty/downgrade", headers=admin_headers)
    assert review.json() == {"members": 0, "downgraded": 0}


def test_an_earn_naming_the_programs_currency_replays_one_that_left_it_out(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    """Leaving ``currency`` out means the program's: the same order reported with
    it named (or the other way round) is the same request, a replay, not a 409."""
    _setup(app_client, admin_headers, open_account)
    url = "/v1/accounts/alice/earn"
    currency = app_client.get("/v1/program", headers=write_headers).json()["currency"]
    bare = app_client.post(url, json={"order_id": "o-1", "amount": 500}, headers=write_headers)
    assert bare.status_code == 201, bare.text
    named = {"order_id": "o-1", "amount": 500, "currency": currency}
    again = app_client.post(url, json=named, headers=write_headers)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == bare.json()

    first = app_client.post(url, json={**named, "order_id": "o-2"}, headers=write_headers)
    assert first.status_code == 201, first.text
    replay = app_client.post(url, json={"order_id": "o-2", "amount": 500}, headers=write_headers)
    assert replay.status_code == 200, replay.text
    assert replay.json()["transaction"] == first.json()["transaction"]
    # another amount is still a conflict, named currency or not
    for body in ({**named, "amount": 501}, {"order_id": "o-1", "amount": 501}):
        assert app_client.post(url, json=body, headers=write_headers).status_code == 409
    other = app_client.post(url, json={**named, "currency": "EUR"}, headers=write_headers)
    assert other.status_code in (409, 422)
    balances = app_client.get("/v1/accounts/alice/balances", headers=write_headers).json()
    assert {b["fund"]: b["balance"] for b in balances["balances"]}["points"] == 10


def test_an_earns_lot_expires_is_written_as_every_other_time(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    """docs/http.md "Times": an earn answered its lot's expiry as ``...+00:00``
    (its stored form) where every other time, the same lot's expiry on the
    expiring page included, is ``...Z``; it is now ``...Z`` too, in the earn's
    answer, its replay and its transaction's details."""
    _setup(app_client, admin_headers, open_account)
    body = {"order_id": "o-1", "amount": 12000}
    first = app_client.post("/v1/accounts/alice/earn", json=body, headers=write_headers).json()
    again = app_client.post("/v1/accounts/alice/earn", json=body, headers=write_headers).json()
    lot = app_client.get("/v1/accounts/alice/expiring?days=10", headers=write_headers).json()
    lot = lot["lots"][0]
    # the format of the lot's earned_at (and of every time the store keeps)
    form = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
    assert form.fullmatch(lot["earned_at"])
    for answer in (first, again):
        assert form.fullmatch(answer["lot_expires"]), answer["lot_expires"]
        assert answer["transaction"]["details"]["lot_expires"] == answer["lot_expires"]
        assert datetime.fromisoformat(answer["lot_expires"]) == datetime.fromisoformat(
            lot["expires"]
        )


def test_an_earn_dated_more_than_a_day_ahead_is_a_422(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    _setup(app_client, admin_headers, open_account)
    body = {"order_id": "o-1", "amount": 1000, "at": "2999-01-01T00:00:00Z"}
    r = app_client.post("/v1/accounts/alice/earn", json=body, headers=write_headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "more than a day ahead" in r.json()["detail"]
    assert app_client.get("/v1/orders/o-1", headers=write_headers).status_code == 404


def _campaign(**fields: Any) -> dict[str, Any]:
    return {
        "campaigns": [
            {"id": "c", "starts": "2026-01-01", "ends": "2027-01-01", "bonus": 1} | fields
        ]
    }


def test_rules_a_campaign_cannot_read_are_a_400_not_a_500(
    app_client: TestClient, admin_headers: Headers
) -> None:
    """Campaign tiers that are no names (unhashable) and campaign times with no UTC
    time (year 1 east of UTC, year 9999 west of it) answered 500."""
    for rules, field in [
        (_campaign(tiers=[["base"]]), "campaigns[0].tiers must be a list of tier names"),
        (_campaign(tiers=[{"name": "base"}]), "campaigns[0].tiers must be a list of tier names"),
        (_campaign(starts="0001-01-01T00:00:00+01:00"), "campaigns[0].starts is out of range"),
        (_campaign(ends="9999-12-31T23:59:59-01:00"), "campaigns[0].ends is out of range"),
    ]:
        r = app_client.put("/v1/program/loyalty", json=rules, headers=admin_headers)
        assert r.status_code == 400, r.text
        assert r.json()["type"].endswith("/invalid-config")
        assert field in r.json()["detail"]
    assert app_client.get("/v1/program/loyalty", headers=admin_headers).status_code == 404


def test_a_multiplier_has_at_most_40_digits_after_the_point(
    app_client: TestClient, admin_headers: Headers
) -> None:
    """`"1e-10000000"` kept the request busy for minutes (its exact fraction, then its
    decimal text); past 40 places a multiplier is now refused at once."""
    for multiplier, status in [("1e-41", 400), ("1e-1000000000", 400), ("1e-40", 200)]:
        rules = {"tiers": [{"name": "base", "threshold": 0, "multiplier": multiplier}]}
        r = app_client.put("/v1/program/loyalty", json=rules, headers=admin_headers)
        assert r.status_code == status, r.text
        if status == 400:
            assert "at most 40 digits after the decimal point" in r.json()["detail"]
    stored = app_client.get("/v1/program/loyalty", headers=admin_headers).json()
    assert stored["tiers"][0]["multiplier"] == "0." + "0" * 39 + "1"


def test_an_earns_lot_expires_says_never_as_the_openapi_document_does(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    """Under rules without expiry an earn answers `lot_expires: "never"`, which neither
    the OpenAPI document (a string, read as a time) nor docs/loyalty.md mentioned."""
    assert app_client.put("/v1/program/loyalty", json={}, headers=admin_headers).status_code == 200
    open_account("alice")
    for order, amount, expires in [("o1", 5000, "never"), ("o2", 50, None)]:
        r = app_client.post(
            "/v1/accounts/alice/earn",
            json={"order_id": order, "amount": amount},
            headers=write_headers,
        )
        assert r.json()["lot_expires"] == expires
    doc = app_client.get("/openapi.json").json()
    field = doc["components"]["schemas"]["EarnOut"]["properties"]["lot_expires"]
    assert "`never` when the rules set no expiry" in field["description"]
