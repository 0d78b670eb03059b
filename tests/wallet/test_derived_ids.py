"""Issue 17 defect 1: ids tallybook derives live in a namespace client ids cannot enter.

Before the fix a client could post a transfer named ``ord-7:capture`` and the
capture of hold ``ord-7`` answered 409 for ever (or take ``ord-7:expire`` and
keep the hold's funds withheld). One test per derived id, on both engines.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from tallybook.domain.ids import RESERVED_RULE, check_client_txn_id, is_derived
from tallybook.errors import ValidationError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.loyalty.jobs import _expire_txn
from tallybook.services.loyalty.values import order_txn_id, scoped_txn_id

from .conftest import P, fund

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

Take = Callable[[Ledger, str], object]

#: every way a client names a transaction or hold id
CLIENT_WRITES: dict[str, Take] = {
    "transfer": lambda led, t: led.transactions.transfer(P, "alice", "bob", "cash", 1, txn_id=t),
    "credit": lambda led, t: led.transactions.credit(P, "alice", "cash", 1, txn_id=t),
    "raw post": lambda led, t: led.transactions.adjust(P, "alice", "cash", 1, txn_id=t),
    "wallet credit": lambda led, t: led.wallet.credit(P, "alice", "cash", 1, txn_id=t),
    "wallet debit": lambda led, t: led.wallet.debit(P, "alice", 1, txn_id=t),
    "hold": lambda led, t: led.wallet.authorize(P, "alice", 1, hold_id=t),
    "held credit": lambda led, t: led.wallet.credit_held(
        P, "alice", "cash", 1, release_at=led.clock.now() + timedelta(days=1), txn_id=t
    ),
    "grant": lambda led, t: led.wallet.grant(
        P, "alice", 1, expires_at=led.clock.now() + timedelta(days=1), txn_id=t
    ),
}


def _refused_everywhere(ledger: Ledger, txn_id: str) -> None:
    for name, take in CLIENT_WRITES.items():
        with pytest.raises(ValidationError, match="is reserved: ids ending in ':capture'") as e:
            take(ledger, txn_id)
        assert RESERVED_RULE in e.value.message, name
    with pytest.raises(ValidationError, match="reserved"):
        ledger.loyalty.redeem(P, "alice", 1, "mug", txn_id=txn_id)


@pytest.fixture
def funded(ledger: Ledger) -> Ledger:
    fund(ledger, "alice", cash=1000)
    fund(ledger, "bob", cash=1000)
    return ledger


def test_hold_capture_id(funded: Ledger) -> None:
    funded.wallet.authorize(P, "alice", 100, hold_id="ord-7")
    _refused_everywhere(funded, "ord-7:capture")
    result = funded.wallet.capture(P, "ord-7")
    assert result.transaction is not None
    assert result.transaction.id == "ord-7:capture"
    assert is_derived(result.transaction.id)


def test_hold_void_id(funded: Ledger) -> None:
    funded.wallet.authorize(P, "alice", 100, hold_id="ord-7")
    _refused_everywhere(funded, "ord-7:void")
    result = funded.wallet.void(P, "ord-7")
    assert result.transaction is not None
    assert result.transaction.id == "ord-7:void"
    assert is_derived(result.transaction.id)


def test_hold_expire_id(funded: Ledger, clock: ManualClock) -> None:
    funded.wallet.authorize(P, "alice", 100, hold_id="ord-7", expires_in=60)
    _refused_everywhere(funded, "ord-7:expire")
    clock.advance(timedelta(minutes=2))
    hold = funded.wallet.hold(P, "ord-7")
    assert str(hold.status) == "expired"
    assert funded.wallet.transaction(P, "ord-7:expire").type == "expire"
    assert funded.wallet.balance(P, "alice").total_available == 1000


def test_held_credit_release_id(funded: Ledger, clock: ManualClock) -> None:
    release = funded.clock.now() + timedelta(minutes=1)
    funded.wallet.credit_held(P, "alice", "cash", 50, release_at=release, txn_id="sale-1")
    _refused_everywhere(funded, "sale-1:release")
    clock.advance(timedelta(minutes=2))
    funded.wallet.reconcile(P)
    released = funded.wallet.transaction(P, "sale-1:release")
    assert is_derived(released.id)
    assert funded.wallet.balance(P, "alice").total_available == 1050


def test_grant_expire_id(funded: Ledger, clock: ManualClock) -> None:
    expires = funded.clock.now() + timedelta(minutes=1)
    funded.wallet.grant(P, "alice", 30, expires_at=expires, txn_id="g-1")
    _refused_everywhere(funded, "g-1:expire")
    clock.advance(timedelta(minutes=2))
    funded.wallet.reconcile(P)
    assert funded.wallet.transaction(P, "g-1:expire").type == "expire"


def test_loyalty_order_earn_id(funded: Ledger) -> None:
    funded.loyalty.configure(P, {"tiers": [{"name": "base", "threshold": 0}]})
    _refused_everywhere(funded, "order:o-1")
    earned = funded.loyalty.earn(P, "alice", "o-1", 10_000)
    assert earned.transaction.id == order_txn_id("o-1") == "order:o-1"
    assert is_derived(earned.transaction.id)


def test_points_expiry_id(funded: Ledger) -> None:
    txn_id = _expire_txn("alice", 3)
    assert is_derived(txn_id)
    _refused_everywhere(funded, txn_id)


def test_tier_change_id(funded: Ledger) -> None:
    txn_id = scoped_txn_id("tier", "alice", "5")
    assert is_derived(txn_id)
    _refused_everywhere(funded, txn_id)


@pytest.mark.parametrize(
    "txn_id",
    ["ord-7", "capture", "ord:7", "capture:ord-7", "order-1", "orders:1", "x:captured", "a:b"],
)
def test_ids_outside_the_namespace_stay_free(txn_id: str) -> None:
    assert check_client_txn_id(txn_id) == txn_id
