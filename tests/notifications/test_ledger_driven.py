"""Notifications the ledger raises itself: LowBalance and events from the bus."""

from __future__ import annotations

import pytest

from tallybook.domain.model import FundSpec
from tallybook.domain.notifications import Status
from tallybook.ledger import Ledger
from tallybook.services.events import LedgerEvent
from tallybook.services.notification_delivery import RecordingDelivery


@pytest.fixture
def wallet(ledger: Ledger, delivered: RecordingDelivery) -> str:
    ledger.programs.create(
        "wal",
        funds=[
            FundSpec("cash", "USD", low_balance_threshold=500),
            FundSpec("credit", "USD", low_balance_threshold=100),
            FundSpec("points", "points"),
        ],
    )
    ledger.accounts.open("wal", "bob")
    return "bob"


def low_balances(ledger: Ledger, account: str) -> list[dict[str, object]]:
    return [n.payload for n in ledger.notifications.list("wal", account) if n.type == "LowBalance"]


def test_low_balance_raised_and_cleared(
    ledger: Ledger, wallet: str, delivered: RecordingDelivery
) -> None:
    t = ledger.transactions
    t.credit("wal", wallet, "cash", 300, txn_id="c1")  # never above: nothing to raise
    assert low_balances(ledger, wallet) == []
    t.credit("wal", wallet, "cash", 700, txn_id="c2")  # 1000
    t.debit("wal", wallet, "cash", 600, txn_id="d1")  # 400 < 500
    assert low_balances(ledger, wallet) == [
        {"fund": "cash", "balance": 400, "available": 400, "threshold": 500, "txn_id": "d1"}
    ]
    assert [d.type for d in delivered.delivered] == ["LowBalance"]
    t.debit("wal", wallet, "cash", 100, txn_id="d2")  # still below: no second one
    assert len(ledger.notifications.history("wal", wallet).notifications) == 1
    t.credit("wal", wallet, "cash", 50, txn_id="c3")  # 350: still low
    assert len(low_balances(ledger, wallet)) == 1
    t.credit("wal", wallet, "cash", 150, txn_id="c4")  # 500: back at the threshold
    assert low_balances(ledger, wallet) == []
    (cleared,) = ledger.notifications.history("wal", wallet).notifications
    assert cleared.status is Status.DISMISSED
    assert (cleared.dismissed_by, cleared.dismiss_reason) == ("c4", "topped_up")
    # a replayed debit does not raise it again
    t.debit("wal", wallet, "cash", 600, txn_id="d1")
    assert low_balances(ledger, wallet) == []


def test_top_up_of_another_fund_keeps_low_balance(ledger: Ledger, wallet: str) -> None:
    t = ledger.transactions
    t.credit("wal", wallet, "cash", 1000, txn_id="c1")
    t.credit("wal", wallet, "credit", 50, txn_id="k0")  # below 100 from the start
    t.debit("wal", wallet, "cash", 900, txn_id="d1")
    t.credit("wal", wallet, "credit", 100, txn_id="k1")  # credit climbs to 150
    assert [p["fund"] for p in low_balances(ledger, wallet)] == ["cash"]


def test_funds_without_threshold_raise_nothing(ledger: Ledger, wallet: str) -> None:
    t = ledger.transactions
    t.credit("wal", wallet, "points", 10, txn_id="p1")
    t.debit("wal", wallet, "points", 10, txn_id="p2")
    assert ledger.notifications.list("wal", wallet) == []


def test_ledger_events_become_notifications(ledger: Ledger, alice: str) -> None:
    event = LedgerEvent("shop", alice, "HoldExpired", {"hold_id": "h1"}, source_id="h1")
    ledger.events.publish(event)
    ledger.events.publish(event)  # raised twice: one notification
    ledger.events.publish(LedgerEvent("shop", alice, "TierChanged", {"tier": "gold"}, "t1"))
    ledger.events.publish(LedgerEvent("shop", alice, "PointsExpiring", {"points": 5}, "x1"))
    ledger.events.publish(LedgerEvent("shop", alice, "Bad#Type", {}, "x2"))  # logged, not raised
    types = sorted(n.type for n in ledger.notifications.list("shop", alice))
    assert types == ["HoldExpired", "PointsExpiring", "TierChanged"]
    assert len(ledger.notifications.history("shop", alice).notifications) == 3
