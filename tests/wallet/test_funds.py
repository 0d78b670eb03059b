"""Funds, bonus grants, the balance view, grant expiry and held credits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.errors import NotFound, ValidationError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.events import LedgerEvent

from .conftest import P, assert_consistent, available, fund

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_balance_view_counts_unexpired_grants_only(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "alice", cash=1000, store_credit=300, bonus=((200, 1), (100, 5)))
    view = wallet.wallet.balance(P, "alice")
    assert [(f.fund, f.total, f.withheld, f.available) for f in view.funds] == [
        ("bonus", 300, 0, 300),
        ("store_credit", 300, 0, 300),
        ("cash", 1000, 0, 1000),
    ]
    assert view.total_available == 1600
    clock.advance(timedelta(days=2))
    assert available(wallet, "alice")["bonus"] == 100
    assert wallet.accounts.get(P, "alice").fund("bonus").balance == 300  # not swept yet


def test_expiry_job_moves_leftover_to_expiry_once(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "alice", bonus=((200, 1), (100, 5)))
    wallet.wallet.debit(P, "alice", 50, txn_id="d1")  # from the grant expiring first
    clock.advance(timedelta(days=2))
    done = wallet.wallet.expire_grants(P)
    assert [(e.account, e.grant_id, e.amount) for e in done] == [("alice", "alice-g0", 150)]
    assert wallet.wallet.expire_grants(P) == []
    assert wallet.accounts.get(P, "alice").fund("bonus").balance == 100
    assert wallet.transactions.system_balance(P, "@expiry") == {"bonus": 150}
    grants = wallet.wallet.grants(P, "alice", include_expired=True)
    assert [(g.id, g.awarded, g.available) for g in grants] == [
        ("alice-g0", 200, 0),
        ("alice-g1", 100, 100),
    ]
    assert_consistent(wallet, "alice")


def test_grant_validation_and_replay(wallet: Ledger, clock: ManualClock) -> None:
    wallet.accounts.open(P, "bob")
    soon = clock.now() + timedelta(days=1)
    with pytest.raises(ValidationError, match="future"):
        wallet.wallet.grant(P, "bob", 10, expires_at=clock.now(), txn_id="g0")
    with pytest.raises(ValidationError):
        wallet.wallet.grant(P, "bob", 0, expires_at=soon, txn_id="g0")
    with pytest.raises(NotFound):
        wallet.wallet.grant(P, "nobody", 10, expires_at=soon, txn_id="g0")
    first = wallet.wallet.grant(P, "bob", 10, expires_at=soon, txn_id="g1")
    again = wallet.wallet.grant(P, "bob", 10, expires_at=soon, txn_id="g1")
    assert again.replay
    assert again.id == first.id
    assert available(wallet, "bob")["bonus"] == 10
    with pytest.raises(ValidationError, match="store_credit or cash"):
        wallet.wallet.credit(P, "bob", "bonus", 5, txn_id="c1")


def test_held_credit_is_pending_until_release(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "seller", cash=100)
    r = wallet.wallet.credit_held(
        P, "seller", "cash", 900, release_at=clock.now() + timedelta(days=3), txn_id="sale-1"
    )
    assert r.hold.status == "active"
    assert r.hold.kind == "credit"
    cash = wallet.wallet.balance(P, "seller").fund("cash")
    assert (cash.total, cash.withheld, cash.available) == (1000, 900, 100)
    clock.advance(timedelta(days=3, seconds=1))
    cash = wallet.wallet.balance(P, "seller").fund("cash")  # released lazily on read
    assert (cash.total, cash.withheld, cash.available) == (1000, 0, 1000)
    assert wallet.wallet.hold(P, "sale-1").status == "released"
    assert_consistent(wallet, "seller")


def test_held_credit_in_days_is_the_same_request_on_a_retry(
    wallet: Ledger, clock: ManualClock
) -> None:
    """``release_in_days`` is kept as given (as a grant's ``expires_in_days``): a retry
    later replays the first credit, released at the first call's time plus the days."""
    fund(wallet, "seller")
    start = clock.now()
    first = wallet.wallet.credit_held(P, "seller", "cash", 90, release_in_days=14, txn_id="s-1")
    clock.advance(timedelta(hours=5))
    again = wallet.wallet.credit_held(P, "seller", "cash", 90, release_in_days=14, txn_id="s-1")
    assert (first.transaction.replay, again.transaction.replay) == (False, True)
    assert again.hold.deadline == first.hold.deadline == start + timedelta(days=14)
    assert wallet.wallet.balance(P, "seller").fund("cash").withheld == 90
    for bad in (0, 3661, True):
        with pytest.raises(ValidationError, match="release_in_days must be an integer"):
            wallet.wallet.credit_held(P, "seller", "cash", 1, release_in_days=bad, txn_id="s-2")
    with pytest.raises(ValidationError, match="exactly one of release_at or release_in_days"):
        wallet.wallet.credit_held(
            P,
            "seller",
            "cash",
            1,
            release_at=start + timedelta(days=1),
            release_in_days=1,
            txn_id="s-2",
        )
    assert_consistent(wallet, "seller")


def test_held_credit_released_by_reconcile(wallet: Ledger, clock: ManualClock) -> None:
    fund(wallet, "seller")
    wallet.wallet.credit_held(
        P,
        "seller",
        "store_credit",
        50,
        release_at=clock.now() + timedelta(hours=1),
        txn_id="sale-2",
    )
    events: list[LedgerEvent] = []
    wallet.events.subscribe(events.append)
    clock.advance(timedelta(hours=2))
    report = wallet.wallet.reconcile(P)
    assert report.released_credits == [("seller", "sale-2")]
    assert report.lines() == ["released held credit sale-2 of seller"]
    assert [e.type for e in events] == []  # only debit holds raise HoldExpired
    assert wallet.wallet.reconcile(P).lines() == []
    assert available(wallet, "seller")["store_credit"] == 50
    assert_consistent(wallet, "seller")


@pytest.mark.parametrize("read", ["grants", "holds", "transactions", "balance"])
def test_an_unknown_program_is_named_not_the_account(wallet: Ledger, read: str) -> None:
    with pytest.raises(NotFound, match=r"^program nosuch not found$"):
        getattr(wallet.wallet, read)("nosuch", "alice")


@pytest.mark.parametrize("read", ["hold", "capture", "void", "transaction"])
def test_a_hold_or_record_of_an_unknown_program_names_the_program(
    wallet: Ledger, read: str
) -> None:
    """By id, a hold (read, captured or voided) or a transaction record of an unknown
    program answered "hold h1 not found in program nosuch", unlike the other reads."""
    fund(wallet, "alice", cash=100)
    wallet.wallet.authorize(P, "alice", 10, hold_id="h1")
    with pytest.raises(NotFound, match=r"^program nosuch not found$"):
        getattr(wallet.wallet, read)("nosuch", "h1")
    with pytest.raises(NotFound, match=r"^hold h2 not found in program shop$"):
        wallet.wallet.hold(P, "h2")
