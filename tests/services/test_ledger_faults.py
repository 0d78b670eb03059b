"""Lost requests and lost responses: a retried write is applied exactly once."""

from __future__ import annotations

import pytest

from tallybook.errors import IdempotencyConflict, StoreUnavailable
from tallybook.ledger import Ledger
from tallybook.reliability.faults import FaultyStore, touches
from tallybook.services.clock import ManualClock
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.store.port import ItemStore

from .ledger_helpers import PROGRAM, balance, history, open_accounts, state

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

TXN_RECORD = touches("TXN#")


@pytest.fixture
def faulty(store: ItemStore) -> FaultyStore:
    return FaultyStore(store)


@pytest.fixture
def fledger(faulty: FaultyStore, clock: ManualClock) -> Ledger:
    ledger = Ledger(faulty, clock=clock)
    ledger.programs.create(PROGRAM)
    open_accounts(ledger, "alice", "bob")
    return ledger


def test_a_credit_whose_response_is_lost_is_applied_once_on_retry(
    fledger: Ledger, faulty: FaultyStore
) -> None:
    faulty.lose_response(match=TXN_RECORD)
    with pytest.raises(StoreUnavailable, match="timed out"):
        fledger.transactions.credit(PROGRAM, "alice", "points", 70, txn_id="t1")
    assert faulty.fired == 1
    # it was applied although the caller saw an error
    assert balance(fledger, "alice", "points") == 70
    retry = fledger.transactions.credit(PROGRAM, "alice", "points", 70, txn_id="t1")
    assert retry.replay
    assert retry.legs[0].balance == 70
    assert balance(fledger, "alice", "points") == 70
    assert [e.txn_id for e in history(fledger, "alice", "points")] == ["t1"]
    assert fledger.transactions.system_balance(PROGRAM, "@external") == {"points": -70}
    assert fledger.check.program(PROGRAM).ok


def test_a_transfer_whose_response_is_lost_moves_money_once(
    fledger: Ledger, faulty: FaultyStore
) -> None:
    fledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    faulty.lose_response(match=TXN_RECORD)
    with pytest.raises(StoreUnavailable):
        fledger.transactions.transfer(PROGRAM, "alice", "bob", "cash", 60, txn_id="t1")
    retry = fledger.transactions.transfer(PROGRAM, "alice", "bob", "cash", 60, txn_id="t1")
    assert retry.replay
    assert balance(fledger, "alice", "cash") == 40
    assert balance(fledger, "bob", "cash") == 60
    assert fledger.check.program(PROGRAM).ok


def test_a_debit_whose_response_is_lost_replays_even_though_funds_are_gone(
    fledger: Ledger, faulty: FaultyStore
) -> None:
    fledger.transactions.credit(PROGRAM, "alice", "cash", 50, txn_id="seed")
    faulty.lose_response(match=TXN_RECORD)
    with pytest.raises(StoreUnavailable):
        fledger.transactions.debit(PROGRAM, "alice", "cash", 50, txn_id="t1")
    retry = fledger.transactions.debit(PROGRAM, "alice", "cash", 50, txn_id="t1")
    assert retry.replay
    assert balance(fledger, "alice", "cash") == 0


def test_a_request_that_never_arrived_is_applied_by_the_retry(
    fledger: Ledger, faulty: FaultyStore
) -> None:
    before = state(fledger, "alice", "bob")
    faulty.fail_request(match=TXN_RECORD)
    with pytest.raises(StoreUnavailable):
        fledger.transactions.credit(PROGRAM, "alice", "points", 5, txn_id="t1")
    assert state(fledger, "alice", "bob") == before
    retry = fledger.transactions.credit(PROGRAM, "alice", "points", 5, txn_id="t1")
    assert not retry.replay
    assert balance(fledger, "alice", "points") == 5


def test_a_client_retrying_through_several_lost_responses_applies_once(
    fledger: Ledger, faulty: FaultyStore
) -> None:
    faulty.fail_request(2, match=TXN_RECORD)
    faulty.lose_response(1, match=TXN_RECORD)
    outcomes = []
    for _ in range(5):
        try:
            txn = fledger.transactions.credit(PROGRAM, "alice", "points", 9, txn_id="t1")
        except StoreUnavailable:
            outcomes.append("timeout")
            continue
        outcomes.append("replay" if txn.replay else "applied")
        break
    assert outcomes == ["timeout", "timeout", "timeout", "replay"]
    assert balance(fledger, "alice", "points") == 9
    assert len(history(fledger, "alice", "points")) == 1


def test_a_retry_with_another_body_after_a_lost_response_is_a_conflict(
    fledger: Ledger, faulty: FaultyStore
) -> None:
    faulty.lose_response(match=TXN_RECORD)
    with pytest.raises(StoreUnavailable):
        fledger.transactions.credit(PROGRAM, "alice", "points", 10, txn_id="t1")
    with pytest.raises(IdempotencyConflict):
        fledger.transactions.credit(PROGRAM, "alice", "points", 11, txn_id="t1")
    assert balance(fledger, "alice", "points") == 10


def test_a_hold_whose_response_is_lost_is_held_once(fledger: Ledger, faulty: FaultyStore) -> None:
    fledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")

    def planner(snap: Snapshot) -> Plan:
        snap.account("alice")
        return Plan(type="authorize", held={("alice", "cash"): 30})

    def hold() -> bool:
        return fledger.engine.commit(PROGRAM, "h1", {"hold": 30}, planner, lock=["alice"]).replay

    faulty.lose_response(match=TXN_RECORD)
    with pytest.raises(StoreUnavailable):
        hold()
    assert hold()
    fund = fledger.accounts.get(PROGRAM, "alice").fund("cash")
    assert (fund.balance, fund.held, fund.available) == (100, 30, 70)
