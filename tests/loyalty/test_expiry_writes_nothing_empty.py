"""Issue 17 defect 11: the expiry job wrote empty 0-point transactions for members
whose due lots held no points any more; it must write nothing when the lots were
redeemed. Lots whose points were debited outside loyalty still need passing: one
transaction without legs. Both engines."""

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
    # 50 points of "kept"; "debited" has no points to expire, but its lots are done
    # with: a transaction without legs moves past them (see the next test)
    assert (report.transactions, report.points) == (2, 50)
    assert _types(ledger, "redeemed") == ["redeem", "earn"]
    assert _types(ledger, "debited") == ["expire", "debit", "earn"]
    (moved, *_) = ledger.transactions.for_owner("shop", "debited").transactions
    assert (moved.legs, moved.details["points"]) == ((), 0)
    assert _types(ledger, "kept") == ["expire", "earn"]
    again = ledger.loyalty.expire("shop")
    assert again.transactions == 0
    assert ledger.check.program("shop").ok


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_lots_debited_away_do_not_expire_later_points(ledger: Ledger, clock: ManualClock) -> None:
    """A lot whose points were debited outside loyalty expired nothing at its date
    and, as nothing was written, stayed due: the member's next points (a new earn,
    a plain credit, which never expires) were expired in its place at their next
    loyalty read. The expiry now moves past such lots (a transaction without legs),
    so later points expire at their own date, and plain credits never."""
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "m")
    ledger.loyalty.earn("shop", "m", "o1", 5000)  # 50 points, expire on day 5
    ledger.transactions.debit("shop", "m", "points", 50, txn_id="d1")  # outside loyalty
    clock.advance(timedelta(days=6))
    report = ledger.loyalty.expire("shop")
    assert (report.transactions, report.points) == (1, 0)
    ledger.loyalty.earn("shop", "m", "o2", 3000)  # 30 points, expire on day 11
    ledger.transactions.credit("shop", "m", "points", 20, txn_id="c1")  # forms no lot
    status = ledger.loyalty.status("shop", "m")
    assert status.balance == 50  # was 0: the 30 and the 20 expired on day 6
    assert ledger.loyalty.expiring_page("shop", "m", days=10).points == 30
    clock.advance(timedelta(days=6))
    assert ledger.loyalty.expire("shop").points == 30
    assert ledger.loyalty.status("shop", "m").balance == 20
    assert ledger.loyalty.expire("shop").transactions == 0
    assert ledger.check.program("shop").ok
