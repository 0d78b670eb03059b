"""Security over HTTP, on both engines, across the wallet, loyalty and notification routes.

tests/http/test_auth_api.py covers the ledger routes; this extends the same
rules to every capability: a key of program A can neither read nor write
program B (404, and B is unchanged), a revoked key stops once the HTTP
layer's key cache forgets it (even for a replay of a response it stored),
scopes are enforced, no key material reaches the logs, and keys are hashed at
rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.http.keycache import DEFAULT_KEY_CACHE_SECONDS
from tallybook.http.middleware import JsonFormatter
from tallybook.ledger import Ledger
from tallybook.reliability.workload import LOYALTY_RULES
from tallybook.services.clock import ManualClock
from tallybook.store import keys

Headers = dict[str, str]

READS = [
    "/v1/accounts/alice/wallet",
    "/v1/accounts/alice/wallet/holds",
    "/v1/accounts/alice/wallet/grants",
    "/v1/accounts/alice/wallet/transactions",
    "/v1/wallet/transactions/h-1",
    "/v1/holds/h-1",
    "/v1/orders/o-1",
    "/v1/accounts/alice/tier",
    "/v1/accounts/alice/notifications",
    "/v1/accounts/alice/notifications/history",
]

WRITES: list[tuple[str, dict[str, Any]]] = [
    ("/v1/holds/h-1/capture", {"amount": 10}),
    ("/v1/holds/h-1/void", {}),
    ("/v1/accounts/alice/wallet/credits", {"fund": "cash", "amount": 10}),
    ("/v1/accounts/alice/wallet/debits", {"amount": 10}),
    ("/v1/accounts/alice/wallet/holds", {"amount": 10}),
    ("/v1/accounts/alice/earn", {"order_id": "o-2", "amount": 1_000}),
    ("/v1/accounts/alice/redeem", {"points": 1, "reward_id": "mug"}),
    ("/v1/accounts/alice/notifications", {"type": "Promo", "payload": {}}),
]

ADMIN_ONLY: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/wallet/reconcile", {}),
    ("POST", "/v1/loyalty/expire", {}),
    ("PUT", "/v1/program/loyalty", LOYALTY_RULES),
]


@pytest.fixture
def shop(
    ledger: Ledger,
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    """alice in shop: cash, points from an order, an active hold h-1, a notification."""
    ledger.loyalty.configure("shop", LOYALTY_RULES)
    open_account("alice")
    steps = [
        ("/v1/accounts/alice/wallet/credits", {"fund": "cash", "amount": 1_000}, "c-1"),
        ("/v1/accounts/alice/earn", {"order_id": "o-1", "amount": 5_000}, "e-1"),
        ("/v1/accounts/alice/wallet/holds", {"amount": 100}, "h-1"),
        ("/v1/accounts/alice/notifications", {"type": "Promo", "payload": {}}, "n-1"),
    ]
    for path, body, key in steps:
        r = app_client.post(path, json=body, headers=idem(write_headers, key))
        assert r.status_code == 201, r.text


def _state(ledger: Ledger) -> list[Any]:
    return list(ledger.store.query_all(keys.account_partition("shop", "alice")))


def test_a_key_of_another_program_gets_404_and_changes_nothing(
    shop: None,
    ledger: Ledger,
    app_client: TestClient,
    other_headers: Headers,
    idem: Callable[..., Headers],
) -> None:
    ledger.loyalty.configure("other", LOYALTY_RULES)  # so that 404 is about alice only
    before = _state(ledger)
    for path in READS:
        assert app_client.get(path, headers=other_headers).status_code == 404, path
    for path, body in WRITES:
        r = app_client.post(path, json=body, headers=idem(other_headers))
        assert r.status_code == 404, (path, r.status_code, r.text[:200])
    assert _state(ledger) == before


def test_scopes_are_enforced_on_every_capability(
    shop: None,
    ledger: Ledger,
    app_client: TestClient,
    auth: Callable[..., Headers],
    read_headers: Headers,
    write_headers: Headers,
    idem: Callable[..., Headers],
) -> None:
    before = _state(ledger)
    for path, body in WRITES:
        r = app_client.post(path, json=body, headers=idem(read_headers))
        assert r.status_code == 403, path
    write_only = auth("write")
    for path in READS:
        assert app_client.get(path, headers=write_only).status_code == 403, path
        assert app_client.get(path, headers=read_headers).status_code == 200, path
    for method, path, body in ADMIN_ONLY:
        r = app_client.request(method, path, json=body, headers=idem(write_headers))
        assert r.status_code == 403, path
    assert _state(ledger) == before


def test_a_revoked_key_stops_within_the_key_cache_time_even_for_replays(
    shop: None,
    ledger: Ledger,
    clock: ManualClock,
    app_client: TestClient,
    mint_key: Callable[..., str],
    idem: Callable[..., Headers],
) -> None:
    secret = mint_key("read,write")
    headers = {"Authorization": f"Bearer {secret}"}
    body = {"fund": "cash", "amount": 5}
    path = "/v1/accounts/alice/wallet/credits"
    assert app_client.post(path, json=body, headers=idem(headers, "rev-1")).status_code == 201
    ledger.keys.revoke(secret.split("_")[1])
    clock.advance(timedelta(seconds=DEFAULT_KEY_CACHE_SECONDS))  # the HTTP layer's key cache
    before = _state(ledger)
    assert app_client.post(path, json=body, headers=idem(headers, "rev-1")).status_code == 401
    assert app_client.post(path, json=body, headers=idem(headers, "rev-2")).status_code == 401
    assert app_client.get("/v1/accounts/alice/wallet", headers=headers).status_code == 401
    assert _state(ledger) == before


def test_no_key_material_in_logs_and_only_hashes_at_rest(
    shop: None,
    ledger: Ledger,
    app_client: TestClient,
    mint_key: Callable[..., str],
    other_headers: Headers,
    idem: Callable[..., Headers],
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = mint_key("read,write")
    headers = {"Authorization": f"Bearer {secret}"}
    forged = secret[:-4] + "zzzz"
    with caplog.at_level(logging.DEBUG):
        for path, body in WRITES:
            app_client.post(path, json=body, headers=idem(headers))
            app_client.post(path, json=body, headers=idem({"Authorization": f"Bearer {forged}"}))
        for path in READS:
            app_client.get(f"{path}?api_key={secret}", headers=headers)
        app_client.post("/v1/wallet/reconcile", headers=idem(headers))  # 403
        app_client.post(
            "/v1/transactions",
            content=b"{",
            headers={**idem(headers), "content-type": "application/json"},
        )
    assert len(caplog.records) > len(WRITES)
    formatter = JsonFormatter()
    secrets_ = [secret.split("_", 2)[2], forged.split("_", 2)[2]]
    # the test client's own loggers (httpx) print the URLs it sends; the server's must not
    server = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    assert any(r.name == "tallybook.http.access" for r in server)
    for record in server:
        text = formatter.format(record) + record.getMessage() + str(record.__dict__)
        for s in secrets_:
            assert s not in text, record.name

    key_id = secret.split("_")[1]
    stored = [ledger.store.get(keys.api_key(key_id))]
    stored += list(ledger.store.query_all(keys.api_key_index("shop"), index="gsi1"))
    stored += list(ledger.store.query_all(keys.account_partition("shop", "alice")))
    stored += [ledger.store.get(keys.idempotent_response("shop", k)) for k in ("c-1", "h-1")]
    assert stored[0] is not None
    assert stored[0].get("hash") or any("hash" in k for k in stored[0])
    dump = repr(stored)
    assert secrets_[0] not in dump
    assert secret not in dump
