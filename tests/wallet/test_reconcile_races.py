"""Reconcile racing the attempts of one charged debit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from tallybook.errors import PaymentDeclined
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.charges import ChargeTimeout
from tallybook.services.wallet.debit import CHARGE_GRACE

from .conftest import P, assert_consistent
from .test_debit import InFlightProcessor, first_attempt_in_flight

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


class _GivesUpDuringReconcile(InFlightProcessor):
    """d1's first charge is held in flight, then lands and times out. Reconcile's
    refund of its key lets it go, waits for that attempt to give up (taking its
    intent, refunding, removing it), then runs ``during_refund``; the charge after
    that dies once collected."""

    def __init__(self, during_refund: Callable[[], None]) -> None:
        super().__init__()
        self.during_refund = during_refund
        self.first_thread: threading.Thread | None = None
        self.crash_next = False

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        with self._lock:
            first = self._first
        if first:
            self.first_thread = threading.current_thread()
        reference = super().charge(key=key, account=account, amount=amount, currency=currency)
        if first:
            raise ChargeTimeout("processor timed out")
        if self.crash_next:
            raise Crash("after the charge")
        return reference

    def refund(self, *, key: str) -> None:
        super().refund(key=key)
        if self.first_thread is None or threading.current_thread() is self.first_thread:
            return
        if not self.land.is_set():  # reconcile's refund of the first charge's key
            self.land.set()
            self.first_thread.join(30)
            self.crash_next = True
            self.during_refund()


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_reconcile_leaves_the_intent_of_a_retry_made_while_it_refunded(
    wallet: Ledger, clock: ManualClock
) -> None:
    # was: reconcile deleted the intent by its key whatever it held by then: the
    # retry's intent (its charge collected, its process dead) went with it, and no
    # later reconcile refunded that charge
    def retry_and_die() -> None:
        with pytest.raises(Crash):
            wallet.wallet.debit(P, "alice", 250, txn_id="d1", on_shortfall="charge")

    def reconcile() -> None:
        clock.advance(CHARGE_GRACE + timedelta(minutes=1))
        assert wallet.wallet.reconcile(P).cancelled_charges == [("alice", "d1", 150)]

    processor = _GivesUpDuringReconcile(retry_and_die)
    (answer,) = first_attempt_in_flight(wallet, processor, reconcile)
    assert isinstance(answer, PaymentDeclined), answer
    assert len(processor.charges) == 2
    assert processor.net_charged == 150  # the retry's charge, its process dead
    reconcile()
    assert processor.net_charged == 0
    assert_consistent(wallet, "alice")
