"""Concurrent writers: no lost update, no double apply (threads; on SQLite also processes)."""

from __future__ import annotations

import multiprocessing
import random
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest

from tallybook.domain.model import Transaction
from tallybook.errors import TooManyRetries
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore

from .ledger_helpers import PROGRAM, balance, history, open_accounts
from .mp_workers import credit_hot_account

THREADS = 8
SEED = 1_000_000


def _until_done(call: Callable[[], Transaction]) -> Transaction:
    """Repeat a call the engine gave up on (TooManyRetries is safe to retry)."""
    for _ in range(50):
        try:
            return call()
        except TooManyRetries:
            continue
    raise AssertionError("no progress after 50 retries")


def test_threads_transferring_and_replaying_apply_each_transaction_once(
    ledger: Ledger, engine: str
) -> None:
    accounts = ["a", "b", "c", "d"]
    open_accounts(ledger, *accounts)
    for acct in accounts:
        ledger.transactions.credit(PROGRAM, acct, "points", SEED, txn_id=f"seed-{acct}")
    rng = random.Random(7)
    count = 48 if engine == "sqlite" else 16
    ops = []
    for i in range(count):
        src, dst = rng.sample(accounts, 2)
        ops.append((f"tr{i}", src, dst, rng.randint(1, 1000)))
    barrier = threading.Barrier(THREADS)

    def worker(n: int) -> list[tuple[str, bool]]:
        # every thread submits every transfer, in its own order: 8 submissions per id
        mine = list(ops)
        random.Random(n).shuffle(mine)
        out = []
        barrier.wait()
        for txn_id, src, dst, amount in mine:
            transfer = partial(
                ledger.transactions.transfer, PROGRAM, src, dst, "points", amount, txn_id=txn_id
            )
            replay = _until_done(transfer).replay
            out.append((txn_id, replay))
        return out

    with ThreadPoolExecutor(THREADS) as pool:
        results = [r for f in [pool.submit(worker, n) for n in range(THREADS)] for r in f.result()]

    applied = Counter(txn_id for txn_id, replay in results if not replay)
    assert applied == Counter({txn_id: 1 for txn_id, *_ in ops})
    assert len(results) == THREADS * count
    expected = dict.fromkeys(accounts, SEED)
    for _, src, dst, amount in ops:
        expected[src] -= amount
        expected[dst] += amount
    assert {a: balance(ledger, a, "points") for a in accounts} == expected
    for acct in accounts:
        ids = [e.txn_id for e in history(ledger, acct, "points")]
        assert len(ids) == len(set(ids))
        assert set(ids) - {f"seed-{acct}"} == {t for t, s, d, _ in ops if acct in (s, d)}
    report = ledger.check.program(PROGRAM)
    assert report.ok, report.violations


def test_independent_writers_on_one_hot_account_lose_no_update(
    store: ItemStore, clock: ManualClock, engine: str
) -> None:
    """Each thread has its own Ledger, so only optimistic concurrency protects the head."""
    setup = Ledger(store, clock=clock)
    setup.programs.create(PROGRAM)
    open_accounts(setup, "hot")
    per_thread = 25 if engine == "sqlite" else 8
    ledgers = [Ledger(store, clock=clock) for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)

    def worker(n: int) -> int:
        led = ledgers[n]
        barrier.wait()
        for i in range(per_thread):
            txn_id = f"w{n}-{i}"
            credit = partial(led.transactions.credit, PROGRAM, "hot", "points", 1, txn_id=txn_id)
            assert not _until_done(credit).replay
        return led.engine.retries

    with ThreadPoolExecutor(THREADS) as pool:
        retries = sum(f.result() for f in [pool.submit(worker, n) for n in range(THREADS)])
    total = THREADS * per_thread
    assert balance(setup, "hot", "points") == total
    entries = history(setup, "hot", "points")
    assert [e.seq for e in entries] == list(range(1, total + 1))
    assert [e.balance for e in entries] == list(range(1, total + 1))
    assert setup.transactions.system_balance(PROGRAM, "@external") == {"points": -total}
    print(f"optimistic retries under contention: {retries}")


@pytest.mark.parametrize("engine", ["sqlite"], indirect=True)
def test_processes_posting_to_one_account_apply_each_id_once(
    ledger: Ledger, store: ItemStore
) -> None:
    open_accounts(ledger, "hot")
    processes, own, shared = 3, 40, 20
    shared_ids = [f"shared-{i}" for i in range(shared)]
    jobs = [
        (store.describe(), PROGRAM, "hot", [f"p{p}-{i}" for i in range(own)] + shared_ids, p)
        for p in range(processes)
    ]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(processes) as pool:
        per_process = pool.starmap(credit_hot_account, jobs)

    results = [r for rs in per_process for r in rs]
    applied = Counter(txn_id for txn_id, replay in results if not replay)
    assert all(n == 1 for n in applied.values())
    assert len(applied) == processes * own + shared
    replays = [txn_id for txn_id, replay in results if replay]
    assert sorted(replays) == sorted(shared_ids * (processes - 1))
    assert balance(ledger, "hot", "points") == len(applied)
    report = ledger.check.program(PROGRAM)
    assert report.ok, report.violations
    assert report.entries == len(applied)
