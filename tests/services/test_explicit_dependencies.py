"""Each service built alone from its collaborators, without a ``Ledger``.

The composition root (``tallybook.Ledger``) only composes: these tests build
``LedgerCore`` over the engine under test (memory in place of SQLite) and then
the one service they exercise, wiring by hand what the ``Ledger`` would.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tallybook.domain.model import FundSpec
from tallybook.errors import Unauthorized
from tallybook.services.apikeys import KeyService
from tallybook.services.billing.service import BillingService
from tallybook.services.clock import ManualClock
from tallybook.services.events import LedgerEvent
from tallybook.services.ledger.check import CheckService
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.loyalty.service import LoyaltyService
from tallybook.services.notifications import triggers
from tallybook.services.notifications.service import NotificationService
from tallybook.services.wallet.charges import FakeChargeProcessor
from tallybook.services.wallet.service import WalletService
from tallybook.store.port import ItemStore

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

P = "shop"
RULES: dict[str, Any] = {
    "tiers": [
        {"name": "base", "threshold": 0},
        {"name": "silver", "threshold": 100, "multiplier": 2},
    ],
    "expiry": {"days": 10, "warn_days": 3},
}


@pytest.fixture
def core(store: ItemStore, clock: ManualClock) -> LedgerCore:
    built = LedgerCore.build(store, clock)
    built.programs.create(P)
    built.accounts.open(P, "alice")
    return built


@pytest.fixture
def events(core: LedgerCore) -> list[LedgerEvent]:
    seen: list[LedgerEvent] = []
    core.events.subscribe(seen.append)
    return seen


def test_the_core_shares_one_store_clock_and_program_cache(
    store: ItemStore, clock: ManualClock
) -> None:
    core = LedgerCore.build(store, clock)
    assert core.store is store
    assert core.clock is clock
    assert core.engine.programs is core.programs is core.accounts.programs
    assert core.transactions.engine is core.engine


def test_wallet_alone_holds_captures_and_raises_hold_expired(
    core: LedgerCore, clock: ManualClock, events: list[LedgerEvent]
) -> None:
    wallet = WalletService(core, FakeChargeProcessor())
    wallet.credit(P, "alice", "cash", 500, txn_id="c1")
    wallet.grant(P, "alice", 200, expires_in_days=10, txn_id="g1")
    held = wallet.authorize(P, "alice", 300, hold_id="h1")
    assert held.hold.amounts == {"bonus": 200, "cash": 100}  # bonus first
    assert wallet.balance(P, "alice").total_available == 400
    wallet.capture(P, "h1", 250)
    assert wallet.balance(P, "alice").total_available == 450

    wallet.authorize(P, "alice", 100, hold_id="h2", expires_in=60)
    clock.advance(timedelta(minutes=2))
    assert str(wallet.hold(P, "h2").status) == "expired"
    assert [(e.type, e.source_id) for e in events] == [("HoldExpired", "h2")]
    assert wallet.check(P, "alice") == []


def test_wallet_charges_a_shortfall_through_the_hook_it_was_given(core: LedgerCore) -> None:
    processor = FakeChargeProcessor()
    wallet = WalletService(core, processor)
    wallet.credit(P, "alice", "cash", 100, txn_id="c1")
    wallet.debit(P, "alice", 150, txn_id="d1", on_shortfall="charge")
    assert [(c.account, c.amount) for c in processor.charges.values()] == [("alice", 50)]
    assert wallet.balance(P, "alice").total_available == 0


def test_loyalty_alone_earns_and_announces_a_tier_change(
    core: LedgerCore, events: list[LedgerEvent]
) -> None:
    loyalty = LoyaltyService(core)
    loyalty.configure(P, RULES)
    assert loyalty.earn(P, "alice", "o1", 5000).points == 50
    assert events == []  # enrolment into the base tier is no change
    loyalty.earn(P, "alice", "o2", 6000)
    assert loyalty.status(P, "alice").tier == "silver"
    assert [(e.type, e.payload["tier"]) for e in events] == [("TierChanged", "silver")]
    assert loyalty.order(P, "o2").account == "alice"


def test_notifications_alone_raise_nothing_until_attached(core: LedgerCore) -> None:
    core.programs.create("low", funds=(FundSpec("cash", "USD", low_balance_threshold=100),))
    core.accounts.open("low", "bob")
    notes = NotificationService(core.store, core.clock, core.programs, core.accounts)
    core.transactions.credit("low", "bob", "cash", 500, txn_id="c1")
    core.transactions.debit("low", "bob", "cash", 450, txn_id="d1")
    assert notes.list("low", "bob") == []  # nothing subscribed it

    triggers.attach(notes, engine=core.engine, events=core.events)
    core.transactions.credit("low", "bob", "cash", 450, txn_id="c2")
    core.transactions.debit("low", "bob", "cash", 450, txn_id="d2")
    assert [n.type for n in notes.list("low", "bob")] == ["LowBalance"]


def test_keys_billing_and_check_take_plain_parameters(core: LedgerCore) -> None:
    keys = KeyService(core.store, core.clock, core.programs)
    key, secret = keys.create(P, "read")
    assert keys.authenticate(secret).id == key.id
    keys.revoke(key.id)
    with pytest.raises(Unauthorized):
        keys.authenticate(secret)

    billing = BillingService(core.store, core.clock, core.programs)
    record = billing.ingest(
        P,
        "r1",
        partner="acme",
        order_id="o1",
        amount=1000,
        currency="USD",
        rate="0.1",
        time=core.clock.now(),
    )
    assert record.commission == 100

    core.transactions.credit(P, "alice", "points", 70, txn_id="p1")
    check = CheckService(core.store, core.programs, core.accounts, core.transactions)
    report = check.program(P)
    assert report.ok, report.violations
    assert report.unit_totals["points"] == 0
