"""A charge processor whose ``refund()`` fails: the debit answers a documented
error, the charge's intent stays for ``reconcile``, and reconcile goes on with
the other intents, reporting the refund it could not make."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from tallybook.errors import InsufficientFunds, PaymentDeclined
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.charges import FakeChargeProcessor
from tallybook.services.wallet.debit import CHARGE_GRACE
from tallybook.services.wallet.records import WalletTransaction

from .conftest import P, assert_consistent, fund
from .test_debit import InFlightProcessor, first_attempt_in_flight, reconcile_then_retry

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


class RefundsFail(FakeChargeProcessor):
    """The fake processor, whose refunds of keys naming a transaction in
    ``failing`` raise ``RuntimeError``; ``during_charge`` runs (once each) after
    a charge is collected, and a ``Crash`` there is the process dying."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()
        self.during_charge: list[Callable[[], object]] = []

    def charge(self, *, key: str, account: str, amount: int, currency: str) -> str:
        reference = super().charge(key=key, account=account, amount=amount, currency=currency)
        while self.during_charge:
            self.during_charge.pop(0)()
        return reference

    def refund(self, *, key: str) -> None:
        if key.split(":")[1] in self.failing:
            raise RuntimeError("refund bug")
        super().refund(key=key)


@pytest.fixture
def refunds_fail(wallet: Ledger) -> RefundsFail:
    processor = RefundsFail()
    wallet.wallet.processor = processor
    return processor


def test_a_refused_commit_whose_refund_fails_is_refused_and_reconciled(
    wallet: Ledger, refunds_fail: RefundsFail, clock: ManualClock
) -> None:
    # was: the refund's RuntimeError escaped the debit raw (an HTTP 500), and a
    # retry of d1 said its charge "was cancelled by reconcile", which had not run
    fund(wallet, "alice", cash=100)
    refunds_fail.failing.add("d1")
    refunds_fail.during_charge.append(lambda: wallet.wallet.debit(P, "alice", 100, txn_id="other"))
    with pytest.raises(InsufficientFunds, match=r"could not be refunded yet.*reconcile refunds it"):
        wallet.wallet.debit(P, "alice", 300, txn_id="d1", on_shortfall="charge")
    assert refunds_fail.net_charged == 200
    with pytest.raises(PaymentDeclined) as retried:
        wallet.wallet.debit(P, "alice", 300, txn_id="d1", on_shortfall="charge")
    assert "cancelled by reconcile" not in retried.value.message
    assert "earlier charge of 200 for transaction d1 is being refunded" in retried.value.message
    refunds_fail.failing.clear()
    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    assert wallet.wallet.reconcile(P).cancelled_charges == [("alice", "d1", 200)]
    assert refunds_fail.net_charged == 0
    wallet.wallet.credit(P, "alice", "cash", 100, txn_id="topup")
    t = wallet.wallet.debit(P, "alice", 300, txn_id="d1", on_shortfall="charge")
    assert (t.charge or {}).get("amount") == refunds_fail.net_charged == 200
    assert_consistent(wallet, "alice")


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_reconcile_reports_a_failed_refund_and_goes_on(
    wallet: Ledger, refunds_fail: RefundsFail, clock: ManualClock
) -> None:
    # was: the first refund's RuntimeError ended the pass: the other intent was
    # not refunded, and the holds and grants were not reconciled either
    def die() -> None:
        raise Crash("after the charge")

    fund(wallet, "alice", cash=100)
    for txn in ("d1", "d2"):
        refunds_fail.during_charge.append(die)
        with pytest.raises(Crash):
            wallet.wallet.debit(P, "alice", 250, txn_id=txn, on_shortfall="charge")
    wallet.wallet.authorize(P, "alice", 50, hold_id="h1", expires_in=60)
    refunds_fail.failing.add("d1")
    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    report = wallet.wallet.reconcile(P)
    assert report.cancelled_charges == [("alice", "d2", 150)]
    assert report.expired_holds == [("alice", "h1")]
    assert [(a, t, n) for a, t, n, _ in report.failed_refunds] == [("alice", "d1", 150)]
    assert any(
        line.startswith("could not refund charge d1 of alice (150): RuntimeError: refund bug")
        for line in report.lines()
    )
    assert refunds_fail.net_charged == 150
    # was: "charge intent d1 of alice in flight since ...", its charge long landed
    (due,) = wallet.wallet.check(P, "alice")
    assert due.startswith("charge intent d1 of alice, made at ")
    assert "taken for refunding (the refund has not completed)" in due
    refunds_fail.failing.clear()
    again = wallet.wallet.reconcile(P)
    assert again.cancelled_charges == [("alice", "d1", 150)]
    assert again.failed_refunds == []
    assert refunds_fail.net_charged == 0
    assert_consistent(wallet, "alice")


class _InFlightRefundsFail(InFlightProcessor):
    """The first charge is held in flight; refunding a key once it is charged fails."""

    def refund(self, *, key: str) -> None:
        with self._lock:
            if key in self.charges:
                raise RuntimeError("refund bug")


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_a_late_charge_whose_refund_fails_is_left_for_reconcile(
    wallet: Ledger, clock: ManualClock
) -> None:
    # was: the first attempt, its charge landed after reconcile refunded its key
    # and the retry committed, raised the refund's RuntimeError raw and left
    # nothing naming its key: the shortfall stayed paid twice for good
    processor = _InFlightRefundsFail()
    (answer,) = first_attempt_in_flight(wallet, processor, reconcile_then_retry(wallet, clock))
    assert isinstance(answer, WalletTransaction), answer
    assert answer.replay
    assert answer.charge == wallet.wallet.transaction(P, "d1").charge
    assert processor.net_charged == 300
    processor.refund = super(_InFlightRefundsFail, processor).refund  # type: ignore[method-assign]
    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    assert wallet.wallet.reconcile(P).cancelled_charges == [("alice", "d1", 150)]
    assert processor.net_charged == 150
    assert_consistent(wallet, "alice")
