"""The wallet over HTTP: balance view, grants, debits with charge, holds, records, reconcile."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.charges import FakeChargeProcessor

Headers = dict[str, str]


def _iso(ledger: Ledger, **delta: int) -> str:
    return (ledger.clock.now() + timedelta(**delta)).isoformat().replace("+00:00", "Z")


def test_wallet_flow_over_http(
    app_client: TestClient,
    ledger: Ledger,
    clock: ManualClock,
    write_headers: Headers,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    processor = FakeChargeProcessor()
    ledger.wallet.processor = processor
    c = app_client
    open_account("alice")
    base = "/v1/accounts/alice/wallet"
    r = c.post(f"{base}/credits", json={"fund": "cash", "amount": 1000}, headers=idem(key="c1"))
    assert r.status_code == 201, r.text
    r = c.post(
        f"{base}/grants",
        json={"amount": 200, "expires_at": _iso(ledger, days=3)},
        headers=idem(key="g1"),
    )
    assert r.status_code == 201, r.text
    assert r.json()["availability"] == {
        "bonus": 200,
        "store_credit": 0,
        "cash": 1000,
        "total": 1200,
    }

    r = c.post(f"{base}/debits", json={"amount": 300, "order_id": "o-1"}, headers=idem(key="d1"))
    assert r.status_code == 201, r.text
    assert r.json()["funds"] == {"bonus": -200, "cash": -100}
    replay = c.post(
        f"{base}/debits", json={"amount": 300, "order_id": "o-1"}, headers=idem(key="d1")
    )
    assert replay.status_code in (200, 201)
    assert replay.json()["id"] == "d1"

    r = c.post(f"{base}/debits", json={"amount": 5000}, headers=idem(key="d2"))
    assert r.status_code == 422
    assert r.json()["type"].endswith("/insufficient-funds")
    r = c.post(
        f"{base}/debits", json={"amount": 1000, "on_shortfall": "charge"}, headers=idem(key="d3")
    )
    assert r.status_code == 201, r.text
    assert r.json()["charge"]["amount"] == 100
    processor.mode = "decline"
    r = c.post(
        f"{base}/debits", json={"amount": 10, "on_shortfall": "charge"}, headers=idem(key="d4")
    )
    assert r.status_code == 402
    assert r.json()["type"].endswith("/payment-declined")

    c.post(f"{base}/credits", json={"fund": "store_credit", "amount": 500}, headers=idem(key="c2"))
    r = c.post(f"{base}/holds", json={"amount": 400, "expires_in": 3600}, headers=idem(key="h1"))
    assert r.status_code == 201, r.text
    assert r.json()["hold"]["status"] == "active"
    view = c.get(base, headers=write_headers).json()
    assert view["total_available"] == 100
    assert view["funds"][1] == {
        "fund": "store_credit",
        "unit": "USD",
        "total": 500,
        "withheld": 400,
        "available": 100,
    }
    r = c.post("/v1/holds/h1/capture", json={"amount": 150}, headers=write_headers)
    assert r.status_code == 200, r.text
    assert r.json()["hold"]["captured"] == 150
    assert r.json()["transaction"]["availability"]["store_credit"] == 350
    again = c.post("/v1/holds/h1/capture", json={"amount": 150}, headers=write_headers)
    assert again.json()["transaction"]["replay"] is True
    r = c.post("/v1/holds/h1/void", headers=write_headers)
    assert r.status_code == 409
    assert r.json()["type"].endswith("/invalid-state")

    c.post(f"{base}/holds", json={"amount": 50, "expires_in": 60}, headers=idem(key="h2"))
    r = c.post(
        f"{base}/held-credits",
        json={"fund": "cash", "amount": 70, "release_at": _iso(ledger, seconds=30)},
        headers=idem(key="sale-1"),
    )
    assert r.status_code == 201, r.text
    clock.advance(timedelta(minutes=2))
    r = c.post("/v1/wallet/reconcile", headers=write_headers)
    assert r.status_code == 403
    r = c.post("/v1/wallet/reconcile", headers=admin_headers)
    assert r.json()["actions"] == [
        "expired hold h2 of alice",
        "released held credit sale-1 of alice",
    ]
    r = c.post("/v1/holds/h2/capture", headers=write_headers)
    assert r.status_code == 409
    assert "expired" in r.json()["detail"]

    holds = c.get(f"{base}/holds", headers=write_headers).json()
    assert {h["hold_id"]: h["status"] for h in holds} == {
        "h1": "captured",
        "h2": "expired",
        "sale-1": "released",
    }
    page = c.get(f"{base}/transactions", params={"limit": 3}, headers=write_headers).json()
    assert len(page["transactions"]) == 3
    assert page["cursor"]
    one = c.get("/v1/wallet/transactions/d1", headers=write_headers).json()
    assert one["funds"] == {"bonus": -200, "cash": -100}
    assert c.get("/v1/holds/nope", headers=write_headers).status_code == 404
    assert (
        c.get(f"{base}/grants", params={"expired": True}, headers=write_headers).json()[0][
            "grant_id"
        ]
        == "g1"
    )
    assert ledger.wallet.check("shop", "alice") == []


def test_wallet_is_per_program(
    app_client: TestClient,
    write_headers: Headers,
    other_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("alice")
    app_client.post(
        "/v1/accounts/alice/wallet/credits",
        json={"fund": "cash", "amount": 10},
        headers=idem(key="c1"),
    )
    app_client.post("/v1/accounts/alice/wallet/holds", json={"amount": 5}, headers=idem(key="h1"))
    assert app_client.get("/v1/accounts/alice/wallet", headers=other_headers).status_code == 404
    assert app_client.post("/v1/holds/h1/void", headers=other_headers).status_code == 404
    bad = app_client.post(
        "/v1/accounts/alice/wallet/credits",
        json={"fund": "bonus", "amount": 1.5},
        headers=idem(key="c2"),
    )
    assert bad.status_code == 422


def _charged_debit(
    app_client: TestClient,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> Response:
    """Alice, with 100 cash, debits 250 (d1), charging the rest."""
    open_account("alice")
    base = "/v1/accounts/alice/wallet"
    app_client.post(f"{base}/credits", json={"fund": "cash", "amount": 100}, headers=idem(key="c"))
    body = {"amount": 250, "on_shortfall": "charge"}
    return app_client.post(f"{base}/debits", json=body, headers=idem(key="d1"))


@pytest.mark.parametrize("engine", ["sqlite"])  # engine-independent: the processor's answers
@pytest.mark.parametrize("mode", ["decline", "timeout"])
def test_declined_or_timed_out_charge_over_http_applies_nothing(
    app_client: TestClient,
    ledger: Ledger,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
    mode: str,
) -> None:
    processor = FakeChargeProcessor(mode)  # type: ignore[arg-type]
    ledger.wallet.processor = processor
    r = _charged_debit(app_client, idem, open_account)
    base, body = "/v1/accounts/alice/wallet", {"amount": 250, "on_shortfall": "charge"}
    assert r.status_code == 402, r.text
    assert r.json()["type"].endswith("/payment-declined")
    assert "nothing" in r.json()["detail"] or "declined" in r.json()["detail"]
    assert processor.net_charged == 0
    view = app_client.get(base, headers=write_headers).json()
    assert view["total_available"] == 100
    assert app_client.get("/v1/wallet/transactions/d1", headers=write_headers).status_code == 404
    assert ledger.wallet.check("shop", "alice") == []
    processor.mode = "succeed"  # the client retries the same request: it now goes through
    r = app_client.post(f"{base}/debits", json=body, headers=idem(key="d1"))
    assert r.status_code == 201, r.text
    assert r.json()["charge"]["amount"] == 150
    assert processor.net_charged == 150


class _RefundFails(FakeChargeProcessor):
    """Charges; its refunds raise what the protocol does not name."""

    def refund(self, *, key: str) -> None:
        raise RuntimeError("refund bug")


@pytest.mark.parametrize("engine", ["sqlite"])  # engine-independent: the processor's answers
def test_a_failed_refund_over_http_is_a_problem_and_reconcile_counts_it(
    app_client: TestClient,
    ledger: Ledger,
    clock: ManualClock,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    # was: a 500 (the refund's RuntimeError, raw) for the debit, and again for reconcile
    processor = _RefundFails("timeout")
    ledger.wallet.processor = processor
    r = _charged_debit(app_client, idem, open_account)
    assert r.status_code == 402, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert "reconcile refunds it" in r.json()["detail"]
    clock.advance(timedelta(minutes=11))
    r = app_client.post("/v1/wallet/reconcile", headers=admin_headers)
    assert r.status_code == 200, r.text
    assert r.json()["refunds_failed"] == 1
    assert r.json()["actions"][0].startswith("could not refund charge d1 of alice (150)")
    assert processor.net_charged == 150
