"""The scheduled-job Lambda handler, fed the events EventBridge sends, on both engines."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from billing.helpers import aligned_start, billing_docs, ingest, record
from tallybook import lambda_handler
from tallybook.errors import ValidationError
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash
from tallybook.services.clock import ManualClock
from tallybook.services.wallet.debit import CHARGE_GRACE
from tallybook.store import keys
from tallybook.store.port import SortCondition
from tallybook.store.records.billing import bucket_label
from tallybook.store.records.wallet import hold_key
from wallet.processors import DiesAfterCharging, RefundFails

RULES: dict[str, Any] = {
    "tiers": [{"name": "base", "threshold": 0}, {"name": "silver", "threshold": 100}],
    "expiry": {"days": 10, "warn_days": 3},
    "downgrade": {"rule": "immediate"},
    "qualification": {"basis": "balance"},
}


def schedule_event(detail: dict[str, str] | None = None) -> dict[str, Any]:
    """What an EventBridge schedule rule without constant input delivers."""
    return {
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": "2026-11-23T12:00:00Z",
        "region": "eu-west-1",
        "resources": ["arn:aws:events:eu-west-1:123456789012:rule/tallybook-prod-expire"],
        "detail": detail or {},
    }


def failed_run(job: str, caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    """Run ``job`` in the one program, shop, which must fail it; what it logged of it."""
    with (
        caplog.at_level(logging.INFO, logger="tallybook.jobs"),
        pytest.raises(lambda_handler.JobFailed, match="failed in shop"),
    ):
        lambda_handler.scheduled({"job": job}, None)
    (run,) = json.loads(caplog.records[-1].getMessage())["programs"]
    assert run["status"] == "failed"
    return cast(dict[str, Any], run)


@pytest.fixture
def handler_ledger(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """The handler's warm-container ledger is the test's (same store, manual clock)."""
    monkeypatch.setattr(lambda_handler, "_ledger", ledger)
    monkeypatch.delenv("TALLYBOOK_PROGRAM", raising=False)
    return ledger


def test_expire_holds_runs_for_every_program_from_the_function_environment(
    handler_ledger: Ledger, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = handler_ledger
    ledger.programs.create("club")
    for program in ("shop", "club"):
        ledger.accounts.open(program, "alice")
        ledger.transactions.credit(program, "alice", "cash", 500, txn_id=f"top-{program}")
        ledger.wallet.authorize(program, "alice", 200, hold_id=f"h-{program}", expires_in=60)
    clock.advance(timedelta(minutes=5))
    monkeypatch.setenv("TALLYBOOK_JOB", "expire-holds")

    report = lambda_handler.handler(schedule_event(), None)

    assert report["job"] == "expire-holds"
    assert report["ok"] is True
    by_program = {p["program"]: p for p in report["programs"]}
    assert set(by_program) == {"shop", "club"}
    assert by_program["shop"]["status"] == "ran"
    assert by_program["shop"]["result"] == ["expired hold h-shop of alice"]
    assert by_program["club"]["result"] == ["expired hold h-club of alice"]
    cash = next(b for b in ledger.accounts.balances("shop", "alice") if b.fund == "cash")
    assert (cash.balance, cash.held, cash.available) == (500, 0, 500)

    again = lambda_handler.scheduled(schedule_event(), None)
    assert [p["result"] for p in again["programs"]] == [[], []]


def test_expire_in_the_named_program_skips_programs_without_loyalty(
    handler_ledger: Ledger, clock: ManualClock
) -> None:
    ledger = handler_ledger
    ledger.programs.create("club")
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "alice")
    ledger.loyalty.earn("shop", "alice", "o1", 15000)
    clock.advance(timedelta(days=11))

    everyone = lambda_handler.scheduled(schedule_event({"job": "expire"}), None)
    by_program = {p["program"]: p for p in everyone["programs"]}
    assert by_program["club"]["status"] == "skipped"
    assert by_program["club"]["error"] == "no loyalty configuration"
    assert by_program["shop"]["status"] == "ran"
    assert by_program["shop"]["result"]["points"] == 150
    assert ledger.accounts.balances("shop", "alice")[0].balance == 0

    named = lambda_handler.scheduled({"job": "expire", "program": "shop"}, None)
    assert [p["program"] for p in named["programs"]] == ["shop"]
    assert named["programs"][0]["result"]["points"] == 0


def test_review_tiers_and_reconcile_from_the_event_detail(
    handler_ledger: Ledger, clock: ManualClock
) -> None:
    ledger = handler_ledger
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "alice")
    ledger.loyalty.earn("shop", "alice", "o1", 15000)

    review = lambda_handler.scheduled(schedule_event({"job": "review-tiers"}), None)
    assert review["programs"][0]["result"] == {"members": 1, "downgraded": 0}
    reconcile = lambda_handler.scheduled(schedule_event({"job": "reconcile"}), None)
    assert reconcile["programs"] == [
        {"program": "shop", "status": "ran", "result": [], "error": None}
    ]


def test_reports_job_writes_due_windows_where_the_environment_says(
    handler_ledger: Ledger,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = handler_ledger
    t0 = aligned_start(clock)
    ingest(ledger, "r1", t0 + timedelta(minutes=5), amount=2000)
    clock.advance(timedelta(hours=3))
    out = tmp_path / "reports"
    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(out))
    monkeypatch.setenv("TALLYBOOK_REPORT_INTERVAL", "1h")

    report = lambda_handler.scheduled(schedule_event({"job": "reports"}), None)

    windows = report["programs"][0]["result"]
    billing = [w for w in windows if w["kind"] == "billing"]
    assert sum(w["rows"] for w in billing) == 1
    assert all(f.startswith(str(out)) for w in windows for f in w["files"])
    docs = billing_docs(out)
    assert [i["record_id"] for d in docs.values() for i in d["line_items"]] == ["r1"]
    again = lambda_handler.scheduled(schedule_event({"job": "reports"}), None)
    assert again["programs"][0]["result"] == []


def test_a_failing_program_fails_the_invocation_after_the_others_ran(
    handler_ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.INFO, logger="tallybook.jobs"),
        pytest.raises(lambda_handler.JobFailed, match="failed in nowhere"),
    ):
        lambda_handler.scheduled({"job": "reconcile", "program": "nowhere"}, None)
    logged = json.loads(caplog.records[-1].getMessage())
    assert logged["ok"] is False
    assert logged["programs"][0]["status"] == "failed"
    assert logged["programs"][0]["error"].startswith("NotFound")


def test_a_job_must_be_named_and_known(handler_ledger: Ledger, monkeypatch) -> None:
    monkeypatch.delenv("TALLYBOOK_JOB", raising=False)
    with pytest.raises(lambda_handler.JobFailed, match="no job named"):
        lambda_handler.scheduled(schedule_event(), None)
    with pytest.raises(ValidationError, match="unknown job 'vacuum'"):
        lambda_handler.scheduled(schedule_event({"job": "vacuum"}), None)
    for event in ([], "reconcile", None):
        with pytest.raises(ValidationError, match="a scheduled event is a JSON object"):
            lambda_handler.scheduled(event, None)  # type: ignore[arg-type]


def test_cold_start_opens_the_store_from_the_environment(
    ledger: Ledger, store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lambda_handler, "_ledger", None)
    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    monkeypatch.setenv("TALLYBOOK_JOB", "reconcile")
    monkeypatch.setenv("TALLYBOOK_PROGRAM", "shop")
    try:
        report = lambda_handler.scheduled(schedule_event(), None)
        assert report == {
            "job": "reconcile",
            "ok": True,
            "programs": [{"program": "shop", "status": "ran", "result": [], "error": None}],
        }
    finally:
        if lambda_handler._ledger is not None:
            lambda_handler._ledger.close()
        lambda_handler._ledger = None


def test_a_reconcile_whose_refund_failed_fails_the_invocation(
    handler_ledger: Ledger, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # was: the refund's RuntimeError ended the invocation raw, before the other
    # programs ran (and, once reconcile went on past it, the run reported "ran")
    ledger = handler_ledger
    ledger.accounts.open("shop", "alice")
    ledger.wallet.processor = DiesAfterCharging()
    with pytest.raises(Crash):
        ledger.wallet.debit("shop", "alice", 150, txn_id="d1", on_shortfall="charge")
    ledger.wallet.processor = RefundFails()
    clock.advance(CHARGE_GRACE + timedelta(minutes=1))
    run = failed_run("reconcile", caplog)
    assert run["error"] == "1 refund(s) failed: the next run tries again"
    assert run["result"][0].startswith("could not refund charge d1 of alice (150): RuntimeError")


def test_an_expire_holds_that_skipped_a_malformed_hold_fails_the_invocation(
    handler_ledger: Ledger, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # was: the hold's KeyError ended the invocation raw, the other holds not expired
    ledger = handler_ledger
    ledger.accounts.open("shop", "alice")
    ledger.transactions.credit("shop", "alice", "cash", 500, txn_id="top")
    for hold_id in ("h1", "h2"):
        ledger.wallet.authorize("shop", "alice", 100, hold_id=hold_id, expires_in=60)
    hold = dict(ledger.store.get(hold_key("shop", "alice", "h1")) or {})
    hold["status"] = 7
    ledger.store.put(hold)
    clock.advance(timedelta(minutes=5))
    run = failed_run("expire-holds", caplog)
    assert run["error"] == "2 row(s) skipped, malformed or beside one: see wallet check"
    assert "skipped malformed hold H#h1 (ACCT#shop#alice): status is not text" in run["result"]


def test_an_expire_that_skipped_a_member_fails_the_invocation(
    handler_ledger: Ledger, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    # was: the lot's KeyError ended the invocation raw, the other members' points kept
    ledger = handler_ledger
    ledger.loyalty.configure("shop", RULES)
    for account in ("alice", "bob"):
        ledger.accounts.open("shop", account)
        ledger.loyalty.earn("shop", account, f"o-{account}", 15000)
    (entry,) = ledger.store.query_all(
        keys.account_partition("shop", "alice"),
        SortCondition.begins_with(keys.entry_prefix("points")),
    )
    lot = dict(entry)
    del lot["lot_amount"]
    ledger.store.put(lot)
    clock.advance(timedelta(days=11))
    run = failed_run("expire", caplog)
    assert run["error"] == "1 member(s) skipped: see tallybook check"
    assert run["result"]["points"] == 150  # bob's
    assert run["result"]["skipped"] == [
        f"alice: loyalty lot {lot['sk']} of alice ({lot['pk']}) is damaged: lot: no lot_amount"
    ]


def test_a_reports_run_meeting_a_damaged_record_fails_its_program_only(
    handler_ledger: Ledger,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # was: the record's KeyError ended the invocation raw, the other programs unreported
    ledger = handler_ledger
    ledger.programs.create("club")
    t0 = aligned_start(clock)
    at = t0 + timedelta(minutes=5)
    ingest(ledger, "r1", at)
    club_record = record("c1", at)
    ledger.billing.ingest("club", club_record.pop("id"), **{**club_record, "time": at})
    bucket = keys.billing_bucket("shop", bucket_label(int(t0.timestamp())))
    (damaged,) = (dict(i) for i in ledger.store.query_all(bucket))
    del damaged["amount"]
    ledger.store.put(damaged)
    clock.advance(timedelta(hours=3))
    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(tmp_path))
    monkeypatch.setenv("TALLYBOOK_REPORT_INTERVAL", "1h")
    with (
        caplog.at_level(logging.INFO, logger="tallybook.jobs"),
        pytest.raises(lambda_handler.JobFailed, match="failed in shop: "),
    ):
        lambda_handler.scheduled({"job": "reports"}, None)
    runs = json.loads(caplog.records[-1].getMessage())["programs"]
    shop, club = (next(r for r in runs if r["program"] == p) for p in ("shop", "club"))
    assert shop["error"] == (
        f"DamagedItem: billing record r1 of program shop ({damaged['pk']} / {damaged['sk']}) "
        "is damaged: no amount"
    )
    assert club["status"] == "ran"
    assert [
        i["record_id"] for d in billing_docs(tmp_path, "club").values() for i in d["line_items"]
    ] == ["c1"]
    assert billing_docs(tmp_path, "shop") == {}
