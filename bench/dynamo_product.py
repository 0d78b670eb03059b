"""The product on DynamoDB Local: a ledger on a fresh table, and its cost per call."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import cast

from bench.common import Json
from tallybook.ledger import Ledger
from tallybook.store import keys
from tallybook.store.dynamodb import DynamoStore
from tallybook.store.port import Item, StoreMetrics, Value
from tallybook.store.records.codec import iso, to_us

PROGRAM = "bench"


def open_ledger(endpoint: str) -> Ledger:
    store = DynamoStore(f"bench-{uuid.uuid4().hex[:10]}", region="us-east-1", endpoint=endpoint)
    store.create_table()
    ledger = Ledger(store)
    ledger.programs.create(PROGRAM)
    ledger.loyalty.configure(PROGRAM, {"expiry": {"days": 365}})
    return ledger


def drop(ledger: Ledger) -> None:
    store = ledger.store
    assert isinstance(store, DynamoStore)
    store.delete_table()
    ledger.close()


def member(ledger: Ledger, account: str, cash: int = 0) -> None:
    """An open account, enrolled in the base tier by a first earn, with ``cash``."""
    ledger.accounts.open(PROGRAM, account)
    ledger.loyalty.earn(PROGRAM, account, f"enrol-{account}", 1000)
    if cash:
        ledger.wallet.credit(PROGRAM, account, "cash", cash, txn_id=f"cash-{account}")


def cost_of(metrics: StoreMetrics, reset: Callable[[], object], op: Callable[[], object]) -> Json:
    """Requests and capacity units (priced by AWS's rules) of one call, and its latency."""
    reset()
    metrics.reset()
    t0 = time.perf_counter()
    op()
    elapsed = time.perf_counter() - t0
    snap = metrics.snapshot()
    return {
        "requests": sum(s.requests for s in snap.values()),
        "rcu": sum(s.priced_read_units for s in snap.values()),
        "wcu": sum(s.priced_write_units for s in snap.values()),
        "ms": round(elapsed * 1000, 2),
        "by_operation": {k: s.requests for k, s in sorted(snap.items())},
    }


def mean_cost(samples: list[Json]) -> Json:
    """The mean of several calls' costs (they are identical when the design is flat)."""
    n = len(samples)
    return {
        "requests": round(sum(s["requests"] for s in samples) / n, 2),
        "rcu": round(sum(s["rcu"] for s in samples) / n, 2),
        "wcu": round(sum(s["wcu"] for s in samples) / n, 2),
        "ms": round(sum(s["ms"] for s in samples) / n, 2),
        "by_operation": samples[-1]["by_operation"],
        "samples": n,
    }


def build_history(ledger: Ledger, account: str, entries: int) -> None:
    """``entries`` earn-sized entries written directly, with the head to match."""
    ledger.accounts.open(PROGRAM, account)
    now = ledger.clock.now()
    base_us = to_us(now) - entries - 1
    batch: list[Item] = []
    for seq in range(1, entries + 1):
        batch.append(
            {
                **keys.entry(PROGRAM, account, "points", base_us + seq, seq).as_item(),
                "program": PROGRAM,
                "account": account,
                "fund": "points",
                "unit": "points",
                "seq": seq,
                "amount": 1,
                "balance": seq,
                "txn_id": f"seed-{seq}",
                "type": "credit",
                "created_at": iso(now),
            }
        )
        if len(batch) == 1000:
            ledger.store.batch_write(batch)
            batch = []
    if batch:
        ledger.store.batch_write(batch)
    head = cast(Item, dict(ledger.store.get(keys.account_head(PROGRAM, account)) or {}))
    funds = cast(dict[str, Value], head["funds"])
    funds["points"] = {"balance": entries, "held": 0, "seq": entries, "last_us": base_us + entries}
    head["version"] = 1
    ledger.store.put(head)
