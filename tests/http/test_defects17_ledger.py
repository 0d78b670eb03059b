"""Issue 17 defects 4 and 5 over HTTP: final refusals and raw postings on system accounts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

Headers = dict[str, str]


def _cash(client: TestClient, headers: Headers, account: str) -> int:
    r = client.get(f"/v1/accounts/{account}/balances", headers=headers)
    return int(next(b["balance"] for b in r.json()["balances"] if b["fund"] == "cash"))


def test_refused_transfer_keeps_its_answer_for_its_key(
    app_client: TestClient,
    idem: Callable[..., Headers],
    write_headers: Headers,
    open_account: Callable[..., Any],
    credit: Callable[..., Any],
) -> None:
    """Defect 4: the same key and body after a top-up was applied (201)."""
    open_account("alice")
    open_account("bob")
    body = {"source": "alice", "destination": "bob", "fund": "cash", "amount": 80}
    first = app_client.post("/v1/transfers", json=body, headers=idem(key="pay-4"))
    assert first.status_code == 422, first.text
    assert first.json()["type"].endswith("insufficient-funds")
    assert "idempotent-replayed" not in first.headers
    credit("alice", 500, "cash")
    again = app_client.post("/v1/transfers", json=body, headers=idem(key="pay-4"))
    assert again.status_code == 422, again.text
    assert again.json()["detail"] == first.json()["detail"]
    assert again.headers["idempotent-replayed"] == "true"
    assert (_cash(app_client, write_headers, "alice"), _cash(app_client, write_headers, "bob")) == (
        500,
        0,
    )
    other = app_client.post("/v1/transfers", json={**body, "amount": 1}, headers=idem(key="pay-4"))
    assert other.status_code == 409
    assert app_client.get("/v1/transactions/pay-4", headers=write_headers).status_code == 404


def test_refused_wallet_debit_keeps_its_answer(
    app_client: TestClient, idem: Callable[..., Headers], open_account: Callable[..., Any]
) -> None:
    open_account("alice")
    first = app_client.post(
        "/v1/accounts/alice/wallet/debits", json={"amount": 30}, headers=idem(key="buy-4")
    )
    assert first.status_code == 422, first.text
    top = app_client.post(
        "/v1/accounts/alice/wallet/credits", json={"fund": "cash", "amount": 100}, headers=idem()
    )
    assert top.status_code == 201
    again = app_client.post(
        "/v1/accounts/alice/wallet/debits", json={"amount": 30}, headers=idem(key="buy-4")
    )
    assert again.status_code == 422, again.text
    assert again.headers["idempotent-replayed"] == "true"


def test_raw_posting_on_system_accounts_needs_admin(
    app_client: TestClient,
    idem: Callable[..., Headers],
    write_headers: Headers,
    admin_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    """Defect 5: any write key could mint points from @issuance or undo @redemption."""
    open_account("alice")
    open_account("bob")
    mint = {
        "type": "raw",
        "legs": [
            {"account": "alice", "fund": "points", "amount": 1000},
            {"account": "@issuance", "fund": "points", "amount": -1000},
        ],
    }
    r = app_client.post("/v1/transactions", json=mint, headers=idem(write_headers, "mint-5"))
    assert r.status_code == 403, r.text
    assert "@issuance" in r.json()["detail"]
    assert "admin" in r.json()["detail"]
    r = app_client.get("/v1/accounts/alice/balances", headers=write_headers)
    assert all(b["balance"] == 0 for b in r.json()["balances"])
    r = app_client.post("/v1/transactions", json=mint, headers=idem(admin_headers, "mint-5"))
    assert r.status_code == 201, r.text
    between_customers = {
        "type": "raw",
        "legs": [
            {"account": "alice", "fund": "points", "amount": -10},
            {"account": "bob", "fund": "points", "amount": 10},
        ],
    }
    r = app_client.post("/v1/transactions", json=between_customers, headers=idem(write_headers))
    assert r.status_code == 201, r.text


def test_a_client_cannot_take_a_derived_id(
    app_client: TestClient,
    idem: Callable[..., Headers],
    write_headers: Headers,
    open_account: Callable[..., Any],
    credit: Callable[..., Any],
) -> None:
    """Defect 1 repro: a transfer named ``ord-7:capture`` made hold ord-7's capture a 409."""
    open_account("alice")
    open_account("bob")
    credit("alice", 500, "cash")
    r = app_client.post(
        "/v1/accounts/alice/wallet/holds", json={"amount": 100}, headers=idem(key="ord-7")
    )
    assert r.status_code == 201, r.text
    body = {"source": "alice", "destination": "bob", "fund": "cash", "amount": 1}
    r = app_client.post("/v1/transfers", json=body, headers=idem(key="ord-7:capture"))
    assert r.status_code == 422, r.text
    assert "is reserved: ids ending in ':capture'" in r.json()["detail"]
    r = app_client.post(
        "/v1/accounts/bob/wallet/holds", json={"amount": 1}, headers=idem(key="ord-7:expire")
    )
    assert r.status_code == 422, r.text
    r = app_client.post("/v1/holds/ord-7/capture", headers=idem())
    assert r.status_code == 200, r.text
    assert r.json()["transaction"]["id"] == "ord-7:capture"


def test_client_attributes_are_kept_apart_from_internal_state(
    app_client: TestClient, idem: Callable[..., Headers], write_headers: Headers
) -> None:
    """Defect 6: client ``wallet``/``loyalty`` keys landed in the internal state map,
    and the wallet's internal marks showed in ``GET /v1/accounts/{a}``."""
    attributes = {"wallet": "blue", "loyalty": "none", "segment": "vip"}
    r = app_client.post(
        "/v1/accounts", json={"account": "alice", "attributes": attributes}, headers=idem()
    )
    assert r.status_code == 201, r.text
    for path, body in (
        ("/v1/accounts/alice/wallet/credits", {"fund": "cash", "amount": 100}),
        ("/v1/accounts/alice/wallet/holds", {"amount": 40}),
        ("/v1/accounts/alice/wallet/debits", {"amount": 10}),
    ):
        assert app_client.post(path, json=body, headers=idem()).status_code == 201
    account = app_client.get("/v1/accounts/alice", headers=write_headers).json()
    assert account["attributes"] == attributes
    wallet = app_client.get("/v1/accounts/alice/wallet", headers=write_headers).json()
    assert wallet["total_available"] == 50
