"""An owner's transaction records paged: each listed once, newest first, on both engines.

A transaction's entries sit at their fund's own time (strictly after the fund's
last entry), so a transaction spending several funds at the same ``created_at``
as others, or on a clock that stepped back, sat at different times in different
funds: a page boundary then listed it twice (and the merge out of order)."""

from __future__ import annotations

from datetime import timedelta

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

from .conftest import P, fund


def _paged(ledger: Ledger, limit: int) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = ledger.wallet.transactions(P, "alice", limit=limit, cursor=cursor)
        ids += [t.id for t in page.transactions]
        cursor = page.cursor
        if cursor is None:
            return ids


def _writes(wallet: Ledger) -> None:
    fund(wallet, "alice", cash=500, store_credit=100, bonus=((50, 3), (20, 1)))
    w = wallet.wallet
    w.debit(P, "alice", 200, txn_id="d1")  # bonus, store credit and cash
    w.authorize(P, "alice", 30, hold_id="h1")
    w.credit(P, "alice", "store_credit", 40, txn_id="c2")
    w.debit(P, "alice", 80, txn_id="d2")  # store credit and cash


def test_transactions_at_one_time_are_each_listed_once_whatever_the_page_size(
    wallet: Ledger,
) -> None:
    _writes(wallet)  # the test clock stands still: every record has the same time
    everything = _paged(wallet, 1000)
    assert sorted(everything) == sorted(
        ["alice-cash", "alice-sc", "alice-g0", "alice-g1", "d1", "h1", "c2", "d2"]
    )
    for limit in (1, 2, 3, 5):
        assert _paged(wallet, limit) == everything
    # within a fund, the later of two records made at one time comes first
    assert everything.index("d2") < everything.index("c2") < everything.index("d1")
    assert everything.index("d1") < everything.index("alice-cash")


def test_a_clock_that_steps_back_lists_each_transaction_once_newest_first(
    wallet: Ledger, clock: ManualClock
) -> None:
    fund(wallet, "alice", cash=500, store_credit=100)
    w = wallet.wallet
    clock.advance(timedelta(seconds=5))
    w.debit(P, "alice", 150, txn_id="d1")  # store credit and cash, 5 s later
    clock.advance(timedelta(seconds=-3))  # another writer's clock, behind
    w.credit(P, "alice", "cash", 10, txn_id="c2")
    w.debit(P, "alice", 20, txn_id="d2")
    everything = _paged(wallet, 1000)
    assert everything == ["d1", "d2", "c2", "alice-sc", "alice-cash"]
    for limit in (1, 2, 3):
        assert _paged(wallet, limit) == everything
