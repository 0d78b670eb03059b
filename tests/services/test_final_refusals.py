"""Issue 17 defect 4: a refusal that reached the ledger is final for its transaction id.

Before the fix, a transfer refused for insufficient funds and re-sent with the
same id after a top-up was applied. Both engines.
"""

from __future__ import annotations

import pytest

from tallybook.errors import IdempotencyConflict, InsufficientFunds, NotFound
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, balance, open_accounts

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_refused_transfer_stays_refused_after_a_top_up(ledger: Ledger) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 50, txn_id="top-1")
    with pytest.raises(InsufficientFunds) as first:
        ledger.transactions.transfer(PROGRAM, "alice", "bob", "cash", 80, txn_id="pay-1")
    assert not first.value.replay
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="top-2")
    with pytest.raises(InsufficientFunds) as again:
        ledger.transactions.transfer(PROGRAM, "alice", "bob", "cash", 80, txn_id="pay-1")
    assert again.value.replay
    assert again.value.message == first.value.message
    assert (balance(ledger, "alice", "cash"), balance(ledger, "bob", "cash")) == (150, 0)
    with pytest.raises(IdempotencyConflict):
        ledger.transactions.transfer(PROGRAM, "alice", "bob", "cash", 10, txn_id="pay-1")
    with pytest.raises(NotFound, match="pay-1 not found in program shop: it was refused"):
        ledger.transactions.get(PROGRAM, "pay-1")
    assert ledger.transactions.for_owner(PROGRAM, "alice").transactions[0].id == "top-2"
    report = ledger.check.program(PROGRAM)
    assert report.ok, report.violations


def test_a_refused_id_is_not_taken_by_another_request(ledger: Ledger) -> None:
    """The refusal record is the id's answer: a credit cannot reuse the refused debit's id."""
    open_accounts(ledger, "alice")
    with pytest.raises(InsufficientFunds):
        ledger.transactions.debit(PROGRAM, "alice", "points", 5, txn_id="d-1")
    with pytest.raises(IdempotencyConflict):
        ledger.transactions.credit(PROGRAM, "alice", "points", 5, txn_id="d-1")
    assert balance(ledger, "alice", "points") == 0


def test_validation_errors_are_not_final(ledger: Ledger) -> None:
    """Input that never reached a ledger decision (unknown account) may be retried."""
    open_accounts(ledger, "alice")
    with pytest.raises(NotFound):
        ledger.transactions.transfer(PROGRAM, "alice", "carol", "cash", 0 + 1, txn_id="t-1")
    open_accounts(ledger, "carol")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 5, txn_id="top")
    txn = ledger.transactions.transfer(PROGRAM, "alice", "carol", "cash", 1, txn_id="t-1")
    assert not txn.replay


def test_wallet_debit_and_hold_refusals_are_final(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    with pytest.raises(InsufficientFunds):
        ledger.wallet.debit(PROGRAM, "alice", 30, txn_id="buy-1")
    with pytest.raises(InsufficientFunds):
        ledger.wallet.authorize(PROGRAM, "alice", 30, hold_id="hold-1")
    ledger.wallet.credit(PROGRAM, "alice", "cash", 100, txn_id="top")
    with pytest.raises(InsufficientFunds) as debit:
        ledger.wallet.debit(PROGRAM, "alice", 30, txn_id="buy-1")
    with pytest.raises(InsufficientFunds) as hold:
        ledger.wallet.authorize(PROGRAM, "alice", 30, hold_id="hold-1")
    assert debit.value.replay
    assert hold.value.replay
    with pytest.raises(IdempotencyConflict):  # same id, now asking for a charge
        ledger.wallet.debit(PROGRAM, "alice", 30, txn_id="buy-1", on_shortfall="charge")
    with pytest.raises(NotFound):
        ledger.wallet.hold(PROGRAM, "hold-1")
    assert ledger.wallet.balance(PROGRAM, "alice").total_available == 100
    assert ledger.wallet.check(PROGRAM, "alice") == []


def test_loyalty_redeem_refusal_is_final(ledger: Ledger) -> None:
    ledger.loyalty.configure(PROGRAM, {"tiers": [{"name": "base", "threshold": 0}]})
    open_accounts(ledger, "alice")
    with pytest.raises(InsufficientFunds):
        ledger.loyalty.redeem(PROGRAM, "alice", 10, "mug", txn_id="r-1")
    ledger.loyalty.earn(PROGRAM, "alice", "o-1", 10_000)
    with pytest.raises(InsufficientFunds) as again:
        ledger.loyalty.redeem(PROGRAM, "alice", 10, "mug", txn_id="r-1")
    assert again.value.replay
    redeemed = ledger.loyalty.redeem(PROGRAM, "alice", 10, "mug", txn_id="r-2")
    assert not redeemed.replay
