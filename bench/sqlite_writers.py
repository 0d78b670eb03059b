"""SQLite throughput with 1, 2 and 4 writer processes on one file, at both durabilities.

Random transfers between ``accounts`` accounts, every process writing to the
same file for the same number of seconds. Three implementations, each at
``synchronous=full`` (the default: fsync at every commit) and ``normal``:

* tallybook: ``ledger.transactions.transfer`` through the Python API;
* raw SQL (the floor): the same rows and indexes written by hand. One
  transfer is recorded through the product, then replayed per posting with
  plain SQL in the engine's own schema: read the rows the transfer updates,
  insert the rows it puts (keys made unique), update the rows it updates,
  in one ``BEGIN IMMEDIATE`` transaction, bodies pre-encoded;
* bare loop: per posting, read an account's latest balance and insert one
  row (``entries`` table), in one ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import Json, Sizes, median_round
from bench.sqlite_api import bare_post, create_entries
from tallybook.ledger import Ledger
from tallybook.store.metered import MeteredStore
from tallybook.store.port import Action, Put, Update
from tallybook.store.sqlite import _SCHEMA, SqliteStore, _row

PROGRAM = "bench"
SETTINGS = ("full", "normal")
WRITERS = (1, 2, 4)
SRC, DST, TXN = "acctsrcx", "acctdstx", "tmpltxn0001"
Row = tuple[Any, ...]


def _account(n: int) -> str:
    return f"acct{n:05d}"


# --- tallybook -------------------------------------------------------------


class _Recorder(MeteredStore):
    """Keeps the actions of every transaction it passes on."""

    recorded: list[list[Action]]

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        self.recorded = [*getattr(self, "recorded", []), list(actions)]
        super().transact_write(actions, token=token)


def seed_product(path: Path, accounts: int) -> tuple[list[Row], list[Row]]:
    """Open and fund ``accounts`` accounts; return one transfer's put and update rows."""
    store = _Recorder(SqliteStore(path, synchronous="normal"))
    with Ledger(store) as ledger:
        ledger.programs.create(PROGRAM)
        for name in [SRC, DST, *map(_account, range(accounts))]:
            ledger.accounts.open(PROGRAM, name)
            ledger.transactions.credit(PROGRAM, name, "points", 10**9, txn_id=f"seed-{name}")
        ledger.transactions.transfer(PROGRAM, SRC, DST, "points", 1, txn_id=TXN)
        actions = store.recorded[-1]
        puts = [_row(a.item) for a in actions if isinstance(a, Put)]
        keys = [a.key for a in actions if isinstance(a, Update)]
        updates = [_row(item) for item in map(store.get, keys) if item is not None]
    return puts, updates


def _product_worker(path: str, setting: str, accounts: int) -> Callable[[int], None]:
    ledger = Ledger(SqliteStore(path, synchronous=setting))
    rng, run = random.Random(), uuid.uuid4().hex[:8]

    def op(i: int) -> None:
        src, dst = rng.sample(range(accounts), 2)
        ledger.transactions.transfer(
            PROGRAM, _account(src), _account(dst), "points", 1, txn_id=f"{run}-{i}"
        )

    return op


# --- raw SQL: the same rows ---------------------------------------------------


def _subst(row: Row, pairs: Sequence[tuple[str, str]], suffix: str = "") -> Row:
    out = []
    for i, v in enumerate(row):
        if isinstance(v, str):
            for old, new in pairs:
                v = v.replace(old, new)
            if i == 1:
                v += suffix
        out.append(v)
    return tuple(out)


def seed_raw(path: Path, template: tuple[list[Row], list[Row]], accounts: int) -> None:
    _, updates = template
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(_SCHEMA)
    conn.execute("BEGIN")
    for n in range(accounts):
        for row in updates:
            conn.execute(
                "INSERT OR IGNORE INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                _subst(row, [(SRC, _account(n)), (DST, _account(n))]),
            )
    conn.execute("COMMIT")
    conn.close()


def _raw_worker(
    path: str, setting: str, accounts: int, template: tuple[list[Row], list[Row]]
) -> Callable[[int], None]:
    puts, updates = template
    conn = sqlite3.connect(path, isolation_level=None, timeout=60)
    conn.execute(f"PRAGMA synchronous = {setting.upper()}")
    rng, run = random.Random(), uuid.uuid4().hex[:8]

    def op(i: int) -> None:
        src, dst = rng.sample(range(accounts), 2)
        pairs = [(SRC, _account(src)), (DST, _account(dst)), (TXN, f"{run}-{i}")]
        conn.execute("BEGIN IMMEDIATE")
        for row in updates:
            key = _subst(row, pairs)[:2]
            conn.execute("SELECT body FROM items WHERE pk = ? AND sk = ?", key).fetchone()
        for row in puts:
            conn.execute(
                "INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                _subst(row, pairs, f"#{run}-{i}"),
            )
        for row in updates:
            pk, sk, g1p, g1s, g2p, g2s, ttl, body = _subst(row, pairs)
            conn.execute(
                "UPDATE items SET gsi1pk = ?, gsi1sk = ?, gsi2pk = ?, gsi2sk = ?, ttl = ?,"
                " body = ? WHERE pk = ? AND sk = ?",
                (g1p, g1s, g2p, g2s, ttl, body, pk, sk),
            )
        conn.execute("COMMIT")

    return op


# --- bare loop ------------------------------------------------------------------


def seed_bare(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    create_entries(conn)
    conn.close()


def _bare_worker(path: str, setting: str, accounts: int) -> Callable[[int], None]:
    conn = sqlite3.connect(path, isolation_level=None, timeout=60)
    conn.execute(f"PRAGMA synchronous = {setting.upper()}")
    rng, run = random.Random(), uuid.uuid4().hex[:8]

    def op(i: int) -> None:
        bare_post(conn, _account(rng.randrange(accounts)), f"{run}-{i}")

    return op


# --- processes ---------------------------------------------------------------------


def _worker(kind: str, args: tuple[Any, ...], seconds: float, barrier: Any, out: Any) -> None:
    makers: dict[str, Callable[..., Callable[[int], None]]] = {
        "tallybook": _product_worker,
        "raw_sql": _raw_worker,
        "bare": _bare_worker,
    }
    make = makers[kind]
    op = make(*args)
    op(-1)  # warm: connections open, statements prepared
    barrier.wait()
    count, errors = 0, 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            op(count)
            count += 1
        except Exception:
            errors += 1
    out.put((count, errors, time.perf_counter() - start))


def measure(kind: str, args: tuple[Any, ...], writers: int, seconds: float) -> Json:
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(kind, args, seconds, barrier, out))
        for _ in range(writers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds * 20 + 120) for _ in procs]
    for p in procs:
        p.join()
    count = sum(r[0] for r in results)
    elapsed = max(r[2] for r in results)
    return {
        "writers": writers,
        "postings": count,
        "errors": sum(r[1] for r in results),
        "seconds": round(elapsed, 2),
        "per_second": round(count / elapsed, 1),
    }


def run(sizes: Sizes) -> Json:
    """Every (setting, writers) cell runs the three implementations in turn, ``sizes.rounds``
    times; each cell keeps its median round (load on a shared machine drifts)."""
    accounts = 20 if sizes.quick else 1000
    seconds = 0.3 if sizes.quick else 2.0
    out: Json = {
        "accounts": accounts,
        "seconds_per_run": seconds,
        "rounds": sizes.rounds,
        "settings": {},
    }
    with tempfile.TemporaryDirectory(prefix="tb-bench-writers-") as tmp:
        base = Path(tmp)
        template = seed_product(base / "product.db", accounts)
        seed_raw(base / "raw.db", template, accounts)
        seed_bare(base / "bare.db")
        for setting in SETTINGS:
            impls: dict[str, tuple[Any, ...]] = {
                "tallybook": (str(base / "product.db"), setting, accounts),
                "raw_sql": (str(base / "raw.db"), setting, accounts, template),
                "bare": (str(base / "bare.db"), setting, accounts),
            }
            cells: dict[str, dict[str, Json]] = {kind: {} for kind in impls}
            for w in WRITERS:
                rounds: dict[str, list[Json]] = {kind: [] for kind in impls}
                for _ in range(sizes.rounds):
                    for kind, args in impls.items():
                        rounds[kind].append(measure(kind, args, w, seconds))
                for kind in impls:
                    cells[kind][str(w)] = median_round(rounds[kind])
            out["settings"][setting] = cells
    out["rows_per_transfer"] = {"put": len(template[0]), "update": len(template[1])}
    return out
