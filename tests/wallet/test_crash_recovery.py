"""A crash between every pair of storage steps of every wallet flow, then reconcile.

For each flow and each storage write n, a ledger over a :class:`FaultyStore`
runs the flow and "dies" before write n (or right after it: a lost response).
Dying before a read leaves the store and the processor as dying before the next
write does, or right after the previous one when the charge falls between
them, so the reads are not crash points of their own (a reconcile reads some
fifty times for a handful of writes). Then ``reconcile``
runs (after the charge grace period) and every invariant must hold: ledger
check (invariants 1, 3, 5), wallet check (2: withheld = active holds, grants =
bonus, available >= 0, no stale charge intent), and the external processor
charged exactly what committed debits recorded (4: nothing half-applied).
Finally the client retries the flow with the same ids, which must succeed.

Flows: grant, credit, held credit, debit, charged debit, authorize, partial and
full capture, void, reconcile (holds, held credits, grants), and the lazy
expiry of a read (balance, hold). Every case runs on both engines.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash, CrashMode, FaultyStore
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.charges import FakeChargeProcessor
from tallybook.services.wallet.debit import CHARGE_GRACE, charge_key

from .conftest import P, fund

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

Flow = Callable[[Ledger, str], Any]


#: per account, a fixed time in the future, so a retried flow sends the same body
_later: dict[str, datetime] = {}


def _setup(ledger: Ledger, a: str) -> None:
    _later[a] = ledger.clock.now() + timedelta(days=9)
    fund(ledger, a, cash=300, store_credit=100, bonus=((100, 20), (50, 30)))


def _authorized(ledger: Ledger, a: str) -> None:
    _setup(ledger, a)
    ledger.wallet.authorize(P, a, 250, hold_id=f"{a}-h")


def _overdue(ledger: Ledger, a: str) -> None:
    """A hold past its deadline, a held credit past its release and an expired
    grant with something left (for reconcile and lazy expiry on read)."""
    _setup(ledger, a)
    now = ledger.clock.now()
    ledger.wallet.grant(P, a, 30, expires_at=now + timedelta(seconds=1), txn_id=f"{a}-short")
    ledger.wallet.authorize(P, a, 120, hold_id=f"{a}-h", expires_in=1)
    ledger.wallet.credit_held(
        P, a, "cash", 40, release_at=now + timedelta(seconds=1), txn_id=f"{a}-s"
    )
    assert isinstance(ledger.clock, ManualClock)
    ledger.clock.advance(timedelta(seconds=2))


FLOWS: dict[str, tuple[Callable[[Ledger, str], None], Flow]] = {
    "grant": (
        _setup,
        lambda led, a: led.wallet.grant(P, a, 70, expires_at=_later[a], txn_id=f"{a}-x"),
    ),
    "credit": (_setup, lambda led, a: led.wallet.credit(P, a, "cash", 70, txn_id=f"{a}-x")),
    "credit_held": (
        _setup,
        lambda led, a: led.wallet.credit_held(
            P, a, "cash", 70, release_at=_later[a], txn_id=f"{a}-x"
        ),
    ),
    "debit": (_setup, lambda led, a: led.wallet.debit(P, a, 220, txn_id=f"{a}-x")),
    "debit_charge": (
        _setup,
        lambda led, a: led.wallet.debit(P, a, 700, txn_id=f"{a}-x", on_shortfall="charge"),
    ),
    "authorize": (_setup, lambda led, a: led.wallet.authorize(P, a, 300, hold_id=f"{a}-x")),
    "capture": (_authorized, lambda led, a: led.wallet.capture(P, f"{a}-h", 180)),
    "void": (_authorized, lambda led, a: led.wallet.void(P, f"{a}-h")),
    "capture_all": (_authorized, lambda led, a: led.wallet.capture(P, f"{a}-h")),
    "reconcile": (_overdue, lambda led, a: led.wallet.reconcile(P)),
    "balance_expires_hold": (_overdue, lambda led, a: led.wallet.balance(P, a)),
    "hold_read_expires_it": (_overdue, lambda led, a: led.wallet.hold(P, f"{a}-h")),
}
_ids = itertools.count()


def _charged_by_records(ledger: Ledger, a: str) -> int:
    total = 0
    for t in ledger.wallet.transactions(P, a, limit=100).transactions:
        if t.charge:
            total += t.charge["amount"]
    return total


def _assert_invariants(ledger: Ledger, processor: FakeChargeProcessor, a: str) -> None:
    report = ledger.check.account(P, a)
    assert report.ok, report.violations
    assert ledger.wallet.check(P, a) == []
    view = ledger.wallet.balance(P, a)
    assert all(f.available >= 0 for f in view.funds)
    charged = sum(c.amount for c in processor.charges.values() if not c.refunded and c.account == a)
    assert charged == _charged_by_records(ledger, a)


@pytest.mark.parametrize("mode", ["before", "after"])
@pytest.mark.parametrize("flow", sorted(FLOWS))
def test_crash_at_every_step_then_reconcile(
    wallet: Ledger,
    processor: FakeChargeProcessor,
    clock: ManualClock,
    flow: str,
    mode: CrashMode,
) -> None:
    setup, run = FLOWS[flow]
    crashes = 0
    for n in range(1, 150):
        a = f"{flow[:6]}{next(_ids)}"
        setup(wallet, a)
        faulty = FaultyStore(wallet.store)
        faulty.crash_at(n, mode, reads=False)
        crashing = Ledger(faulty, clock=clock)
        crashing.wallet.processor = processor
        try:
            run(crashing, a)
        except Crash:
            crashes += 1
        else:
            break
        clock.advance(CHARGE_GRACE + timedelta(minutes=1))
        wallet.wallet.reconcile(P)
        _assert_invariants(wallet, processor, a)
        run(wallet, a)  # the client retries with the same ids
        _assert_invariants(wallet, processor, a)
    else:  # pragma: no cover
        pytest.fail("the flow never completed")
    assert crashes >= 1  # a flow writes at least once
    assert wallet.check.program(P).ok
    assert not any(
        c.refunded is False and c.key.startswith(f"{P}:") and c.amount < 0
        for c in processor.charges.values()
    )
    assert charge_key(P, "x", "n1") == f"{P}:x:n1"
