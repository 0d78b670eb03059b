"""Never a table scan: not in the port, not in the source, not at run time.

At run time the SQLite engine's statements are traced and every read must name
a partition key (``pk = ?`` or an index's ``gsi*pk = ?``); on DynamoDB a hook
makes any Scan call fail. Both cover a full round of the project's bulk paths:
billing ingestion, reports (both kinds), rerun, record listing and ``check``;
then every scheduled job (loyalty expiry, tier review, hold expiry, wallet
reconcile, reports), notification ingestion, the loyalty reads and each page
and action of the admin page, on a seeded program two years later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from admin.seeding import seed
from billing.helpers import aligned_start
from tallybook.domain.model import ISSUANCE, Leg
from tallybook.http.app import create_app
from tallybook.jobs import JOBS, run_job
from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock
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
    t0 = aligned_start(clock)
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


_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


def _jobs_and_pages(ledger: Ledger, clock: ManualClock, out: Path) -> None:
    seeded = seed(ledger, clock, out / "seed")
    alice = seeded.account
    event = {"id": "e-1", "account": alice, "type": "TierChanged", "payload": {"tier": "gold"}}
    report = ledger.notifications.ingestor.ingest_lines("shop", [json.dumps(event) + "\n"])
    assert report.stats.added == 1
    ledger.wallet.grant(
        "shop", alice, 50, expires_at=clock.now() + timedelta(days=1), txn_id="grant-1"
    )
    assert ledger.loyalty.order("shop", seeded.order)
    assert ledger.loyalty.expiring("shop", alice, days=800) is not None
    env = {"TALLYBOOK_REPORTS_OUT": str(out / "jobs"), "TALLYBOOK_REPORT_INTERVAL": "1h"}
    clock.advance(timedelta(hours=2))
    assert run_job(ledger, "reports", program="shop", env=env).ok
    clock.advance(timedelta(days=2 * 366))  # points, holds and grants are all due
    for job in JOBS.keys() - {"reports"}:  # reports over two years: too many windows
        assert run_job(ledger, job, program="shop", env=env).ok, job
    assert ledger.check.program("shop").ok
    tiers = ledger.loyalty.config("shop").tiers
    assert ledger.loyalty.members("shop", tiers[0].name).accounts
    with TestClient(create_app(ledger)) as client:
        login = _CSRF.findall(client.get("/admin/login").text)[0]
        form = {"api_key": seeded.admin_secret, "csrf": login}
        assert client.post("/admin/login", data=form, follow_redirects=False).status_code == 303
        home = client.get("/admin/")
        assert home.status_code == 200
        token = _CSRF.findall(home.text)[0]
        report_links = re.findall(r'href="(/admin/reports/[^"]+)"', home.text)
        assert report_links
        pages = [
            "/admin/search?q=alice",
            f"/admin/search?q={seeded.order}",
            f"/admin/accounts/{alice}",
            f"/admin/accounts/{alice}?order=oldest&limit=5",
            f"/admin/tiers/{tiers[0].name}",
            f"/admin/accounts/{alice}/holds/{seeded.hold}/capture",
            report_links[0],
        ]
        for page in pages:
            assert client.get(page).status_code in (200, 404), page
        posts: list[tuple[str, dict[str, str]]] = [
            (f"/admin/accounts/{alice}/notifications/{seeded.notification}/dismiss", {}),
            (f"/admin/accounts/{alice}/holds/{seeded.hold}/void", {}),
            (f"/admin/accounts/{alice}/adjust", {"fund": "points", "amount": "5", "reason": "x"}),
            ("/admin/logout", {}),
        ]
        for path, data in posts:
            answer = client.post(path, data={"csrf": token, **data}, follow_redirects=False)
            assert answer.status_code < 500, path


_ROUNDS: list[Callable[[Ledger, ManualClock, Path], None]] = [_exercise, _jobs_and_pages]


@pytest.mark.slow  # the jobs walk two years of days
@pytest.mark.parametrize("round_", _ROUNDS, ids=["billing-reports-check", "jobs-ingest-admin"])
def test_no_scan_at_run_time(
    ledger: Ledger,
    store: ItemStore,
    engine: str,
    clock: ManualClock,
    tmp_path: Path,
    round_: Callable[[Ledger, ManualClock, Path], None],
) -> None:
    if engine == "sqlite":
        statements: list[str] = []
        store._conn().set_trace_callback(statements.append)  # type: ignore[attr-defined]
        round_(ledger, clock, tmp_path)
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
        round_(ledger, clock, tmp_path)
    finally:
        client.meta.events.unregister("before-call.dynamodb.Scan", refuse)
    assert scans == []


@pytest.mark.parametrize("line", ["client.scan(TableName='t')", "op = 'Scan'"])
def test_the_source_check_catches_scans(line: str) -> None:
    assert _SCAN_CALL.search(line)
    assert not _SCAN_CALL.search("ScanIndexForward=forward")
