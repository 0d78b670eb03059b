"""Notifications the ledger raises itself: LowBalance and events from the bus."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta

import pytest

from tallybook.domain.model import FundSpec, default_funds
from tallybook.domain.notifications import Notification, Status
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.events import LedgerEvent
from tallybook.services.notifications.delivery import RecordingDelivery
from tallybook.store.records.codec import iso

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


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


# -- raised end to end by wallet and loyalty operations (no event published by hand) --

LOYALTY = {
    "tiers": [
        {"name": "base", "threshold": 0},
        {"name": "silver", "threshold": 100, "multiplier": 2},
    ],
    "expiry": {"days": 10, "warn_days": 3},
}


def active(ledger: Ledger, program: str, account: str) -> dict[str, Notification]:
    return {n.type: n for n in ledger.notifications.list(program, account)}


def test_hold_expiry_raises_hold_expired(ledger: Ledger, clock: ManualClock, alice: str) -> None:
    ledger.wallet.credit("shop", alice, "cash", 1000, txn_id="c1")
    ledger.wallet.authorize("shop", alice, 300, hold_id="h1", expires_in=60)
    assert "HoldExpired" not in active(ledger, "shop", alice)
    clock.advance(timedelta(minutes=2))
    assert ledger.wallet.reconcile("shop").lines() == ["expired hold h1 of alice"]
    raised = active(ledger, "shop", alice)["HoldExpired"]
    assert (raised.payload["hold_id"], raised.payload["amount"]) == ("h1", 300)
    assert raised.source == "ev:HoldExpired:h1"
    ledger.wallet.reconcile("shop")  # nothing left to do: nothing raised again
    ledger.wallet.void("shop", "h1")
    history = ledger.notifications.history("shop", alice).notifications
    assert [n.type for n in history] == ["HoldExpired"]


def test_earn_and_expiry_raise_tier_changed_and_points_expiring(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    ledger.loyalty.configure("shop", LOYALTY)
    ledger.loyalty.earn("shop", alice, "o1", 5000)  # 50 points: base, nothing raised
    assert active(ledger, "shop", alice) == {}
    ledger.loyalty.earn("shop", alice, "o2", 5000)  # 100: silver
    tier = active(ledger, "shop", alice)["TierChanged"]
    assert (tier.payload["previous"], tier.payload["tier"]) == ("base", "silver")
    ledger.loyalty.earn("shop", alice, "o2", 5000)  # a replay raises nothing
    assert len(ledger.notifications.history("shop", alice).notifications) == 1

    clock.advance(timedelta(days=8))  # the lots expire on day 10: within warn_days
    assert ledger.loyalty.expire("shop").warned == 1
    warning = active(ledger, "shop", alice)["PointsExpiring"]
    assert (warning.payload["points"], warning.payload["lots"]) == (100, 2)
    ledger.loyalty.expire("shop")  # the same lots: the same warning, not a second one
    types = [n.type for n in ledger.notifications.history("shop", alice).notifications]
    assert sorted(types) == ["PointsExpiring", "TierChanged"]


def test_points_expiring_is_listed_until_the_points_expire(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    """The warning stayed active for ever: weeks after its points had expired the
    member still read "100 points expire on ..." in their active list."""
    ledger.loyalty.configure("shop", LOYALTY)
    ledger.loyalty.earn("shop", alice, "o1", 10_000)  # 100 points, expiring on day 10
    clock.advance(timedelta(days=8))
    ledger.loyalty.expire("shop")
    warning = active(ledger, "shop", alice)["PointsExpiring"]
    assert warning.expires_at is not None
    assert iso(warning.expires_at) == warning.payload["expires"]  # its first lot's date
    clock.advance(timedelta(days=3))  # day 11: the points are gone, with or without the job
    assert "PointsExpiring" not in active(ledger, "shop", alice)
    assert ledger.notifications.get("shop", alice, warning.id).status is Status.EXPIRED
    ledger.loyalty.expire("shop")
    assert "PointsExpiring" not in active(ledger, "shop", alice)


def test_a_warning_raised_before_warnings_expired_is_no_conflict(
    ledger: Ledger, clock: ManualClock, alice: str
) -> None:
    """A PointsExpiring raised before warnings carried an ``expires_at`` holds the
    key the job warns of the same points under, with another fingerprint: every
    later run failed to warn (IdempotencyConflict logged, ``warnings_failed``)."""
    ledger.loyalty.configure("shop", LOYALTY)
    earned = ledger.loyalty.earn("shop", alice, "o1", 10_000)  # 100 points, expiring on day 10
    clock.advance(timedelta(days=8))
    seen: list[LedgerEvent] = []
    ledger.events.subscribe(seen.append)
    payload = {"points": 100, "expires": earned.lot_expires, "lots": 1}
    before = LedgerEvent("shop", alice, "PointsExpiring", payload, "expiring:100:100:1")
    assert ledger.events.publish(before)  # as the job raised it then
    raised = active(ledger, "shop", alice)["PointsExpiring"]

    report = ledger.loyalty.expire("shop")
    assert (report.warned, report.warnings_failed) == (1, 0)
    job = [e for e in seen if e.type == "PointsExpiring"][-1]
    assert replace(job, expires_at=None) == before  # the same warning, now with its expiry
    assert active(ledger, "shop", alice)["PointsExpiring"].id == raised.id


def test_points_expiring_follows_the_points_as_more_lots_come_due(
    ledger: Ledger, clock: ManualClock, alice: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning names what expires: a second lot entering the horizon behind
    the same first lot updates it (its key was the first lot only, so the
    second warning was an IdempotencyConflict, logged, and the member kept
    the first amount)."""
    ledger.loyalty.configure("shop", {**LOYALTY, "expiry": {"days": 10, "warn_days": 4}})
    ledger.loyalty.earn("shop", alice, "o1", 5000)  # 50 points, expiring on day 10
    clock.advance(timedelta(days=2))
    ledger.loyalty.earn("shop", alice, "o2", 3000)  # 30 more, expiring on day 12
    clock.advance(timedelta(days=5))  # day 7: only the first lot is within 4 days
    ledger.loyalty.expire("shop")
    first = active(ledger, "shop", alice)["PointsExpiring"]
    assert (first.payload["points"], first.payload["lots"]) == (50, 1)
    clock.advance(timedelta(days=1, hours=12))  # day 8.5: both lots are
    with caplog.at_level(logging.WARNING):
        ledger.loyalty.expire("shop")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    second = active(ledger, "shop", alice)["PointsExpiring"]
    assert (second.payload["points"], second.payload["lots"]) == (80, 2)
    assert second.id != first.id
    ledger.loyalty.expire("shop")  # the same lots again: no third warning
    history = ledger.notifications.history("shop", alice).notifications
    assert [n.type for n in history].count("PointsExpiring") == 2


def test_events_of_a_long_transaction_id_raise_their_notification_once(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    """``ev:TierChanged:{transaction id}`` outgrows the 128 characters of a key
    when the transaction id is long (an earn of a long order id): the key is then
    a digest (it was refused, logged, and the member never saw the notification)."""
    account = "a" * 100
    ledger.accounts.open("shop", account)
    ledger.loyalty.configure("shop", LOYALTY)
    with caplog.at_level(logging.WARNING):
        ledger.loyalty.earn("shop", account, "o" * 110, 10_000)  # 100 points: silver
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    raised = active(ledger, "shop", account)["TierChanged"]
    assert raised.source is not None
    assert raised.source.startswith("ev:TierChanged:h-")
    assert len(raised.source) <= 128
    # the same event again (the same long transaction id): no second notification
    again = LedgerEvent("shop", account, "TierChanged", raised.payload, "order:" + "o" * 110)
    ledger.events.publish(again)
    history = ledger.notifications.history("shop", account).notifications
    assert [n.type for n in history] == ["TierChanged"]


def test_a_hold_raises_low_balance_and_its_void_clears_it(
    ledger: Ledger, delivered: RecordingDelivery
) -> None:
    funds = [
        replace(f, low_balance_threshold=500) if f.name == "cash" else f
        for f in default_funds("USD")
    ]
    ledger.programs.create("wal2", funds=funds)
    ledger.accounts.open("wal2", "carol")
    ledger.wallet.credit("wal2", "carol", "cash", 800, txn_id="c1")
    ledger.wallet.authorize("wal2", "carol", 400, hold_id="h1")  # available 400 < 500
    low = active(ledger, "wal2", "carol")["LowBalance"]
    assert (low.payload["balance"], low.payload["available"]) == (800, 400)
    assert [d.type for d in delivered.delivered] == ["LowBalance"]
    ledger.wallet.void("wal2", "h1")  # available back to 800
    assert "LowBalance" not in active(ledger, "wal2", "carol")
    (cleared,) = ledger.notifications.history("wal2", "carol").notifications
    assert cleared.dismiss_reason == "topped_up"
