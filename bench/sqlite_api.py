"""Postings through the Python API on SQLite, against baseline (c).

Both run at the same durability, :data:`SETTING` (WAL, ``synchronous=NORMAL``,
the setting of the 2026-11-23 reference run; :mod:`bench.sqlite_writers`
measures both settings). Baseline (c) is a bare ``sqlite3`` loop: per
posting, one ``BEGIN IMMEDIATE`` transaction that reads the account's latest
balance and inserts a row.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from bench.common import Json, Sizes, median_round, ratio, timed_loop
from tallybook.ledger import Ledger
from tallybook.store.sqlite import SqliteStore

PROGRAM = "bench"
ACCOUNTS = 10
SETTING = "normal"
#: postings/s of the Python API on 2026-11-23 (09:29 run); issue 16 asks for 2x
REFERENCE_PER_SECOND = 905.2


def open_ledger(path: Path) -> Ledger:
    ledger = Ledger(SqliteStore(path, synchronous=SETTING))
    ledger.programs.create(PROGRAM)
    for a in range(ACCOUNTS):
        ledger.accounts.open(PROGRAM, f"a{a}")
    return ledger


def product(sizes: Sizes, workdir: Path) -> Json:
    with open_ledger(workdir / "product.db") as ledger:
        credit = ledger.transactions.credit

        def post(i: int, prefix: str = "p") -> None:
            credit(PROGRAM, f"a{i % ACCOUNTS}", "points", 1, txn_id=f"{prefix}{i}")

        for i in range(min(100, sizes.sqlite_postings)):
            post(i, "warm")
        ledger.store.metrics.reset()
        cpu0 = time.process_time()
        stats = timed_loop(post, sizes.sqlite_postings, sizes.time_cap)
        cpu = time.process_time() - cpu0
        requests = ledger.store.metrics.requests
        stats["storage_requests_per_posting"] = round(requests / stats["count"], 2)
        stats["client_cpu_us_per_storage_call"] = round(cpu / requests * 1e6, 1)
        return stats


def create_entries(conn: sqlite3.Connection) -> None:
    """Baseline (c)'s one table, in WAL mode."""
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(
        "CREATE TABLE entries (account TEXT NOT NULL, seq INTEGER NOT NULL,"
        " amount INTEGER NOT NULL, balance INTEGER NOT NULL, txn_id TEXT NOT NULL,"
        " PRIMARY KEY (account, seq)) WITHOUT ROWID"
    )


def bare_post(conn: sqlite3.Connection, account: str, txn_id: str) -> None:
    """One posting of baseline (c): read the latest balance, insert a row."""
    conn.execute("BEGIN IMMEDIATE")
    row = conn.execute(
        "SELECT seq, balance FROM entries WHERE account = ? ORDER BY seq DESC LIMIT 1",
        (account,),
    ).fetchone()
    seq, balance = row if row else (0, 0)
    conn.execute(
        "INSERT INTO entries VALUES (?, ?, ?, ?, ?)",
        (account, seq + 1, 1, balance + 1, txn_id),
    )
    conn.execute("COMMIT")


def baseline(sizes: Sizes, workdir: Path) -> Json:
    conn = sqlite3.connect(workdir / "baseline.db", isolation_level=None)
    try:
        create_entries(conn)
        conn.execute(f"PRAGMA synchronous = {SETTING.upper()}")

        def post(i: int) -> None:
            bare_post(conn, f"a{i % ACCOUNTS}", f"t{i}")

        for i in range(min(100, sizes.sqlite_postings)):
            post(i + 10**9)
        return timed_loop(post, sizes.sqlite_postings, sizes.time_cap)
    finally:
        conn.close()


def run(sizes: Sizes) -> Json:
    """Baseline and product alternate for ``sizes.rounds`` rounds; the median is kept."""
    bases, prods = [], []
    for _ in range(sizes.rounds):
        with tempfile.TemporaryDirectory(prefix="tb-bench-sqlite-") as tmp:
            bases.append(baseline(sizes, Path(tmp)))
            prods.append(product(sizes, Path(tmp)))
    base, prod = median_round(bases), median_round(prods)
    return {
        "synchronous": SETTING,
        "product": prod,
        "baseline_c": base,
        "ratio": ratio(prod["per_second"], base["per_second"]),
        "p50_ratio": ratio(base["p50_ms"], prod["p50_ms"]),
    }
