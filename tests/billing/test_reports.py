"""Incremental reports (both engines): invariant 7 across runs with late records,
byte-identical reruns, crash between writing and advancing, rewards issued."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tallybook.domain.model import EXPIRY, ISSUANCE, REDEMPTION, Leg
from tallybook.errors import InvalidState, NotFound, ValidationError
from tallybook.ledger import Ledger
from tallybook.services.billing.reports import ReportService
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore
from tallybook.store.records.reports import report_put

from .helpers import MIN, aligned_start, billing_docs, ingest, record, snapshot

SECOND = MIN / 60

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def _run(ledger: Ledger, out: Path, interval: str = "15m") -> list[str]:
    results = ledger.billing.reports.run(
        "shop", sink=DirectorySink(out), interval=interval, kinds=["billing"]
    )
    return [r.window for r in results]


def _check_invariant_7(out: Path, ingested: set[str]) -> Counter[str]:
    seen: Counter[str] = Counter()
    for doc in billing_docs(out).values():
        lines = doc["line_items"]
        seen.update(item["record_id"] for item in lines)
        for total in doc["totals"]:
            mine = [i for i in lines if i["partner"] == total["partner"]]
            assert total["records"] == len(mine)
            assert total["amount"] == sum(i["amount"] for i in mine)
            assert total["commission"] == sum(i["commission"] for i in mine)
        assert doc["records"] == len(lines)
    assert set(seen) == ingested
    assert all(n == 1 for n in seen.values()), seen
    return seen


def test_invariant_7_across_runs_with_late_records(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=5, start=t0)
    clock.advance(MIN)
    ingest(ledger, "a1", t0 + MIN, partner="acme", amount=1005)
    ingest(ledger, "a2", t0 + 10 * MIN, partner="zeta", amount=333, rate="0.015")
    clock.set(t0 + 17 * MIN)
    assert not ingest(ledger, "b1", t0 + 14 * MIN).late  # late, inside the grace window
    assert _run(ledger, out) == []  # [0, 15) is due at 20
    clock.set(t0 + 21 * MIN)
    assert _run(ledger, out) == [_w(t0, 0, 15)]
    assert ingest(ledger, "c1", t0 + 5 * MIN).late  # after its window was reported
    ingest(ledger, "c2", t0 + 16 * MIN)
    clock.set(t0 + 33 * MIN)
    assert not ingest(ledger, "d1", t0 + 29 * MIN).late  # late for [15, 30), inside grace
    clock.set(t0 + 36 * MIN)
    assert _run(ledger, out) == [_w(t0, 15, 30)]
    clock.set(t0 + 50 * MIN)
    e1 = ingest(ledger, "e1", t0 + 20 * MIN)
    assert e1.late
    assert e1.bucket == t0 + 45 * MIN
    ingest(ledger, "f1", t0 + 40 * MIN)
    assert ingest(ledger, "a1", t0 + MIN, partner="acme", amount=1005).replay
    assert _run(ledger, out) == [_w(t0, 30, 45)]
    clock.set(t0 + 70 * MIN)
    assert _run(ledger, out) == [_w(t0, 45, 60)]
    seen = _check_invariant_7(out, {"a1", "a2", "b1", "c1", "c2", "d1", "e1", "f1"})
    assert sum(seen.values()) == 8
    docs = billing_docs(out)
    assert [i["record_id"] for i in docs[_w(t0, 0, 15)]["line_items"]] == ["a1", "b1", "a2"]
    assert {i["record_id"] for i in docs[_w(t0, 15, 30)]["line_items"]} == {"c1", "c2", "d1"}
    assert [i["record_id"] for i in docs[_w(t0, 45, 60)]["line_items"]] == ["e1"]
    # every run left the checkpoint at the last window's end; list shows each window once
    listed = ledger.billing.reports.list("shop", kind="billing")
    assert [i.window for i in listed] == [
        _w(t0, 45, 60),
        _w(t0, 30, 45),
        _w(t0, 15, 30),
        _w(t0, 0, 15),
    ]


@pytest.mark.parametrize("ingest_many", [False, True], ids=["one", "many"])
def test_zero_grace_a_record_in_flight_at_the_window_end_is_not_lost(
    ledger: Ledger, store: ItemStore, clock: ManualClock, tmp_path: Path, ingest_many: bool
) -> None:
    """With a grace of 0 a window is reported at its very end. A record of its
    last bucket whose write started a moment before (or on a host whose clock
    is a few seconds behind) must still land in exactly one reported window."""
    out = tmp_path / "out"
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    behind = ManualClock(t0 + 15 * MIN - 10 * SECOND)  # 10 seconds behind the reporter
    writer = Ledger(store, clock=behind)
    ingest(writer, "early", t0 + MIN)
    clock.set(t0 + 15 * MIN)
    assert _run(ledger, out) == [_w(t0, 0, 15)]
    at = t0 + 15 * MIN - 20 * SECOND
    if ingest_many:
        summary = writer.billing.ingest_many("shop", [(1, record("edge", at))])
        assert (summary.created, summary.late, summary.errors) == (1, 1, [])
    else:
        assert ingest(writer, "edge", at).late  # refiled: its window was reported
    clock.set(t0 + 30 * MIN)
    assert _run(ledger, out) == [_w(t0, 15, 30)]
    _check_invariant_7(out, {"early", "edge"})


def _w(t0: object, a: int, b: int) -> str:
    from datetime import datetime

    from tallybook.domain.billing import epoch, window_name

    assert isinstance(t0, datetime)
    return window_name(epoch(t0 + a * MIN), epoch(t0 + b * MIN))


def test_rerun_is_byte_identical(ledger: Ledger, clock: ManualClock, tmp_path: Path) -> None:
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.advance(MIN)
    for i in range(6):
        ingest(ledger, f"r{i}", t0 + i * 10 * MIN / 2, partner=f"p{i % 3}", amount=100 + i)
    clock.set(t0 + 61 * MIN)
    first = tmp_path / "first"
    assert _run(ledger, first, "30m") == [_w(t0, 0, 30), _w(t0, 30, 60)]
    ingest(ledger, "late", t0 + 2 * MIN)  # filed later: must not change the past window
    again = tmp_path / "again"
    for window in (_w(t0, 0, 30), _w(t0, 30, 60)):
        result = ledger.billing.reports.rerun(
            "shop", window, kind="billing", sink=DirectorySink(again)
        )
        assert result.sha256 == ledger.billing.reports.get("shop", "billing", window).sha256
    assert snapshot(again) == snapshot(first)
    assert ledger.billing.reports.render("shop", "billing", _w(t0, 0, 30)) == {
        p.name: p.read_bytes() for p in (first / "shop" / "billing" / _w(t0, 0, 30)).iterdir()
    }
    with pytest.raises(InvalidState):
        ledger.billing.reports.rerun(
            "shop", _w(t0, 60, 90), kind="billing", sink=DirectorySink(again)
        )
    with pytest.raises(ValidationError):
        _run(ledger, first, "10m")  # not a multiple of the 15 min bucket


def test_rerun_writes_what_this_version_renders_and_leaves_the_stored_sha256(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """A window reported by an earlier version (before a change of CSV quoting, say)
    reruns with this version's bytes: rerun neither compares nor refuses nor updates
    the sha256 its report row keeps (docs/billing.md)."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.advance(MIN)
    ingest(ledger, "r0", t0 + MIN)
    clock.set(t0 + 31 * MIN)
    window = _w(t0, 0, 30)
    assert _run(ledger, tmp_path / "first", "30m") == [window]
    info = ledger.billing.reports.get("shop", "billing", window)
    old = replace(info, sha256=dict.fromkeys(info.sha256, "0" * 64))  # as first written
    ledger.store.transact_write([report_put(old)])
    result = ledger.billing.reports.rerun(
        "shop", window, kind="billing", sink=DirectorySink(tmp_path / "again")
    )
    assert result.sha256 == info.sha256 != old.sha256
    assert ledger.billing.reports.get("shop", "billing", window) == old
    assert snapshot(tmp_path / "again") == snapshot(tmp_path / "first")


def test_crash_between_write_and_checkpoint_repeats_the_window(
    ledger: Ledger, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=5, start=t0)
    clock.advance(MIN)
    ingest(ledger, "r1", t0 + MIN)
    ingest(ledger, "r2", t0 + 9 * MIN, partner="beta")
    clock.set(t0 + 21 * MIN)

    original = ReportService._advance

    def crash(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("process killed after writing the files")

    monkeypatch.setattr(ReportService, "_advance", crash)
    with pytest.raises(RuntimeError):
        _run(ledger, out)
    written = snapshot(out)
    assert len(written) == 3
    assert ledger.billing.reports.list("shop") == []
    # the window is closed already: a record for it arriving now goes to the next one
    assert ingest(ledger, "r3", t0 + 2 * MIN).late
    monkeypatch.setattr(ReportService, "_advance", original)
    # the next run uses another interval; it still repeats exactly the interrupted window
    results = ledger.billing.reports.run(
        "shop", sink=DirectorySink(out), interval="1h", kinds=["billing"]
    )
    assert [(r.window, r.repeated) for r in results] == [(_w(t0, 0, 15), True)]
    assert snapshot(out) == written
    clock.set(t0 + 70 * MIN)
    assert _run(ledger, out, "1h") == [_w(t0, 15, 60)]
    _check_invariant_7(out, {"r1", "r2", "r3"})


def test_rewards_issued_report(ledger: Ledger, clock: ManualClock, tmp_path: Path) -> None:
    out = tmp_path / "out"
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    for a in ("alice", "bob"):
        ledger.accounts.open("shop", a)
    post = ledger.transactions.post
    clock.advance(MIN)
    post(
        "shop",
        [Leg("alice", "points", 500), Leg(ISSUANCE, "points", -500)],
        txn_id="e1",
        type="earn",
        metadata={"partner": "acme"},
    )
    post("shop", [Leg("bob", "points", 70), Leg(ISSUANCE, "points", -70)], txn_id="e2", type="earn")
    clock.advance(5 * MIN)
    post(
        "shop",
        [Leg("alice", "points", -120), Leg(REDEMPTION, "points", 120)],
        txn_id="r1",
        type="redeem",
        metadata={"partner": "acme"},
    )
    ledger.transactions.credit("shop", "bob", "cash", 999, txn_id="c1")  # not a reward
    clock.advance(20 * MIN)  # next window
    post(
        "shop",
        [Leg("alice", "points", -30), Leg(EXPIRY, "points", 30)],
        txn_id="x1",
        type="expire",
        metadata={"partner": "acme"},
    )
    clock.set(t0 + 31 * MIN)
    results = ledger.billing.reports.run("shop", sink=DirectorySink(out), kinds=["rewards"])
    assert [r.rows for r in results] == [3, 1]
    base = out / "shop" / "rewards"
    first = (base / _w(t0, 0, 15) / "rewards_issued.csv").read_text().splitlines()
    assert first == [
        "partner,fund,unit,issued,redeemed,expired,entries",
        ",points,points,70,0,0,1",
        "acme,points,points,500,120,0,2",
    ]
    second = (base / _w(t0, 15, 30) / "rewards_issued.csv").read_text().splitlines()
    assert second[1:] == ["acme,points,points,0,0,30,1"]
    again = tmp_path / "again"
    for r in results:
        ledger.billing.reports.rerun("shop", r.window, kind="rewards", sink=DirectorySink(again))
    assert snapshot(again) == snapshot(out)


def test_rewards_report_counts_loyalty_earn_redeem_and_expiry_per_partner(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """End to end from loyalty operations, not hand-made postings."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    ledger.loyalty.configure("shop", {"expiry": {"days": 1}})
    ledger.accounts.open("shop", "alice")
    clock.advance(MIN)
    ledger.loyalty.earn("shop", "alice", "o1", 5000, metadata={"partner": "acme"})  # 50
    ledger.loyalty.earn("shop", "alice", "o2", 2000)  # 20, no partner
    ledger.loyalty.redeem("shop", "alice", 20, "mug", txn_id="r1", metadata={"partner": "acme"})
    clock.set(t0 + 25 * 60 * MIN)  # every lot is past its day
    assert ledger.loyalty.expire("shop").points == 50
    clock.set(t0 + 27 * 60 * MIN)
    out = tmp_path / "out"
    results = ledger.billing.reports.run(
        "shop", sink=DirectorySink(out), interval="1h", kinds=["rewards"]
    )
    assert len(results) == 26  # the hourly windows that ended a grace minute ago
    rows = {
        r.window: (out / "shop" / "rewards" / r.window / "rewards_issued.csv")
        .read_text()
        .splitlines()[1:]
        for r in results
        if r.rows
    }
    assert rows == {
        _w(t0, 0, 60): [",points,points,20,0,0,1", "acme,points,points,50,20,0,2"],
        # the 50 expired are what is left of each partner's lots (the redeem took
        # 20 of acme's, the oldest): each partner's expired points are its own
        _w(t0, 25 * 60, 26 * 60): [",points,points,0,0,20,1", "acme,points,points,0,0,30,1"],
    }


def test_rerun_takes_only_a_window_a_run_reported(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """A part or a union of reported windows is inside the reported range but matches
    no report written: rerunning or downloading it would show totals no run reported."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.advance(MIN)
    for i in range(4):
        ingest(ledger, f"r{i}", t0 + i * 15 * MIN)
    clock.set(t0 + 61 * MIN)
    assert _run(ledger, tmp_path / "first", "30m") == [_w(t0, 0, 30), _w(t0, 30, 60)]
    for window in (_w(t0, 0, 15), _w(t0, 0, 60)):
        with pytest.raises(NotFound, match="no billing report for window"):
            ledger.billing.reports.rerun(
                "shop", window, kind="billing", sink=DirectorySink(tmp_path / "again")
            )
        with pytest.raises(NotFound):
            ledger.billing.reports.render("shop", "billing", window)
    assert not (tmp_path / "again").exists()
    rerun = ledger.billing.reports.rerun(
        "shop", _w(t0, 30, 60), kind="billing", sink=DirectorySink(tmp_path / "again")
    )
    assert rerun.rows == 2


def test_rerun_before_the_start_says_so(ledger: Ledger, clock: ManualClock, tmp_path: Path) -> None:
    # was: "window ... has not been reported yet (reported up to <a later time>)"
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    ingest(ledger, "r0", t0)
    clock.set(t0 + 31 * MIN)
    assert _run(ledger, tmp_path / "first") == [_w(t0, 0, 15), _w(t0, 15, 30)]
    with pytest.raises(InvalidState, match=r"starts before reporting does \(") as caught:
        ledger.billing.reports.rerun(
            "shop", _w(t0, -15, 0), kind="billing", sink=DirectorySink(tmp_path / "again")
        )
    assert "not been reported yet" not in str(caught.value)
    with pytest.raises(InvalidState, match="has not been reported yet"):
        ledger.billing.reports.render("shop", "billing", _w(t0, 30, 45))


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_expired_points_are_filed_under_the_partner_that_issued_them(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """Expired points were filed under an empty partner whoever issued them; each
    partner's are now its own, by the job and by a member's lazy expiry alike."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    ledger.loyalty.configure("shop", {"expiry": {"days": 1}})
    for account in ("alice", "bob"):
        ledger.accounts.open("shop", account)
    clock.advance(MIN)
    for account in ("alice", "bob"):
        ledger.loyalty.earn("shop", account, f"{account}-1", 3000, metadata={"partner": "acme"})
        ledger.loyalty.earn("shop", account, f"{account}-2", 700)  # no partner
        ledger.loyalty.earn("shop", account, f"{account}-3", 500, metadata={"partner": "zeta"})
        ledger.loyalty.earn("shop", account, f"{account}-4", 200, metadata={"partner": "acme"})
    clock.set(t0 + 25 * 60 * MIN)
    assert ledger.loyalty.status("shop", "bob").balance == 0  # bob's expire as he reads...
    job = ledger.loyalty.expire("shop")  # ...alice's by the job
    assert (job.points, job.lots, job.transactions) == (44, 4, 4)
    assert ledger.accounts.get("shop", "alice").fund("points").balance == 0
    clock.set(t0 + 27 * 60 * MIN)
    out = tmp_path / "out"
    results = ledger.billing.reports.run(
        "shop", sink=DirectorySink(out), interval="1h", kinds=["rewards"]
    )
    rows = [
        line
        for r in results
        if r.rows
        for line in (out / "shop" / "rewards" / r.window / "rewards_issued.csv")
        .read_text()
        .splitlines()[1:]
    ]
    assert rows == [
        ",points,points,14,0,0,2",
        "acme,points,points,64,0,0,4",
        "zeta,points,points,10,0,0,2",
        ",points,points,0,0,14,2",
        "acme,points,points,0,0,64,4",
        "zeta,points,points,0,0,10,2",
    ]


def test_a_partner_that_starts_a_formula_is_text_in_the_rewards_csv(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """A partner is free text in transaction metadata: one named ``=HYPERLINK(...)``
    or ``@SUM(...)`` was written as is, and a spreadsheet opening the CSV ran it.
    Such a cell now starts with ``'``; quoting stays RFC 4180 and the JSON keeps
    the partner as given."""
    import csv
    import io
    import json

    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    ledger.loyalty.configure("shop", {"expiry": {"days": 1}})
    partners = ['=HYPERLINK("http://x.test")', "@SUM(1+1)", "+1", "-1", "\tx", 'a,"b"\nc', "ok"]
    clock.advance(MIN)
    for i, partner in enumerate(partners):
        ledger.accounts.open("shop", f"m{i}")
        ledger.loyalty.earn("shop", f"m{i}", f"o{i}", 1000, metadata={"partner": partner})
    clock.set(t0 + 16 * MIN)
    out = tmp_path / "out"
    [result] = ledger.billing.reports.run("shop", sink=DirectorySink(out), kinds=["rewards"])
    folder = out / "shop" / "rewards" / result.window
    rows = list(csv.reader(io.StringIO((folder / "rewards_issued.csv").read_text(), newline="")))
    assert rows[0] == ["partner", "fund", "unit", "issued", "redeemed", "expired", "entries"]
    cells = {row[0] for row in rows[1:]}
    assert cells == {
        '\'=HYPERLINK("http://x.test")',
        "'@SUM(1+1)",
        "'+1",
        "'-1",
        "'\tx",
        'a,"b"\nc',
        "ok",
    }
    assert all(row[3:] == ["10", "0", "0", "1"] for row in rows[1:])
    doc = json.loads((folder / "rewards_issued.json").read_text())
    assert {t["partner"] for t in doc["totals"]} == set(partners)


def test_listing_every_kind_answers_the_newest_windows(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """Was: report rows sort by kind first, so the listing of every kind (``report
    list``, ``GET /v1/reports`` without ``kind``) answered the rewards reports,
    however old, before any billing one: the newest ``limit`` were not shown."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.set(t0 + 31 * MIN)  # a rewards window waits a minute
    sink = DirectorySink(tmp_path / "out")
    ledger.billing.reports.run("shop", sink=sink, kinds=["rewards"])
    clock.set(t0 + 60 * MIN)
    ledger.billing.reports.run("shop", sink=sink, kinds=["billing"])
    listed = [(i.kind, i.window) for i in ledger.billing.reports.list("shop", limit=3)]
    assert listed == [
        ("billing", _w(t0, 45, 60)),
        ("billing", _w(t0, 30, 45)),
        ("billing", _w(t0, 15, 30)),
    ]
    every = [(i.kind, i.window) for i in ledger.billing.reports.list("shop")]
    assert every == [
        ("billing", _w(t0, 45, 60)),
        ("billing", _w(t0, 30, 45)),
        ("billing", _w(t0, 15, 30)),
        ("rewards", _w(t0, 15, 30)),
        ("billing", _w(t0, 0, 15)),
        ("rewards", _w(t0, 0, 15)),
    ]


def test_a_carriage_return_in_a_partner_is_quoted_in_the_rewards_csv(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """Was: with ``\\n`` line ends Python's csv module left a field holding a lone
    ``\\r`` unquoted, so readers (csv.reader, spreadsheets) split the row in two."""
    import csv
    import io

    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    ledger.loyalty.configure("shop", {"expiry": {"days": 1}})
    ledger.accounts.open("shop", "m1")
    clock.advance(MIN)
    ledger.loyalty.earn("shop", "m1", "o1", 1000, metadata={"partner": "north\rsouth"})
    clock.set(t0 + 16 * MIN)
    out = tmp_path / "out"
    [result] = ledger.billing.reports.run("shop", sink=DirectorySink(out), kinds=["rewards"])
    data = (out / "shop" / "rewards" / result.window / "rewards_issued.csv").read_bytes()
    assert b'"north\rsouth",points,points,10,0,0,1\n' in data
    rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
    assert rows[1:] == [["north\rsouth", "points", "points", "10", "0", "0", "1"]]


def test_zero_grace_a_reward_not_yet_in_the_index_is_not_lost(
    store: ItemStore, clock: ManualClock, tmp_path: Path
) -> None:
    """Was: with a grace of 0 the rewards window was reported at its very end,
    before the hourly index (eventually consistent) held an earn made a few
    seconds earlier; that earn then appeared in no rewards report. A rewards
    window now waits a minute after its end whatever the grace."""
    from tallybook.store.lagging import LaggingStore

    lagging = LaggingStore(store)
    ledger = Ledger(lagging, clock=clock)
    ledger.programs.create("shop")
    ledger.loyalty.configure("shop", {"expiry": {"days": 1}})
    ledger.accounts.open("shop", "m1")
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.set(t0 + 15 * MIN - 5 * SECOND)
    ledger.loyalty.earn("shop", "m1", "o1", 1000, metadata={"partner": "acme"})
    assert lagging.pending  # not in the index yet
    clock.set(t0 + 15 * MIN)
    out = tmp_path / "out"
    first = ledger.billing.reports.run("shop", sink=DirectorySink(out))
    assert [(r.kind, r.window) for r in first] == [("billing", _w(t0, 0, 15))]
    lagging.flush()
    clock.set(t0 + 16 * MIN)
    [rewards] = ledger.billing.reports.run("shop", sink=DirectorySink(out), kinds=["rewards"])
    assert (rewards.window, rewards.rows) == (_w(t0, 0, 15), 1)


def test_an_entry_against_redemption_and_expiry_is_reported_under_each(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """One customer entry whose fund is posted against two counters (a wallet
    capture releasing bonus of a grant that expired meanwhile) counts its share
    under each: redeemed 30 and expired 20 of the one -50 entry."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    ledger.accounts.open("shop", "alice")
    clock.advance(MIN)
    legs = [Leg("alice", "points", 80), Leg(ISSUANCE, "points", -80)]
    ledger.transactions.post("shop", legs, txn_id="e1", type="earn")
    legs = [Leg("alice", "points", -50), Leg(REDEMPTION, "points", 30), Leg(EXPIRY, "points", 20)]
    ledger.transactions.post("shop", legs, txn_id="rx", type="capture")
    clock.set(t0 + 16 * MIN)
    out = tmp_path / "out"
    [result] = ledger.billing.reports.run("shop", sink=DirectorySink(out), kinds=["rewards"])
    assert result.rows == 2
    csv = (out / "shop" / "rewards" / result.window / "rewards_issued.csv").read_text()
    assert csv.splitlines()[1:] == [",points,points,80,30,20,2"]


def test_a_wallet_capture_reports_the_bonus_it_spent_and_the_bonus_that_expired(
    ledger: Ledger, clock: ManualClock, tmp_path: Path
) -> None:
    """End to end: a 60 bonus hold on a grant that then expires, captured for 25;
    the 35 released goes to expiry. The rewards report shows the grant's 100
    issued, 25 redeemed and 75 expired (40 by the job, 35 by the capture)."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=1, start=t0)
    ledger.accounts.open("shop", "alice")
    clock.advance(MIN)
    ledger.wallet.grant("shop", "alice", 100, expires_at=clock.now() + 5 * MIN, txn_id="g1")
    ledger.wallet.authorize("shop", "alice", 60, hold_id="h1", expires_in=3600)
    clock.advance(6 * MIN)
    assert [e.amount for e in ledger.wallet.expire_grants("shop")] == [40]
    captured = ledger.wallet.capture("shop", "h1", 25)
    assert captured.transaction is not None
    assert captured.transaction.funds == {"bonus": -60}
    assert ledger.transactions.system_balance("shop", "@expiry") == {"bonus": 75}
    clock.set(t0 + 16 * MIN)
    out = tmp_path / "out"
    [result] = ledger.billing.reports.run("shop", sink=DirectorySink(out), kinds=["rewards"])
    csv = (out / "shop" / "rewards" / result.window / "rewards_issued.csv").read_text()
    assert csv.splitlines()[1:] == [",bonus,USD,100,25,75,3"]


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])  # the CLI opens the store again
def test_every_report_is_reached_page_by_page(
    ledger: Ledger, store: ItemStore, clock: ManualClock, tmp_path: Path
) -> None:
    """Was: ``report list`` (``reports.list``) answered the newest ``limit``
    reports (1-1000) with no way past them; ``reports.page`` and ``report list``
    now give a cursor to the next page while there are more."""
    import json

    from typer.testing import CliRunner

    from tallybook.cli import app
    from tallybook.errors import StoreValidationError

    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.set(t0 + 31 * MIN)
    sink = DirectorySink(tmp_path / "out")
    ledger.billing.reports.run("shop", sink=sink, kinds=["rewards"])
    clock.set(t0 + 60 * MIN)
    ledger.billing.reports.run("shop", sink=sink, kinds=["billing"])
    every = [(i.kind, i.window) for i in ledger.billing.reports.list("shop")]
    assert len(every) == 6
    for kind in (None, "billing", "rewards"):
        expected = [e for e in every if kind in (None, e[0])]
        for limit in (1, 2, 4, 6):
            seen: list[tuple[str, str]] = []
            cursor = None
            while True:
                page = ledger.billing.reports.page("shop", kind=kind, limit=limit, cursor=cursor)
                assert 0 < len(page.reports) <= limit
                seen.extend((i.kind, i.window) for i in page.reports)
                cursor = page.cursor
                if cursor is None:
                    break
            assert seen == expected, (kind, limit)
    first = ledger.billing.reports.page("shop", kind="billing", limit=1)
    with pytest.raises(StoreValidationError, match="does not belong"):
        ledger.billing.reports.page("shop", kind="rewards", cursor=first.cursor)

    # the CLI: a table and its next-page line, or the JSON page on stdout with the
    # next-page line on stderr
    runner = CliRunner()
    base = ["--store", store.describe(), "report", "list", "-p", "shop", "--limit", "4"]
    result = runner.invoke(app, [*base, "--json"])
    assert result.exit_code == 0, result.output
    listed = [(r["kind"], r["window"]) for r in json.loads(result.stdout)]
    assert listed == every[:4]
    (line,) = result.stderr.splitlines()
    assert line.startswith("next page: --cursor ")
    result = runner.invoke(app, [*base, "--json", "--cursor", line.split()[-1]])
    assert result.exit_code == 0, result.output
    assert [(r["kind"], r["window"]) for r in json.loads(result.stdout)] == every[4:]
    assert result.stderr == ""
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == line
