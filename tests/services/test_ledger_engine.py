"""The posting engine's low-level Plan: holds, head attributes, extra actions, retries."""

from __future__ import annotations

import pytest

from tallybook.domain.model import Leg
from tallybook.errors import InsufficientFunds, TooManyRetries, ValidationError
from tallybook.ledger import Ledger
from tallybook.retry import RetryPolicy
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.store import keys
from tallybook.store.port import Exists, Key, NotExists, Put

from .ledger_helpers import PROGRAM, balance, history, open_accounts, state

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def hold(account: str, fund: str, delta: int, **extra: object) -> object:
    def planner(snap: Snapshot) -> Plan:
        snap.account(account)
        return Plan(type="authorize", held={(account, fund): delta}, **extra)  # type: ignore[arg-type]

    return planner


def commit(ledger: Ledger, txn_id: str, planner: object, body: dict[str, object] | None = None):  # type: ignore[no-untyped-def]
    return ledger.engine.commit(
        PROGRAM,
        txn_id,
        body or {"id": txn_id},
        planner,
        lock=["alice"],  # type: ignore[arg-type]
    )


def test_held_amounts_reduce_available_without_an_entry(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    txn = commit(ledger, "h1", hold("alice", "cash", 30, details={"hold": "h1"}))
    assert txn.legs == ()
    assert ledger.transactions.get(PROGRAM, "h1").details == {"hold": "h1"}
    (cash,) = [b for b in ledger.accounts.balances(PROGRAM, "alice") if b.fund == "cash"]
    assert (cash.balance, cash.held, cash.available) == (100, 30, 70)
    assert len(history(ledger, "alice", "cash")) == 1  # a hold is not a posting
    with pytest.raises(InsufficientFunds, match="available 70"):
        ledger.transactions.debit(PROGRAM, "alice", "cash", 71, txn_id="d1")
    ledger.transactions.debit(PROGRAM, "alice", "cash", 70, txn_id="d2")
    assert ledger.accounts.get(PROGRAM, "alice").fund("cash").available == 0


def test_a_hold_beyond_available_is_refused(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 50, txn_id="seed")
    commit(ledger, "h1", hold("alice", "cash", 40))
    before = state(ledger, "alice")
    with pytest.raises(InsufficientFunds):
        commit(ledger, "h2", hold("alice", "cash", 11))
    with pytest.raises(ValidationError, match="negative"):
        commit(ledger, "h3", hold("alice", "cash", -41))
    assert state(ledger, "alice") == before


def test_capture_moves_held_money_out_in_one_transaction(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    commit(ledger, "auth", hold("alice", "cash", 60))

    def capture(snap: Snapshot) -> Plan:
        return Plan(
            type="capture",
            legs=[Leg("alice", "cash", -45), Leg("@redemption", "cash", 45)],
            held={("alice", "cash"): -60},
        )

    txn = commit(ledger, "cap", capture)
    assert txn.legs[0].balance == 55
    fund = ledger.accounts.get(PROGRAM, "alice").fund("cash")
    assert (fund.balance, fund.held, fund.available) == (55, 0, 55)
    assert ledger.transactions.system_balance(PROGRAM, "@redemption") == {"cash": 45}
    assert ledger.check.program(PROGRAM).ok


def test_a_hold_replay_does_not_hold_twice(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    commit(ledger, "h1", hold("alice", "cash", 30))
    again = commit(ledger, "h1", hold("alice", "cash", 30))
    assert again.replay
    assert ledger.accounts.get(PROGRAM, "alice").fund("cash").held == 30


def test_attrs_and_head_sets_land_on_the_head(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")

    def tier(snap: Snapshot) -> Plan:
        return Plan(
            type="tier",
            attrs={"alice": {"tier": "gold"}},
            head_sets={"alice": {"gsi1pk": "TIER#shop#gold", "gsi1sk": "alice"}},
            allow_empty=True,
        )

    commit(ledger, "tier1", tier)
    acct = ledger.accounts.get(PROGRAM, "alice")
    assert acct.attributes == {"tier": "gold"}
    assert acct.version == 1
    members = ledger.store.query("TIER#shop#gold", index="gsi1").items
    assert [m["account"] for m in members] == ["alice"]


def test_a_failing_plan_action_applies_nothing_and_gives_up_after_bounded_retries(
    ledger: Ledger,
) -> None:
    open_accounts(ledger, "alice")
    ledger.engine.retry_policy = RetryPolicy(attempts=3, base_seconds=0.001)
    before = state(ledger, "alice")
    calls = []
    marker = Key(keys.account_partition(PROGRAM, "alice"), "X#missing")

    def planner(snap: Snapshot) -> Plan:
        calls.append(1)
        return Plan(
            type="credit",
            legs=[Leg("alice", "points", 5), Leg("@issuance", "points", -5)],
            actions=[Put({**marker.as_item(), "v": 1}, Exists("pk"))],
        )

    with pytest.raises(TooManyRetries):
        commit(ledger, "never", planner)
    assert len(calls) == 3
    assert state(ledger, "alice") == before
    assert ledger.store.get(marker) is None
    assert ledger.store.get(keys.transaction(PROGRAM, "never")) is None


def test_a_plan_action_is_written_with_the_postings(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    lot = Key(keys.account_partition(PROGRAM, "alice"), "L#0001")

    def planner(snap: Snapshot) -> Plan:
        return Plan(
            type="earn",
            legs=[Leg("alice", "points", 5), Leg("@issuance", "points", -5)],
            actions=[Put({**lot.as_item(), "remaining": 5}, NotExists("pk"))],
        )

    commit(ledger, "earn1", planner)
    assert ledger.store.get(lot) == {**lot.as_item(), "remaining": 5}
    assert balance(ledger, "alice", "points") == 5


def test_a_planner_sees_the_clock_and_current_heads(ledger: Ledger) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "points", 7, txn_id="seed")
    seen = {}

    def planner(snap: Snapshot) -> Plan:
        snap.preload(["alice", "bob"])
        seen["alice"] = snap.account("alice").fund("points").balance
        seen["now"] = snap.now
        amount = seen["alice"]
        return Plan(
            type="sweep", legs=[Leg("alice", "points", -amount), Leg("bob", "points", amount)]
        )

    commit(ledger, "sweep", planner)
    assert seen == {"alice": 7, "now": ledger.clock.now()}
    assert balance(ledger, "bob", "points") == 7
