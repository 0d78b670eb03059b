"""GET /v1/system-accounts/{account}: a system account's balance (admin), the
endpoint built by the recipe in docs/architecture.md."""

from __future__ import annotations

from tallybook.ledger import Ledger


def test_system_balances_mirror_customer_postings(
    app_client, ledger: Ledger, admin_headers, read_headers
) -> None:
    ledger.accounts.open("shop", "alice")
    ledger.accounts.open("shop", "bob")
    ledger.transactions.credit("shop", "alice", "cash", 700, txn_id="c-1")
    ledger.transactions.transfer("shop", "alice", "bob", "cash", 200, txn_id="t-1")
    ledger.transactions.debit("shop", "bob", "cash", 50, txn_id="d-1")
    r = app_client.get("/v1/system-accounts/@external", headers=admin_headers)
    assert r.status_code == 200, r.text
    # customers hold 650 of cash: the outside world is owed exactly that
    assert r.json() == {"account": "@external", "balances": {"cash": -650}}
    assert app_client.get("/v1/system-accounts/@issuance", headers=admin_headers).json() == {
        "account": "@issuance",
        "balances": {},
    }


def test_unknown_system_account_and_missing_scope(app_client, admin_headers, read_headers) -> None:
    r = app_client.get("/v1/system-accounts/@nope", headers=admin_headers)
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")
    assert app_client.get("/v1/system-accounts/@external", headers=read_headers).status_code == 403
