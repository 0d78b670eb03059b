"""Notifications the ledger raises survive a crash between the write and the raising.

A ledger over a :class:`FaultyStore` dies (:class:`Crash`) at each storage call
of a flow, before it or right after a write is applied; then the client does
what the docs say: it retries the same transaction id (or re-runs the job). It
must end with the notifications of a run that never crashed, each once, and
never with one that is no longer true (the fund was topped up meanwhile).
SQLite and DynamoDB.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tallybook.domain.model import default_funds
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash, CrashMode, FaultyStore
from tallybook.services.clock import ManualClock

P = "wal"
_ids = itertools.count()

Flow = Callable[[Ledger, str], Any]


@pytest.fixture
def wal(ledger: Ledger) -> Ledger:
    """Program ``wal``: the default funds, cash with a low-balance threshold of 500."""
    funds = [
        replace(f, low_balance_threshold=500) if f.name == "cash" else f
        for f in default_funds("USD")
    ]
    ledger.programs.create(P, funds=funds)
    return ledger


def _funded(ledger: Ledger, a: str) -> None:
    ledger.accounts.open(P, a)
    ledger.wallet.credit(P, a, "cash", 1000, txn_id=f"{a}-c")


def _low(ledger: Ledger, a: str) -> None:
    _funded(ledger, a)
    ledger.transactions.debit(P, a, "cash", 600, txn_id=f"{a}-d")  # 400: LowBalance


def _held(ledger: Ledger, a: str) -> None:
    _funded(ledger, a)
    ledger.wallet.authorize(P, a, 600, hold_id=f"{a}-h")  # available 400: LowBalance


FLOWS: dict[str, tuple[Callable[[Ledger, str], None], Flow]] = {
    # raise LowBalance
    "debit": (_funded, lambda led, a: led.transactions.debit(P, a, "cash", 600, txn_id=f"{a}-x")),
    "wallet_debit": (_funded, lambda led, a: led.wallet.debit(P, a, 700, txn_id=f"{a}-x")),
    "authorize": (_funded, lambda led, a: led.wallet.authorize(P, a, 600, hold_id=f"{a}-x")),
    # dismiss it
    "top_up": (_low, lambda led, a: led.transactions.credit(P, a, "cash", 300, txn_id=f"{a}-x")),
    "void": (_held, lambda led, a: led.wallet.void(P, f"{a}-h")),
    "capture": (_held, lambda led, a: led.wallet.capture(P, f"{a}-h", 100)),
}


def notifications(ledger: Ledger, a: str) -> list[tuple[object, ...]]:
    """What the member sees, in terms that do not name the account."""
    out: list[tuple[object, ...]] = []
    for n in ledger.notifications.history(P, a, newest_first=False).notifications:
        payload = {k: v for k, v in n.payload.items() if k != "txn_id"}
        by = n.dismissed_by.replace(a, "A") if n.dismissed_by else None
        out.append((n.type, n.status, sorted(payload.items()), n.dismiss_reason, by))
    return out


@pytest.mark.parametrize("mode", ["before", "after"])
@pytest.mark.parametrize("flow", sorted(FLOWS))
def test_a_crash_at_every_step_then_the_retry_raises_what_a_clean_run_does(
    wal: Ledger, clock: ManualClock, flow: str, mode: CrashMode
) -> None:
    setup, run = FLOWS[flow]
    clean = f"clean{next(_ids)}"
    setup(wal, clean)
    run(wal, clean)
    expected = notifications(wal, clean)
    assert expected  # every flow raises or dismisses one
    crashes = 0
    for n in range(1, 60):
        a = f"{flow[:6]}{next(_ids)}"
        setup(wal, a)
        faulty = FaultyStore(wal.store)
        faulty.crash_at(n, mode)
        try:
            run(Ledger(faulty, clock=clock), a)
        except Crash:
            crashes += 1
        else:
            break
        run(wal, a)  # the client retries with the same ids
        assert notifications(wal, a) == expected, f"crash {mode} storage call {n}"
        run(wal, a)  # and again: nothing more
        assert notifications(wal, a) == expected, f"crash {mode} storage call {n}"
    else:  # pragma: no cover
        pytest.fail("the flow never completed")
    assert crashes >= 2
    assert wal.check.program(P).ok


def _crash_after_commit(ledger: Ledger, clock: ManualClock, run: Flow) -> None:
    faulty = FaultyStore(ledger.store)
    faulty.crash_at(1, "after")  # the posting is applied; the process dies
    with pytest.raises(Crash):
        run(Ledger(faulty, clock=clock))


def _active_low(ledger: Ledger, a: str) -> list[dict[str, object]]:
    return [n.payload for n in ledger.notifications.list(P, a) if n.type == "LowBalance"]


def test_a_retry_after_a_top_up_raises_nothing(wal: Ledger, clock: ManualClock) -> None:
    """The LowBalance lost with the crash is no longer true once the fund was
    topped up: the retry must not raise it."""
    _funded(wal, "bob")
    debit = lambda led: led.transactions.debit(P, "bob", "cash", 600, txn_id="d1")  # noqa: E731
    _crash_after_commit(wal, clock, debit)
    wal.transactions.credit(P, "bob", "cash", 500, txn_id="c2")  # 900: above again
    assert debit(wal).replay
    assert _active_low(wal, "bob") == []
    assert wal.notifications.history(P, "bob").notifications == []


def test_a_retry_after_another_drop_keeps_the_newer_low_balance(
    wal: Ledger, clock: ManualClock
) -> None:
    """A top-up whose dismissal was lost, retried after the fund dropped again: the
    new LowBalance is true and stays."""
    _low(wal, "bob")
    top_up = lambda led: led.transactions.credit(P, "bob", "cash", 300, txn_id="c2")  # noqa: E731
    _crash_after_commit(wal, clock, top_up)
    assert [p["txn_id"] for p in _active_low(wal, "bob")] == ["bob-d"]  # stale: 700 now
    wal.transactions.debit(P, "bob", "cash", 400, txn_id="d2")  # 300: a new crossing
    assert [p["txn_id"] for p in _active_low(wal, "bob")] == ["d2"]
    assert top_up(wal).replay
    assert [p["txn_id"] for p in _active_low(wal, "bob")] == ["d2"]


def test_a_lost_dismissal_is_made_by_the_retry(wal: Ledger, clock: ManualClock) -> None:
    _low(wal, "bob")
    top_up = lambda led: led.transactions.credit(P, "bob", "cash", 300, txn_id="c2")  # noqa: E731
    _crash_after_commit(wal, clock, top_up)
    assert len(_active_low(wal, "bob")) == 1
    assert top_up(wal).replay
    assert _active_low(wal, "bob") == []
    (gone,) = wal.notifications.history(P, "bob").notifications
    assert (gone.dismissed_by, gone.dismiss_reason) == ("c2", "topped_up")


def test_a_lost_low_balance_is_raised_once_by_the_retry(wal: Ledger, clock: ManualClock) -> None:
    _funded(wal, "bob")
    debit = lambda led: led.transactions.debit(P, "bob", "cash", 600, txn_id="d1")  # noqa: E731
    _crash_after_commit(wal, clock, debit)
    assert _active_low(wal, "bob") == []
    for _ in range(3):
        assert debit(wal).replay
    assert _active_low(wal, "bob") == [
        {"fund": "cash", "balance": 400, "available": 400, "threshold": 500, "txn_id": "d1"}
    ]
    assert len(wal.notifications.history(P, "bob").notifications) == 1


def test_a_fresh_posting_reads_and_writes_no_more(wal: Ledger) -> None:
    """The recovery costs nothing on the fresh path: a posting that crosses no
    threshold makes as many storage requests with it as without it."""
    _funded(wal, "bob")
    _funded(wal, "carol")

    def requests(txn_id: str, account: str) -> int:
        before = sum(s.requests for s in wal.store.metrics.by_operation.values())
        wal.transactions.debit(P, account, "cash", 10, txn_id=txn_id)
        return sum(s.requests for s in wal.store.metrics.by_operation.values()) - before

    with_recovery = requests("f1", "bob")
    listeners = wal.engine.replay_listeners[:]
    wal.engine.replay_listeners.clear()
    try:
        without = requests("f2", "carol")
    finally:
        wal.engine.replay_listeners[:] = listeners
    assert with_recovery == without == 2  # the head, the transaction
