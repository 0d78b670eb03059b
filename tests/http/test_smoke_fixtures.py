"""The shared HTTP fixtures work (kept tiny; the real tests are in test_ledger_api.py)."""

from __future__ import annotations


def test_fixtures_open_credit_and_read(app_client, write_headers, open_account, credit) -> None:
    open_account("alice")
    credit("alice", 100)
    r = app_client.get("/v1/accounts/alice/balances", headers=write_headers)
    assert r.status_code == 200
    points = next(b for b in r.json()["balances"] if b["fund"] == "points")
    assert points["balance"] == 100
