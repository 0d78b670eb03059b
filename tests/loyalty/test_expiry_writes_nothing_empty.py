"""Issue 17 defect 11: the expiry job wrote empty 0-point transactions for members
whose due lots held no points any more; it must write nothing. Both engines."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

RULES = {"tiers": [{"name": "base", "threshold": 0}], "expiry": {"days": 5}}


def _types(ledger: Ledger, account: str) -> list[str]:
    return [t.type for t in ledger.transactions.for_owner("shop", account).transactions]


def test_nothing_left_to_expire_writes_no_transaction(ledger: Ledger, clock: ManualClock) -> None:
    ledger.loyalty.configure("shop", RULES)
    for account in ("redeemed", "debited", "kept"):
        ledger.accounts.open("shop", account)
        ledger.loyalty.earn("shop", account, f"o-{account}", 5000)  # 50 points
    ledger.loyalty.redeem("shop", "redeemed", 50, "mug", txn_id="r-1")
    ledger.transactions.debit("shop", "debited", "points", 50, txn_id="d-1")  # outside loyalty
    clock.advance(timedelta(days=7))
    report = ledger.loyalty.expire("shop")
    assert (report.transactions, report.points) == (1, 50)  # "kept" only
    assert _types(ledger, "redeemed") == ["redeem", "earn"]
    assert _types(ledger, "debited") == ["debit", "earn"]
    assert _types(ledger, "kept") == ["expire", "earn"]
    again = ledger.loyalty.expire("shop")
    assert again.transactions == 0
    assert ledger.check.program("shop").ok
