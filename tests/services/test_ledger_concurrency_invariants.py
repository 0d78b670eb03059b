"""Invariants 2 and 4 under concurrent writers, on both engines (kept lean for DynamoDB).

Invariant 1, 3 and 5 under concurrency are covered by test_ledger_concurrency.py
(and the checker run at the end of each test here): these add racing debits
and holds on a balance too small for all of them (2: available never below
zero), and racing multi-account postings of which some must fail (4: all or
nothing, never a partial posting).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from tallybook.domain.model import Leg
from tallybook.errors import InsufficientFunds, TooManyRetries
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, balance, history, open_accounts

THREADS = 8


def _attempt(call: Callable[[], object]) -> bool:
    """True if applied, False if refused for insufficient funds (retries give-ups)."""
    for _ in range(50):
        try:
            call()
        except InsufficientFunds:
            return False
        except TooManyRetries:
            continue
        return True
    raise AssertionError("no progress after 50 retries")


def _hold(ledger: Ledger, txn_id: str, amount: int) -> None:
    """A wallet hold (its row is what the check's invariant 2 sums)."""
    ledger.wallet.authorize(PROGRAM, "alice", amount, hold_id=txn_id)


def test_racing_debits_and_holds_never_take_available_below_zero(
    ledger: Ledger, engine: str
) -> None:
    open_accounts(ledger, "alice")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed")
    per_thread = 3 if engine == "sqlite" else 1
    barrier = threading.Barrier(THREADS)
    debit = ledger.transactions.debit

    def worker(n: int) -> list[tuple[str, bool]]:
        barrier.wait()
        out = []
        for i in range(per_thread):
            txn_id = f"w{n}-{i}"
            if (n + i) % 2:
                ok = _attempt(partial(_hold, ledger, txn_id, 15))
                out.append(("hold", ok))
            else:
                ok = _attempt(partial(debit, PROGRAM, "alice", "cash", 15, txn_id=txn_id))
                out.append(("debit", ok))
        return out

    with ThreadPoolExecutor(THREADS) as pool:
        results = [r for f in [pool.submit(worker, n) for n in range(THREADS)] for r in f.result()]

    debits = sum(1 for kind, ok in results if kind == "debit" and ok)
    holds = sum(1 for kind, ok in results if kind == "hold" and ok)
    assert debits + holds == 6  # 100 // 15: every attempt that fitted was applied, no more
    cash = ledger.accounts.get(PROGRAM, "alice").fund("cash")
    assert cash.balance == 100 - 15 * debits
    assert cash.held == 15 * holds
    assert cash.available == 100 - 15 * (debits + holds) == 10
    assert [e.balance for e in history(ledger, "alice", "cash")] == [
        100 - 15 * k for k in range(debits + 1)
    ]
    report = ledger.check.program(PROGRAM)
    assert report.ok, report.violations


def test_racing_multi_account_postings_are_all_or_nothing(ledger: Ledger, engine: str) -> None:
    """Each posting pays bob and carol from alice and issues them points:
    alice's cash runs out part way, so the late ones fail as a whole."""
    open_accounts(ledger, "alice", "bob", "carol")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 50, txn_id="seed")
    per_thread = 2 if engine == "sqlite" else 1
    barrier = threading.Barrier(THREADS)

    def legs() -> list[Leg]:
        return [
            Leg("alice", "cash", -10),
            Leg("bob", "cash", 6),
            Leg("carol", "cash", 4),
            Leg("bob", "points", 1),
            Leg("carol", "points", 1),
            Leg("@issuance", "points", -2),
        ]  # 10 items with the record, heads and a system shard: DynamoDB Local's limit

    post = ledger.transactions.post

    def worker(n: int) -> list[tuple[str, bool]]:
        barrier.wait()
        out = []
        for i in range(per_thread):
            txn_id = f"m{n}-{i}"
            out.append((txn_id, _attempt(partial(post, PROGRAM, legs(), txn_id=txn_id))))
        return out

    with ThreadPoolExecutor(THREADS) as pool:
        results = [r for f in [pool.submit(worker, n) for n in range(THREADS)] for r in f.result()]

    applied = {txn_id for txn_id, ok in results if ok}
    assert len(applied) == 5  # 50 // 10
    for account, fund, per_post in [
        ("alice", "cash", -10),
        ("bob", "cash", 6),
        ("carol", "cash", 4),
        ("bob", "points", 1),
        ("carol", "points", 1),
    ]:
        ids = {e.txn_id for e in history(ledger, account, fund)} - {"seed"}
        assert ids == applied, (account, fund)  # every leg of an applied posting, no other
        start = 50 if (account, fund) == ("alice", "cash") else 0
        assert balance(ledger, account, fund) == start + per_post * len(applied)
    assert ledger.transactions.system_balance(PROGRAM, "@issuance") == {"points": -10}
    report = ledger.check.program(PROGRAM)
    assert report.ok, report.violations
    assert report.unit_totals == {"points": 0, "USD": 0}
