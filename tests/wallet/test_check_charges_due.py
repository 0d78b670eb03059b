"""A charge intent past its grace is reported for what it is: a recovery due.

``tallybook check`` reported it as "invariant 2: charge intent ... is stale",
though no balance is wrong: reconcile refunds its charge and deletes it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.charges import FakeChargeProcessor
from tallybook.services.wallet.debit import CHARGE_GRACE

from .conftest import P, fund

pytestmark = pytest.mark.unit


class _DiesWhileCharging(FakeChargeProcessor):
    """Takes the charge, then the process dies before the debit commits."""

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        super().charge(key=key, account=account, amount=amount, currency=currency)
        raise Crash("died after the charge")


def test_a_charge_past_its_grace_is_a_recovery_due_not_an_invariant_2_violation(
    wallet: Ledger, processor: FakeChargeProcessor, clock: ManualClock
) -> None:
    fund(wallet, "alice", cash=100)
    wallet.wallet.processor = _DiesWhileCharging()
    with pytest.raises(Crash):
        wallet.wallet.debit(P, "alice", 300, txn_id="d1", on_shortfall="charge")
    wallet.wallet.processor = processor
    assert wallet.check.account(P, "alice").ok  # in flight within its grace: nothing to say

    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    (line,) = wallet.check.account(P, "alice").violations
    assert not line.startswith("invariant")
    assert line.startswith("charge intent d1 of alice in flight since ")
    assert line.endswith("past its 10 min grace: reconcile will refund its charge and delete it")
    assert wallet.wallet.check(P, "alice") == [line]
    assert wallet.wallet.check_balances(P, "alice") == []

    wallet.wallet.reconcile(P)
    assert wallet.check.account(P, "alice").ok
    assert wallet.wallet.check(P, "alice") == []
