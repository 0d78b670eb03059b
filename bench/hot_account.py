"""A hot account: 16 concurrent writers on one account against one writer.

Each run posts the same number of credits to one account, from one thread or
from 16; the rate is postings per second over the wall clock. Retries are the
posting engine's (``ledger.engine.retries``): re-planned transactions after a
version conflict.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from bench import dynamo_product
from bench.common import Json, Sizes, median_round, percentile, ratio
from tallybook.ledger import Ledger
from tallybook.store.sqlite import SqliteStore

PROGRAM = "bench"
WRITERS = 16


def _run(ledger: Ledger, account: str, total: int, threads: int) -> Json:
    ledger.accounts.open(PROGRAM, account)
    ledger.transactions.credit(PROGRAM, account, "points", 1, txn_id=f"{account}-warm")
    per_thread = total // threads
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []
    retries0 = ledger.engine.retries
    barrier = threading.Barrier(threads + 1)

    def writer(t: int) -> None:
        ledger.accounts.balances(PROGRAM, account)  # opens this thread's connection
        barrier.wait()
        for i in range(per_thread):
            t0 = time.perf_counter()
            try:
                ledger.transactions.credit(
                    PROGRAM, account, "points", 1, txn_id=f"{account}-{t}-{i}"
                )
            except Exception as exc:  # counted and reported, never hidden
                errors.append(type(exc).__name__)
            latencies[t].append(time.perf_counter() - t0)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    flat = [x for lat in latencies for x in lat]
    balance = ledger.accounts.balances(PROGRAM, account)[0].balance
    return {
        "writers": threads,
        "postings": len(flat),
        "per_second": round(len(flat) / elapsed, 1),
        "p50_ms": round(percentile(flat, 0.5) * 1000, 3),
        "p99_ms": round(percentile(flat, 0.99) * 1000, 3),
        "retries": ledger.engine.retries - retries0,
        "errors": len(errors),
        "balance_ok": balance == 1 + len(flat) - len(errors),
    }


def _compare(ledger: Ledger, total: int, rounds: int) -> Json:
    """One writer and 16 alternate for ``rounds`` rounds; the median round of each is kept."""
    ones, manys = [], []
    for r in range(rounds):
        ones.append(_run(ledger, f"hot-1-{r}", total, 1))
        manys.append(_run(ledger, f"hot-16-{r}", total, WRITERS))
    one, many = median_round(ones), median_round(manys)
    one["retries_all_rounds"] = sum(r["retries"] for r in ones)
    many["retries_all_rounds"] = sum(r["retries"] for r in manys)
    return {
        "one_writer": one,
        "writers_16": many,
        "ratio": ratio(many["per_second"], one["per_second"]),
    }


def run_sqlite(sizes: Sizes) -> Json:
    with tempfile.TemporaryDirectory(prefix="tb-bench-hot-") as tmp:
        ledger = Ledger(SqliteStore(Path(tmp) / "hot.db"))
        ledger.programs.create(PROGRAM)
        try:
            return _compare(ledger, sizes.hot_sqlite, sizes.rounds)
        finally:
            ledger.close()


def run_dynamodb(endpoint: str, sizes: Sizes) -> Json:
    ledger = dynamo_product.open_ledger(endpoint)
    try:
        return _compare(ledger, sizes.hot_ddb, sizes.rounds)
    finally:
        dynamo_product.drop(ledger)
