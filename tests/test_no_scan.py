"""Never a table scan: not in the port, not in the source, not at run time.

At run time the SQLite engine's statements are traced and every read must name
a partition key (``pk = ?`` or an index's ``gsi*pk = ?``); on DynamoDB a hook
makes any Scan call fail. Both cover a full round of the project's bulk paths:
billing ingestion, reports (both kinds), rerun, record listing and ``check``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tallybook.domain.model import ISSUANCE, Leg
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.report_sinks import DirectorySink
from tallybook.store.port import ItemStore

SRC = Path(__file__).resolve().parents[1] / "src" / "tallybook"
_SCAN_CALL = re.compile(r"\.scan\(|[\"']scan[\"']", re.IGNORECASE)
_KEYED = re.compile(r"\b(pk|gsi1pk|gsi2pk)\s*=\s*(\?|')")


def test_the_port_has_no_scan() -> None:
    assert not [name for name in dir(ItemStore) if "scan" in name.lower()]


def test_no_scan_in_the_source() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{n}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if _SCAN_CALL.search(line)
    ]
    assert offenders == []


def _exercise(ledger: Ledger, clock: ManualClock, out: Path) -> None:
    t0 = clock.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    clock.set(t0)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    ledger.accounts.open("shop", "alice")
    clock.advance(timedelta(minutes=3))
    ledger.transactions.post(
        "shop",
        [Leg("alice", "points", 10), Leg(ISSUANCE, "points", -10)],
        txn_id="t1",
        type="earn",
        metadata={"partner": "acme"},
    )
    rows = [
        (
            i,
            {
                "id": f"r{i}",
                "partner": "acme",
                "order_id": f"o{i}",
                "amount": 100 + i,
                "currency": "USD",
                "rate": "0.1",
                "time": (t0 + timedelta(minutes=i)).isoformat(),
            },
        )
        for i in range(3)
    ]
    ledger.billing.ingest_many("shop", rows)
    clock.advance(timedelta(minutes=20))
    results = ledger.billing.reports.run("shop", sink=DirectorySink(out))
    assert results
    ledger.billing.reports.rerun(
        "shop", results[0].window, kind=results[0].kind, sink=DirectorySink(out / "again")
    )
    ledger.billing.reports.list("shop")
    ledger.billing.records("shop", t0, t0 + timedelta(hours=1))
    assert ledger.check.program("shop").ok


def test_no_scan_at_run_time(
    ledger: Ledger, store: ItemStore, engine: str, clock: ManualClock, tmp_path: Path
) -> None:
    if engine == "sqlite":
        statements: list[str] = []
        store._conn().set_trace_callback(statements.append)  # type: ignore[attr-defined]
        _exercise(ledger, clock, tmp_path)
        reads = [s for s in statements if re.search(r"\bFROM\s+items\b", s, re.IGNORECASE)]
        assert reads
        assert [s for s in reads if not _KEYED.search(s)] == []
        return

    scans: list[str] = []

    def refuse(**kwargs: Any) -> None:
        scans.append(str(kwargs.get("params")))
        raise AssertionError("a Scan was sent to DynamoDB")

    client = store.client  # type: ignore[attr-defined]
    client.meta.events.register("before-call.dynamodb.Scan", refuse)
    try:
        _exercise(ledger, clock, tmp_path)
    finally:
        client.meta.events.unregister("before-call.dynamodb.Scan", refuse)
    assert scans == []


@pytest.mark.parametrize("line", ["client.scan(TableName='t')", "op = 'Scan'"])
def test_the_source_check_catches_scans(line: str) -> None:
    assert _SCAN_CALL.search(line)
    assert not _SCAN_CALL.search("ScanIndexForward=forward")
