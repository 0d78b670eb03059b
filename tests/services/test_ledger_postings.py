"""Ledger writes on both engines: credit, debit, transfer, adjust, post, replays, funds rules."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.domain.model import FundSpec, Leg, TxnType
from tallybook.errors import IdempotencyConflict, InsufficientFunds
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

from .ledger_helpers import PROGRAM, balance, history, open_accounts, state

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_credit_records_an_entry_with_the_resulting_balance(
    ledger: Ledger, clock: ManualClock
) -> None:
    open_accounts(ledger, "alice")
    txn = ledger.transactions.credit(
        PROGRAM,
        "alice",
        "points",
        120,
        txn_id="t1",
        order_id="o-1",
        description="welcome bonus",
        metadata={"channel": "web"},
    )
    assert not txn.replay
    assert txn.type == TxnType.CREDIT
    assert txn.created_at == clock.now()
    customer, system = txn.legs
    assert (customer.account, customer.amount, customer.balance, customer.seq) == (
        "alice",
        120,
        120,
        1,
    )
    assert (system.account, system.amount, system.balance) == ("@external", -120, None)
    (entry,) = history(ledger, "alice", "points")
    assert (entry.seq, entry.amount, entry.balance, entry.txn_id) == (1, 120, 120, "t1")
    assert (entry.type, entry.order_id, entry.description) == ("credit", "o-1", "welcome bonus")
    assert entry.metadata == {"channel": "web"}
    assert entry.unit == "points"
    assert entry.created_at == clock.now()
    assert ledger.transactions.get(PROGRAM, "t1") == txn


def test_each_entry_carries_the_running_balance_and_a_gapless_sequence(
    ledger: Ledger, clock: ManualClock
) -> None:
    open_accounts(ledger, "alice")
    amounts = [50, -20, 7, -37, 100]
    for i, amount in enumerate(amounts):
        clock.advance(timedelta(seconds=1))
        if amount > 0:
            ledger.transactions.credit(PROGRAM, "alice", "cash", amount, txn_id=f"t{i}")
        else:
            ledger.transactions.debit(PROGRAM, "alice", "cash", -amount, txn_id=f"t{i}")
    entries = history(ledger, "alice", "cash")
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert [e.amount for e in entries] == amounts
    assert [e.balance for e in entries] == [50, 30, 37, 0, 100]
    assert [e.type for e in entries] == ["credit", "debit", "credit", "debit", "credit"]
    assert balance(ledger, "alice", "cash") == 100
    assert ledger.transactions.system_balance(PROGRAM, "@external") == {"cash": -100}


def test_funds_are_independent(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="p")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 99, txn_id="c")
    balances = {b.fund: b.balance for b in ledger.accounts.balances(PROGRAM, "alice")}
    assert balances == {"points": 10, "cash": 99, "store_credit": 0, "bonus": 0}
    assert [e.txn_id for e in history(ledger, "alice", "points")] == ["p"]
    assert [e.txn_id for e in history(ledger, "alice", "cash")] == ["c"]


def test_debit_beyond_the_balance_is_refused_and_changes_nothing(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 30, txn_id="t1")
    before = state(ledger, "alice")
    with pytest.raises(InsufficientFunds, match="available 30, needed 31"):
        ledger.transactions.debit(PROGRAM, "alice", "cash", 31, txn_id="t2")
    assert state(ledger, "alice") == before
    # the refusal is final for its id (docs/reliability.md): another request needs another id
    with pytest.raises(IdempotencyConflict):
        ledger.transactions.debit(PROGRAM, "alice", "cash", 30, txn_id="t2")
    ledger.transactions.debit(PROGRAM, "alice", "cash", 30, txn_id="t3")
    assert balance(ledger, "alice", "cash") == 0


def test_an_overdraft_fund_may_go_negative(store_ledger_with_overdraft: Ledger) -> None:
    ledger = store_ledger_with_overdraft
    ledger.accounts.open("od", "alice")
    txn = ledger.transactions.debit("od", "alice", "credit_line", 500, txn_id="t1")
    assert txn.legs[0].balance == -500
    assert balance(ledger, "alice", "credit_line", "od") == -500
    with pytest.raises(InsufficientFunds):
        ledger.transactions.debit("od", "alice", "cash", 1, txn_id="t2")
    assert ledger.check.program("od").ok


@pytest.fixture
def store_ledger_with_overdraft(ledger: Ledger) -> Ledger:
    ledger.programs.create(
        "od",
        funds=[FundSpec("cash", "USD"), FundSpec("credit_line", "USD", allow_overdraft=True)],
    )
    return ledger


def test_transfer_moves_between_accounts_all_or_nothing(ledger: Ledger) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "points", 100, txn_id="t1")
    txn = ledger.transactions.transfer(PROGRAM, "alice", "bob", "points", 40, txn_id="t2")
    assert [(leg.account, leg.amount, leg.balance) for leg in txn.legs] == [
        ("alice", -40, 60),
        ("bob", 40, 40),
    ]
    before = state(ledger, "alice", "bob")
    with pytest.raises(InsufficientFunds):
        ledger.transactions.transfer(PROGRAM, "alice", "bob", "points", 61, txn_id="t3")
    assert state(ledger, "alice", "bob") == before
    # a transfer moves nothing through system accounts
    assert ledger.transactions.system_balance(PROGRAM, "@external") == {"points": -100}
    assert [e.txn_id for e in history(ledger, "bob", "points")] == ["t2"]


def test_adjust_is_signed_against_the_adjustment_account(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.adjust(PROGRAM, "alice", "store_credit", 25, txn_id="a1")
    ledger.transactions.adjust(
        PROGRAM, "alice", "store_credit", -10, txn_id="a2", description="typo fix"
    )
    assert balance(ledger, "alice", "store_credit") == 15
    assert ledger.transactions.system_balance(PROGRAM, "@adjustment") == {"store_credit": -15}
    assert [e.type for e in history(ledger, "alice", "store_credit")] == ["adjust", "adjust"]
    with pytest.raises(InsufficientFunds):
        ledger.transactions.adjust(PROGRAM, "alice", "store_credit", -16, txn_id="a3")


def test_post_applies_a_balanced_multi_account_multi_fund_transaction(ledger: Ledger) -> None:
    open_accounts(ledger, "alice", "bob")
    legs = [
        Leg("alice", "points", 100),
        Leg("bob", "points", 50),
        Leg("@issuance", "points", -150),
        Leg("alice", "cash", 300),
        Leg("@external", "cash", -300),
        Leg("@external", "store_credit", -100),
        Leg("bob", "store_credit", 100),
    ]
    txn = ledger.transactions.post(PROGRAM, legs, txn_id="multi", type=TxnType.EARN)
    assert txn.type == "earn"
    assert balance(ledger, "alice", "points") == 100
    assert balance(ledger, "bob", "points") == 50
    assert balance(ledger, "alice", "cash") == 300
    assert balance(ledger, "bob", "store_credit") == 100
    assert ledger.transactions.system_balance(PROGRAM, "@issuance") == {"points": -150}
    # two funds of one system account in one transaction: one shard item, two funds
    assert ledger.transactions.system_balance(PROGRAM, "@external") == {
        "cash": -300,
        "store_credit": -100,
    }
    report = ledger.check.program(PROGRAM)
    assert report.ok, report.violations
    assert report.unit_totals == {"points": 0, "USD": 0}


def test_post_is_all_or_nothing_when_one_leg_fails(ledger: Ledger) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 10, txn_id="seed")
    before = state(ledger, "alice", "bob")
    legs = [
        Leg("alice", "points", 5),
        Leg("@issuance", "points", -5),
        Leg("bob", "cash", -1),  # bob has no cash
        Leg("alice", "cash", 1),
    ]
    with pytest.raises(InsufficientFunds, match="bob"):
        ledger.transactions.post(PROGRAM, legs, txn_id="bad")
    assert state(ledger, "alice", "bob") == before


# -- idempotency ----------------------------------------------------------------


def test_a_replay_returns_the_original_marked_as_replay(ledger: Ledger, clock: ManualClock) -> None:
    open_accounts(ledger, "alice")
    first = ledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="t1", order_id="o")
    clock.advance(timedelta(minutes=5))
    ledger.transactions.credit(PROGRAM, "alice", "points", 5, txn_id="t2")
    again = ledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="t1", order_id="o")
    assert again.replay
    assert not first.replay
    # the original result, not a recomputation: balance 10, seq 1, first time
    assert again.legs == first.legs
    assert again.created_at == first.created_at
    assert balance(ledger, "alice", "points") == 15
    assert [e.txn_id for e in history(ledger, "alice", "points")] == ["t1", "t2"]


def test_a_replay_of_a_debit_still_succeeds_when_funds_are_gone(ledger: Ledger) -> None:
    """The record is checked before the business rule on a replay."""
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 10, txn_id="t1")
    first = ledger.transactions.debit(PROGRAM, "alice", "cash", 10, txn_id="t2")
    again = ledger.transactions.debit(PROGRAM, "alice", "cash", 10, txn_id="t2")
    assert again.replay
    assert again.legs == first.legs
    assert balance(ledger, "alice", "cash") == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda led: led.transactions.credit(PROGRAM, "alice", "points", 11, txn_id="t1"),
        lambda led: led.transactions.credit(PROGRAM, "alice", "cash", 10, txn_id="t1"),
        lambda led: led.transactions.credit(PROGRAM, "bob", "points", 10, txn_id="t1"),
        lambda led: led.transactions.debit(PROGRAM, "alice", "points", 10, txn_id="t1"),
        lambda led: led.transactions.credit(
            PROGRAM, "alice", "points", 10, txn_id="t1", order_id="other"
        ),
        lambda led: led.transactions.credit(
            PROGRAM, "alice", "points", 10, txn_id="t1", description="changed"
        ),
        lambda led: led.transactions.transfer(PROGRAM, "alice", "bob", "points", 10, txn_id="t1"),
    ],
    ids=["amount", "fund", "account", "type", "order", "description", "operation"],
)
def test_the_same_id_with_another_body_is_an_idempotency_conflict(
    ledger: Ledger, call: object
) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="t1")
    before = state(ledger, "alice", "bob")
    with pytest.raises(IdempotencyConflict, match="t1"):
        call(ledger)  # type: ignore[operator]
    assert state(ledger, "alice", "bob") == before


def test_transaction_ids_are_scoped_by_program(ledger: Ledger) -> None:
    ledger.programs.create("other")
    open_accounts(ledger, "alice")
    ledger.accounts.open("other", "alice")
    a = ledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="same")
    b = ledger.transactions.credit("other", "alice", "points", 99, txn_id="same")
    assert not a.replay
    assert not b.replay
    assert balance(ledger, "alice", "points") == 10
    assert balance(ledger, "alice", "points", "other") == 99


def test_listeners_see_before_and_after(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    seen = []
    ledger.engine.subscribe(seen.append)
    ledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="t1")
    ledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="t1")  # replay
    assert len(seen) == 1
    event = seen[0]
    assert event.transaction.id == "t1"
    assert event.before["alice"].fund("points").balance == 0
    assert event.after["alice"]["points"].balance == 10
