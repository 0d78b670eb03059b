"""Issue 17, defects 2, 3 and 12: request bodies at the HTTP edge and replay answers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.records.codec import iso

Headers = dict[str, str]

DEEP = ("[" * 2000 + "]" * 2000).encode()


@pytest.fixture
def funded(
    app_client: TestClient, open_account: Callable[..., Any], idem: Callable[..., Headers]
) -> None:
    open_account("alice")
    open_account("bob")
    for account in ("alice", "bob"):
        r = app_client.post(
            f"/v1/accounts/{account}/wallet/credits",
            json={"fund": "cash", "amount": 1000},
            headers=idem(),
        )
        assert r.status_code == 201, r.text


@pytest.mark.parametrize(
    "path",
    [
        "/v1/accounts",
        "/v1/accounts/alice/wallet/debits",
        "/v1/accounts/alice/wallet/holds",
        "/v1/accounts/alice/wallet/credits",
        "/v1/holds/h-1/capture",
        "/v1/transactions",
    ],
)
def test_deeply_nested_json_is_a_400_problem(
    app_client: TestClient, idem: Callable[..., Headers], path: str
) -> None:
    """Defect 2: the fingerprint's JSON parse hit the recursion limit and answered 500."""
    headers = {**idem(), "Content-Type": "application/json"}
    r = app_client.post(path, content=DEEP, headers=headers)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["status"] == 400


def test_deeply_nested_json_to_void_is_no_500(
    app_client: TestClient, idem: Callable[..., Headers]
) -> None:
    """Void takes no body: one too deep to parse is a 400, as on any route, never a 500."""
    headers = {**idem(), "Content-Type": "application/json"}
    r = app_client.post("/v1/holds/h-1/void", content=DEEP, headers=headers)
    assert r.status_code == 400, r.text
    assert r.json()["type"].endswith("/bad-request")
    assert r.headers["content-type"].startswith("application/problem+json")


def test_wallet_debit_refuses_unknown_fields(
    app_client: TestClient, funded: None, idem: Callable[..., Headers], write_headers: Headers
) -> None:
    """Defect 3: ``account`` in a debit body was ignored and alice's cash was debited."""
    r = app_client.post(
        "/v1/accounts/alice/wallet/debits",
        json={"amount": 1, "fund": "points", "account": "bob"},
        headers=idem(),
    )
    assert r.status_code == 422, r.text
    assert {tuple(e["loc"]) for e in r.json()["errors"]} == {
        ("body", "fund"),
        ("body", "account"),
    }
    wallet = app_client.get("/v1/accounts/alice/wallet", headers=write_headers).json()
    assert wallet["total_available"] == 1000


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/accounts/alice/wallet/credits", {"fund": "cash", "amount": 1, "note": "x"}),
        ("/v1/accounts/alice/wallet/held-credits", {"fund": "cash", "amount": 1, "x": 1}),
        ("/v1/accounts/alice/wallet/grants", {"amount": 1, "expires_in_day": 3}),
        ("/v1/accounts/alice/wallet/holds", {"amount": 1, "account": "bob"}),
    ],
)
def test_wallet_writes_refuse_unknown_fields(
    app_client: TestClient,
    funded: None,
    idem: Callable[..., Headers],
    path: str,
    body: dict[str, Any],
) -> None:
    r = app_client.post(path, json=body, headers=idem())
    assert r.status_code == 422, r.text
    assert r.json()["errors"][-1]["type"] == "extra_forbidden"


def test_capture_refuses_unknown_fields(
    app_client: TestClient, funded: None, idem: Callable[..., Headers]
) -> None:
    """Defect 3: a capture naming another account on bob's hold answered 200."""
    r = app_client.post("/v1/accounts/bob/wallet/holds", json={"amount": 100}, headers=idem())
    assert r.status_code == 201, r.text
    hold = r.json()["hold"]["hold_id"]
    r = app_client.post(f"/v1/holds/{hold}/capture", json={"account": "alice"}, headers=idem())
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == ["body", "account"]
    r = app_client.get(f"/v1/holds/{hold}", headers=idem())
    assert r.json()["status"] == "active"


def test_replayed_body_says_replay_like_its_header(
    app_client: TestClient, funded: None, idem: Callable[..., Headers]
) -> None:
    """Defect 12: a stored response replayed with ``"replay": false`` in its body."""
    headers = idem(key="debit-12")
    first = app_client.post("/v1/accounts/alice/wallet/debits", json={"amount": 5}, headers=headers)
    again = app_client.post("/v1/accounts/alice/wallet/debits", json={"amount": 5}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["replay"] is False
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["replay"] is True
    assert {**again.json(), "replay": False} == first.json()


def test_replayed_hold_says_replay_like_its_header(
    app_client: TestClient, funded: None, idem: Callable[..., Headers]
) -> None:
    headers = idem(key="hold-12")
    first = app_client.post("/v1/accounts/alice/wallet/holds", json={"amount": 5}, headers=headers)
    again = app_client.post("/v1/accounts/alice/wallet/holds", json={"amount": 5}, headers=headers)
    assert first.json()["transaction"]["replay"] is False
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["transaction"]["replay"] is True


def test_grant_takes_expires_in_days(
    app_client: TestClient,
    funded: None,
    idem: Callable[..., Headers],
    write_headers: Headers,
    ledger: Ledger,
    clock: ManualClock,
) -> None:
    """Issue 17 gap: grants over HTTP took only an absolute ``expires_at``."""
    headers = idem(key="promo-1")
    body = {"amount": 30, "expires_in_days": 10}
    first = app_client.post("/v1/accounts/alice/wallet/grants", json=body, headers=headers)
    assert first.status_code == 201, first.text
    grants = app_client.get("/v1/accounts/alice/wallet/grants", headers=write_headers).json()
    expected = iso(clock.now() + timedelta(days=10))  # six fraction digits, 0 or not
    assert [(g["grant_id"], g["expires_at"]) for g in grants] == [("promo-1", expected)]
    clock.advance(timedelta(days=2))  # a retry days later is the same request (service replay)
    again = ledger.wallet.grant("shop", "alice", 30, expires_in_days=10, txn_id="promo-1")
    assert again.replay
    for bad in (
        {"amount": 1},
        {"amount": 1, "expires_in_days": 0},
        {**body, "expires_at": expected},
    ):
        r = app_client.post("/v1/accounts/alice/wallet/grants", json=bad, headers=idem())
        assert r.status_code == 422, r.text
