"""A report reads only its window's buckets: storage requests are counted."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tallybook.domain.billing import bucket_start, draft_from_mapping, epoch, from_epoch, iso
from tallybook.ledger import Ledger
from tallybook.services.billing.service import QUERY_PAGE
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.port import Item, ItemStore, Put
from tallybook.store.records.billing import bucket_label, record_actions

from .helpers import MIN, aligned_start, record


def test_report_queries_only_the_needed_buckets(
    ledger: Ledger,
    store: ItemStore,
    engine: str,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SQLite: 100,000 records; DynamoDB Local is slow, so a lean 240 there
    total = 100_000 if engine == "sqlite" else 240
    if engine == "sqlite":
        # seeding speed only: skip fsync per transaction (the reads under test are unchanged)
        store._conn().execute("PRAGMA synchronous = OFF")  # type: ignore[attr-defined]
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=5, start=t0)
    clock.set(t0 + 4 * 60 * MIN)  # records over 4 hours: 16 buckets
    seed_bucketed_rows(ledger, store, t0, total, 4 * 3600)

    out = tmp_path / "out"
    clock.set(t0 + 2 * 60 * MIN + 5 * MIN)  # the first 2 hours are due
    first = ledger.billing.reports.run(
        "shop", sink=DirectorySink(out), interval="1h", kinds=["billing"]
    )
    assert len(first) == 2

    queried: list[str] = []
    real_query = store.query

    def spy(partition: str, *args: Any, **kwargs: Any) -> Any:
        queried.append(partition)
        return real_query(partition, *args, **kwargs)

    monkeypatch.setattr(store, "query", spy)
    store.metrics.reset()
    clock.set(t0 + 4 * 60 * MIN + 5 * MIN)
    second = ledger.billing.reports.run(
        "shop", sink=DirectorySink(out), interval="1h", kinds=["billing"]
    )
    per_bucket = total // 16
    assert [r.rows for r in second] == [per_bucket * 4, per_bucket * 4]
    needed = {
        keys.billing_bucket("shop", (t0 + (120 + 15 * b) * MIN).strftime("%Y-%m-%dT%H:%M:%SZ"))
        for b in range(8)
    }
    assert set(queried) == needed
    pages = math.ceil(per_bucket / QUERY_PAGE) if per_bucket % QUERY_PAGE else None
    assert pages is not None  # the count below assumes no exactly-full last page
    assert store.metrics.stat("query").requests == 8 * pages
    # besides the queries: per window one close and one advance, and a few state reads
    # (a single write is a PutItem/UpdateItem on DynamoDB, a transaction on SQLite)
    writes = ("transact_write", "put", "update", "delete")
    assert sum(store.metrics.stat(op).requests for op in writes) == 2 * 2
    assert store.metrics.stat("get").requests <= 8
    assert set(store.metrics.by_operation) <= {"get", "query", *writes}


def seed_bucketed_rows(
    ledger: Ledger, store: ItemStore, t0: datetime, total: int, seconds: int
) -> None:
    """``total`` records spread evenly over ``seconds`` from ``t0``, written as the
    ingestion path writes their bucket rows (the same row builder, copied per
    record) with batch writes: about 7x faster than ``ingest_many``, whose
    idempotency rows and checks the reports never read (tests/billing/test_ingest.py
    covers ingestion)."""
    size = ledger.billing.bucket_seconds("shop")
    now = ledger.clock.now()
    draft = draft_from_mapping(record("r0", t0))
    start = epoch(t0)
    actions, _ = record_actions("shop", draft, start, False, now, size)
    row = actions[1]
    assert isinstance(row, Put)
    template = row.item
    rows: list[Item] = []
    for i in range(total):
        at = t0 + timedelta(seconds=i * seconds / total)
        bucket = bucket_start(start + i * seconds // total, size)
        stamp = iso(at)
        rows.append(
            {
                **template,
                "pk": keys.billing_bucket("shop", bucket_label(bucket)),
                "sk": f"{stamp}#{i:012x}",
                "record_id": f"r{i:06d}",
                "order_id": f"o-r{i:06d}",
                "time": stamp,
                "bucket": iso(from_epoch(bucket)),
            }
        )
        if len(rows) == 5000:
            store.batch_write(rows)
            rows.clear()
    store.batch_write(rows)
