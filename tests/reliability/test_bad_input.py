"""Bad input over HTTP, on both engines: each gets a clear 4xx problem, and nothing changes.

Extends tests/http (which covers the ledger routes' amount bounds, malformed
JSON, content type and body size one by one) to every writing route of the
ledger, the wallet and loyalty, and checks the store afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.errors import NotFound
from tallybook.ledger import Ledger
from tallybook.reliability.workload import LOYALTY_RULES
from tallybook.store import keys

Headers = dict[str, str]

BAD_AMOUNTS = [0, -5, 1.5, 2**63, 10**38, "12", None]


def _amount_routes(amount: Any) -> list[tuple[str, dict[str, Any]]]:
    # a capture's amount may be null (capture it all): a valid request, not bad input
    capture = [] if amount is None else [("/v1/holds/h-bad/capture", {"amount": amount})]
    return [
        *capture,
        (
            "/v1/transactions",
            {"type": "credit", "account": "alice", "fund": "cash", "amount": amount},
        ),
        (
            "/v1/transfers",
            {"source": "alice", "destination": "bob", "fund": "cash", "amount": amount},
        ),
        ("/v1/accounts/alice/wallet/credits", {"fund": "cash", "amount": amount}),
        ("/v1/accounts/alice/wallet/debits", {"amount": amount}),
        ("/v1/accounts/alice/wallet/holds", {"amount": amount}),
        ("/v1/accounts/alice/wallet/grants", {"amount": amount, "expires_in_days": 30}),
        (
            "/v1/accounts/alice/wallet/held-credits",
            {"fund": "cash", "amount": amount, "release_at": "2030-01-01T00:00:00Z"},
        ),
        ("/v1/accounts/alice/earn", {"order_id": "o-bad", "amount": amount}),
        ("/v1/accounts/alice/redeem", {"points": amount, "reward_id": "mug"}),
    ]


LONG = "a" * 10_240
BAD_IDS = ["ålice", "a/b", "a b", LONG, ""]


def _snapshot(ledger: Ledger) -> dict[str, Any]:
    """Everything a bad request could have touched: both account partitions whole,
    the system accounts and the transaction records by owner."""
    snap: dict[str, Any] = {}
    for account in ("alice", "bob"):
        snap[account] = list(ledger.store.query_all(keys.account_partition("shop", account)))
        snap[f"{account}-txns"] = [
            t.id for t in ledger.transactions.for_owner("shop", account, limit=1000).transactions
        ]
    for system in ("@external", "@issuance", "@redemption", "@adjustment"):
        snap[system] = ledger.transactions.system_balance("shop", system)
    return snap


@pytest.fixture
def funded(ledger: Ledger, open_account: Callable[..., Any], credit: Callable[..., Any]) -> None:
    ledger.loyalty.configure("shop", LOYALTY_RULES)
    open_account("alice")
    open_account("bob")
    credit("alice", 5_000, fund="cash")
    credit("alice", 300, fund="points")
    ledger.wallet.authorize("shop", "alice", 100, hold_id="h-bad")


def _problem(r: Any, *statuses: int) -> None:
    assert r.status_code in statuses, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == r.status_code
    assert body["type"].startswith("https://tallybook.dev/problems/")
    assert body["detail"]
    assert "Traceback" not in r.text


def test_bad_input_is_refused_and_changes_nothing(
    funded: None,
    ledger: Ledger,
    app_client: TestClient,
    idem: Callable[..., Headers],
    write_headers: Headers,
) -> None:
    before = _snapshot(ledger)
    post = app_client.post
    for amount in BAD_AMOUNTS:
        for path, body in _amount_routes(amount):
            _problem(post(path, json=body, headers=idem()), 422)
    # unknown account, fund, hold, order
    unknown = [
        ("/v1/transactions", {"type": "credit", "account": "ghost", "fund": "cash", "amount": 1}),
        ("/v1/transfers", {"source": "alice", "destination": "ghost", "fund": "cash", "amount": 1}),
        ("/v1/accounts/ghost/wallet/credits", {"fund": "cash", "amount": 1}),
        ("/v1/accounts/ghost/wallet/holds", {"amount": 1}),
        ("/v1/accounts/ghost/earn", {"order_id": "o-ghost", "amount": 100}),
        ("/v1/holds/no-such-hold/capture", {"amount": 1}),
        ("/v1/holds/no-such-hold/void", {}),
    ]
    for path, body in unknown:
        _problem(post(path, json=body, headers=idem()), 404)
    for fund in ("gold", "@external"):
        body = {"type": "credit", "account": "alice", "fund": fund, "amount": 1}
        _problem(post("/v1/transactions", json=body, headers=idem()), 404, 422)
    # ids: unicode, slashes, spaces, 10 KB, empty; in bodies, paths and keys
    for bad in BAD_IDS:
        _problem(post("/v1/accounts", json={"account": bad}, headers=idem()), 422)
        body = {"source": "alice", "destination": bad, "fund": "cash", "amount": 1}
        _problem(post("/v1/transfers", json=body, headers=idem()), 422)
        body = {"order_id": bad, "amount": 100}
        _problem(post("/v1/accounts/alice/earn", json=body, headers=idem()), 422)
        if bad:
            if bad.isascii():  # a header is latin-1: httpx refuses to send the others
                credit = {"type": "credit", "account": "alice", "fund": "cash", "amount": 1}
                _problem(post("/v1/transactions", json=credit, headers=idem(key=bad)), 422)
            path = f"/v1/accounts/{bad}/wallet/credits"
            _problem(post(path, json={"fund": "cash", "amount": 1}, headers=idem()), 404, 422)
    # a body over 1 MB, malformed JSON, the wrong content type
    huge = {
        "type": "credit",
        "account": "alice",
        "fund": "cash",
        "amount": 1,
        "description": "x" * (1024 * 1024 + 10),
    }
    _problem(post("/v1/transactions", json=huge, headers=idem()), 413)
    for path in ("/v1/transactions", "/v1/accounts/alice/wallet/holds", "/v1/accounts/alice/earn"):
        raw = {**idem(), "content-type": "application/json"}
        _problem(post(path, content=b'{"amount": 5,', headers=raw), 400)
        form = {**idem(), "content-type": "application/x-www-form-urlencoded"}
        _problem(post(path, content=b"amount=5", headers=form), 415)
        _problem(post(path, content=b"[1, 2]", headers=raw), 422)
    assert _snapshot(ledger) == before


def test_unknown_program_through_the_python_api(ledger: Ledger) -> None:
    ledger.accounts.open("shop", "alice")
    before = _snapshot(ledger)
    calls = [
        lambda: ledger.transactions.credit("nope", "alice", "cash", 5, txn_id="t1"),
        lambda: ledger.wallet.credit("nope", "alice", "cash", 5, txn_id="t2"),
        lambda: ledger.wallet.authorize("nope", "alice", 5, hold_id="h1"),
        lambda: ledger.loyalty.earn("nope", "alice", "o1", 500),
        lambda: ledger.accounts.open("nope", "alice"),
    ]
    for call in calls:
        with pytest.raises(NotFound, match="program nope"):
            call()
    assert _snapshot(ledger) == before
