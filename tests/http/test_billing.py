"""Billing over HTTP: ingest (idempotent by record id), list, run reports, download."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from billing.helpers import aligned_start
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock

Headers = dict[str, str]


def _body(rid: str, at: str, amount: int = 1005) -> dict[str, object]:
    return {
        "id": rid,
        "partner": "acme",
        "order_id": f"o-{rid}",
        "amount": amount,
        "currency": "USD",
        "rate": "0.05",
        "time": at,
    }


def _billing_from_the_next_hour(ledger: Ledger, clock: ManualClock) -> datetime:
    """Shop's billing starts at the top of the next hour (5 minutes' grace); the clock
    is 2 minutes past it. Returns that hour."""
    t0 = aligned_start(clock)
    clock.set(t0 + timedelta(minutes=2))
    ledger.billing.configure("shop", grace_minutes=5, start=t0)
    return t0


def test_billing_records_and_reports_over_http(
    app_client: TestClient,
    ledger: Ledger,
    clock: ManualClock,
    write_headers: Headers,
    admin_headers: Headers,
    read_headers: Headers,
    idem: Callable[..., Headers],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t0 = _billing_from_the_next_hour(ledger, clock)
    at = (t0 + timedelta(minutes=1)).isoformat()
    with_key = idem(write_headers)
    r = app_client.post("/v1/billing/records", json=_body("r1", at), headers=with_key)
    assert r.status_code == 201, r.text
    assert r.json()["commission"] == 50
    for headers in (write_headers, with_key):  # a replay is 200, with or without the header
        r = app_client.post("/v1/billing/records", json=_body("r1", at), headers=headers)
        assert r.status_code == 200
        assert r.headers["Idempotent-Replayed"] == "true"
    r = app_client.post("/v1/billing/records", json=_body("r1", at, 7), headers=write_headers)
    assert r.status_code == 409
    assert r.headers["content-type"].startswith("application/problem+json")
    bad = {**_body("r2", at), "rate": 0.05}
    assert (
        app_client.post("/v1/billing/records", json=bad, headers=write_headers).status_code == 422
    )
    assert (
        app_client.post(
            "/v1/billing/records", json=_body("r3", at), headers=read_headers
        ).status_code
        == 403
    )

    r = app_client.get(
        "/v1/billing/records",
        params={"since": t0.isoformat(), "until": (t0 + timedelta(hours=1)).isoformat()},
        headers=read_headers,
    )
    assert r.status_code == 200
    assert [x["id"] for x in r.json()["records"]] == ["r1"]
    assert app_client.get("/v1/billing/records/r1", headers=read_headers).json()["amount"] == 1005

    clock.set(t0 + timedelta(minutes=21))
    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(tmp_path))
    assert app_client.post("/v1/reports/run", headers=write_headers).status_code == 403
    r = app_client.post(
        "/v1/reports/run", json={"interval": "15m", "kinds": ["billing"]}, headers=admin_headers
    )
    assert r.status_code == 200, r.text
    reports = r.json()["reports"]
    assert [x["rows"] for x in reports] == [1]
    window = reports[0]["window"]
    listed = app_client.get("/v1/reports", headers=read_headers).json()["reports"]
    assert [x["window"] for x in listed] == [window]
    r = app_client.get(f"/v1/reports/{window}/billing_totals.csv", headers=read_headers)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    written = tmp_path / "shop" / "billing" / window / "billing_totals.csv"
    assert r.content == written.read_bytes()
    r = app_client.get(f"/v1/reports/{window}/billing.json", headers=read_headers)
    assert r.json()["totals"][0]["commission"] == 50
    assert app_client.get(f"/v1/reports/{window}/nope.csv", headers=read_headers).status_code == 422
    future = window.replace(window[:8], "29990101")
    assert app_client.get(
        f"/v1/reports/{future}/billing.json", headers=read_headers
    ).status_code in (409, 422)


def test_reports_go_to_the_default_folder_without_the_setting(
    app_client: TestClient,
    ledger: Ledger,
    clock: ManualClock,
    admin_headers: Headers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 17: POST /v1/reports/run answered 400 unless $TALLYBOOK_REPORTS_OUT was set;
    it now writes to ./reports (relative to the server's working directory)."""
    t0 = _billing_from_the_next_hour(ledger, clock)
    ledger.billing.ingest_many("shop", [(1, _body("r1", (t0 + timedelta(minutes=1)).isoformat()))])
    clock.set(t0 + timedelta(minutes=21))
    monkeypatch.delenv("TALLYBOOK_REPORTS_OUT", raising=False)
    monkeypatch.chdir(tmp_path)
    r = app_client.post("/v1/reports/run", json={"kinds": ["billing"]}, headers=admin_headers)
    assert r.status_code == 200, r.text
    window = r.json()["reports"][0]["window"]
    assert (tmp_path / "reports" / "shop" / "billing" / window / "billing_totals.csv").is_file()


def test_report_runs_default_to_the_deployment_s_report_interval(
    app_client: TestClient,
    ledger: Ledger,
    clock: ManualClock,
    admin_headers: Headers,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/deploy.md: ReportInterval (`$TALLYBOOK_REPORT_INTERVAL`, set on every function
    of the stack) is the report window length; a run over HTTP, or `tallybook report run`,
    that names no interval wrote 15-minute windows beside the job's hourly ones."""
    t0 = _billing_from_the_next_hour(ledger, clock)
    ledger.billing.ingest_many("shop", [(1, _body("r1", (t0 + timedelta(minutes=1)).isoformat()))])
    clock.set(t0 + timedelta(minutes=70))
    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(tmp_path))
    monkeypatch.setenv("TALLYBOOK_REPORT_INTERVAL", "1h")
    r = app_client.post("/v1/reports/run", json={"kinds": ["billing"]}, headers=admin_headers)
    assert r.status_code == 200, r.text
    [report] = r.json()["reports"]
    assert (report["start"], report["end"]) == (
        f"{t0:%Y-%m-%dT%H:%M:%S}.000000Z",
        f"{t0 + timedelta(hours=1):%Y-%m-%dT%H:%M:%S}.000000Z",
    )


def test_the_cli_report_run_defaults_to_the_report_interval_setting(
    ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from tallybook.cli import app

    now = ledger.clock.now().astimezone(UTC)
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    ledger.billing.configure("shop", grace_minutes=5, start=start)
    monkeypatch.setenv("TALLYBOOK_REPORT_INTERVAL", "1h")
    args = ["report", "run", "-p", "shop", "--kind", "billing", "--json"]
    args += ["--out", str(tmp_path), "--store", ledger.store.describe()]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    windows = sorted(p.name for p in (tmp_path / "shop" / "billing").iterdir())
    assert windows[0] == f"{start:%Y%m%dT%H%M%SZ}_{start + timedelta(hours=1):%Y%m%dT%H%M%SZ}"


def test_reports_are_paged_over_http(
    app_client: TestClient,
    ledger: Ledger,
    clock: ManualClock,
    read_headers: Headers,
    tmp_path: Path,
) -> None:
    """Was: ``GET /v1/reports`` answered the newest ``limit`` reports (at most 1000)
    with no cursor, so older ones could not be listed; it now pages with ``cursor``."""
    from tallybook.services.billing.sinks import DirectorySink

    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.set(t0 + timedelta(minutes=61))
    ledger.billing.reports.run("shop", sink=DirectorySink(tmp_path), interval="15m")
    every = [(i.kind, i.window) for i in ledger.billing.reports.list("shop")]
    assert len(every) == 8
    seen: list[tuple[str, str]] = []
    params: dict[str, str | int] = {"limit": 3}
    while True:
        r = app_client.get("/v1/reports", params=params, headers=read_headers)
        assert r.status_code == 200, r.text
        seen.extend((x["kind"], x["window"]) for x in r.json()["reports"])
        if r.json()["cursor"] is None:
            break
        params["cursor"] = r.json()["cursor"]
    assert seen == every
    r = app_client.get(
        "/v1/reports", params={"kind": "rewards", "cursor": params["cursor"]}, headers=read_headers
    )
    assert r.status_code == 400
    assert r.json()["detail"] == "cursor does not belong to this query"
