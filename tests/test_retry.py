"""One retry budget per operation: loops at every layer share it, so retries never multiply."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tallybook.errors import Throttled, TooManyRetries
from tallybook.ledger import Ledger
from tallybook.reliability.faults import FaultPlan, FaultyStore
from tallybook.retry import RetryPolicy, current_budget, retrying
from tallybook.services.clock import ManualClock
from tallybook.store.memory import MemoryStore
from tallybook.store.sqlite import SqliteStore
from tallybook.store.testing.helpers import item, key

FAST = RetryPolicy(attempts=4, base_seconds=0.0001, cap_seconds=0.0001)


def _spend(policy: RetryPolicy, sent: list[str], name: str) -> None:
    """A loop whose every try fails: it tries as long as its budget lets it."""
    with retrying(policy) as tries:
        for _ in tries:
            sent.append(name)


def test_a_loop_on_its_own_tries_its_policy_s_attempts() -> None:
    sent: list[str] = []
    _spend(FAST, sent, "engine")
    assert sent == ["engine"] * 4
    assert current_budget() is None  # closed with the loop


def test_nested_loops_share_the_outer_budget_instead_of_multiplying() -> None:
    sent: list[str] = []
    inner = RetryPolicy(attempts=8, base_seconds=0.0001, cap_seconds=0.0001)
    with retrying(FAST) as tries:
        for _ in tries:
            _spend(inner, sent, "inner")
    # 4 sends in all, where 4 outer x 8 inner attempts would have sent 32
    assert len(sent) == 4
    assert current_budget() is None


def test_no_retry_starts_after_the_time_budget() -> None:
    sent: list[str] = []
    _spend(RetryPolicy(attempts=50, seconds=0.0), sent, "once")
    assert sent == ["once"]


def test_a_budget_is_left_even_when_the_loop_raises() -> None:
    with pytest.raises(RuntimeError), retrying(FAST):
        raise RuntimeError("boom")
    assert current_budget() is None


def test_a_posting_that_always_conflicts_sends_its_budget_once(clock: ManualClock) -> None:
    """Every send conflicts: the posting engine gives up after the budget's
    sends, and an operation around it (a client's retries) bounds them all."""
    store = MemoryStore()
    ledger = Ledger(store, clock=clock)
    ledger.programs.create("shop")
    ledger.accounts.open("shop", "alice")
    faulty = FaultyStore(store, FaultPlan(conflict=1.0))
    conflicted = Ledger(faulty, clock=clock)
    conflicted.engine.retry_policy = FAST
    with pytest.raises(TooManyRetries):
        conflicted.transactions.credit("shop", "alice", "points", 5, txn_id="t1")
    assert faulty.counts["conflict"] == 4
    with retrying(RetryPolicy(attempts=2)), pytest.raises(TooManyRetries):
        conflicted.transactions.credit("shop", "alice", "points", 5, txn_id="t1")
    assert faulty.counts["conflict"] == 4 + 2


def test_a_locked_sqlite_file_is_retried_on_the_operation_s_budget(tmp_path: Path) -> None:
    """Another program holds the write lock: the engine retries its BEGIN within
    the budget of the operation around it, then says the file stayed locked."""
    store = SqliteStore(tmp_path / "locked.db", busy_timeout_ms=1)
    other = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with retrying(FAST) as tries:
            with pytest.raises(Throttled, match="stayed locked"):
                store.put(item("x"))
            assert tries.budget.retries == 3  # 4 tries in all, FAST's attempts
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.put(item("x"))
    assert store.get(key("x")) == item("x")
    store.close()
