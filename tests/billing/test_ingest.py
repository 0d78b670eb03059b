"""Ingesting billing records: idempotency, validation, buckets, late filing (both engines)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.errors import IdempotencyConflict, InvalidState, NotFound, ValidationError
from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock
from tallybook.store import keys

from .helpers import MIN, aligned_start, ingest, record

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite


def test_ingest_files_by_bucket_and_replays(ledger: Ledger, clock: ManualClock) -> None:
    t0 = aligned_start(clock)
    clock.advance(2 * MIN)
    first = ingest(ledger, "r1", t0 + MIN, amount=1005, rate="0.05")
    assert (first.commission, first.bucket, first.late, first.replay) == (50, t0, False, False)
    again = ingest(ledger, "r1", t0 + MIN, amount=1005, rate="0.050")  # same rate, other spelling
    assert again.replay
    assert again.commission == 50
    assert again.ingested_at == first.ingested_at
    with pytest.raises(IdempotencyConflict):
        ingest(ledger, "r1", t0 + MIN, amount=1006)
    page = ledger.billing.records("shop", t0, t0 + 15 * MIN)
    assert [r.id for r in page.records] == ["r1"]
    assert ledger.billing.get("shop", "r1").commission == 50
    with pytest.raises(NotFound):
        ledger.billing.get("shop", "nope")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("amount", 0),
        ("amount", 1.5),
        ("currency", "usd"),
        ("rate", 0.05),
        ("rate", "2"),
        ("time", "2026-01-01T00:00:00"),
        ("partner", "a/b"),
        ("order_id", ""),
    ],
)
def test_bad_records_are_refused(ledger: Ledger, field: str, value: object) -> None:
    data = record("r1", ledger.clock.now())
    data[field] = value
    summary = ledger.billing.ingest_many("shop", [(1, data)])
    assert summary.created == 0
    assert summary.errors
    assert summary.errors[0][0] == 1


def test_future_and_unknown_program(ledger: Ledger, clock: ManualClock) -> None:
    with pytest.raises(ValidationError, match="ahead"):
        ingest(ledger, "r1", clock.now() + timedelta(days=2))
    with pytest.raises(NotFound):
        ledger.billing.ingest(
            "nope",
            "r1",
            partner="a",
            order_id="o",
            amount=1,
            currency="USD",
            rate="0",
            time=clock.now(),
        )


def test_ingest_many_batches_replays_and_duplicates(ledger: Ledger, clock: ManualClock) -> None:
    t0 = aligned_start(clock)
    clock.advance(50 * MIN)
    rows = [(i + 1, record(f"r{i}", t0 + i * MIN)) for i in range(40)]
    summary = ledger.billing.ingest_many("shop", rows)
    assert (summary.created, summary.replayed, summary.errors) == (40, 0, [])
    # a file re-run with one changed and one duplicated line
    changed = dict(rows[3][1], amount=5)
    again = [*rows[:3], (4, changed), *rows[4:], (41, rows[0][1])]
    summary = ledger.billing.ingest_many("shop", again)
    assert (summary.created, summary.replayed) == (0, 40)
    assert summary.errors == [(4, "billing record r3 was ingested before with different content")]
    listed = []
    cursor = None
    while True:
        page = ledger.billing.records("shop", t0, t0 + 60 * MIN, limit=7, cursor=cursor)
        listed += [r.id for r in page.records]
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(listed) == sorted(f"r{i}" for i in range(40))


def test_late_record_goes_to_first_open_bucket(
    ledger: Ledger, clock: ManualClock, tmp_path: object
) -> None:
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=5, start=t0)
    clock.advance(18 * MIN)
    inside = ingest(ledger, "in-grace", t0 + 3 * MIN)  # its window is not reported yet
    assert inside.bucket == t0
    assert not inside.late
    clock.advance(3 * MIN)  # t0+21: the first window is due
    ledger.billing.reports.run("shop", sink=DirectorySink(str(tmp_path)), kinds=["billing"])
    late = ingest(ledger, "too-late", t0 + 4 * MIN)
    assert late.late
    assert late.bucket == t0 + 15 * MIN
    # a record late for a bucket that is still open is filed in its own bucket
    clock.advance(20 * MIN)  # t0+41, window [15, 30) closed only when reported
    own = ingest(ledger, "own", t0 + 20 * MIN)
    assert own.bucket == t0 + 15 * MIN
    assert not own.late


def test_bucket_size_is_fixed_once_started(ledger: Ledger, clock: ManualClock) -> None:
    t0 = aligned_start(clock)
    for bad in (0, -15, 1441):  # at least a minute, at most a day
        with pytest.raises(ValidationError, match="from 1 minute to 1 day"):
            ledger.billing.configure("shop", bucket_minutes=bad)
    assert ledger.store.get(keys.billing_state("shop")) is None  # nothing was fixed yet
    state = ledger.billing.configure("shop", bucket_minutes=5, grace_minutes=1, start=t0)
    assert (state.config.bucket_seconds, state.config.grace_seconds, state.start) == (
        300,
        60,
        int(t0.timestamp()),
    )
    assert ingest(ledger, "r1", t0 + 7 * MIN).bucket == t0 + 5 * MIN
    with pytest.raises(InvalidState):
        ledger.billing.configure("shop", bucket_minutes=15)
    assert ledger.billing.configure("shop", grace_minutes=9).config.grace_seconds == 540
    with pytest.raises(ValidationError):
        ledger.billing.configure("shop", bucket_minutes=7)
    assert ledger.store.get(keys.billing_state("shop")) is not None


def test_reporting_start_in_the_future_is_refused(ledger: Ledger, clock: ManualClock) -> None:
    """A record of a bucket before the start that has not ended is filed without the
    open-window check: with a future start no window would ever report it."""
    t0 = aligned_start(clock)
    clock.advance(3 * MIN)
    with pytest.raises(ValidationError, match="start must not be in the future"):
        ledger.billing.configure("shop", start=t0 + 15 * MIN)
    assert ledger.store.get(keys.billing_state("shop")) is None
    assert ledger.billing.configure("shop", start=t0).start == int(t0.timestamp())
    assert ingest(ledger, "r1", clock.now()).bucket == t0


def test_listing_reads_whole_buckets(ledger: Ledger, clock: ManualClock) -> None:
    """``until`` ends the listing with the bucket holding it, whole (docs/billing.md)."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", start=t0)
    clock.advance(20 * MIN)
    for minute in (0, 5, 14, 15):
        ingest(ledger, f"r{minute}", t0 + minute * MIN)
    listed = ledger.billing.records("shop", t0 + 5 * MIN, t0 + 10 * MIN).records
    assert [r.id for r in listed] == ["r0", "r5", "r14"]
    assert [r.id for r in ledger.billing.records("shop", t0, t0 + 15 * MIN).records] == [
        "r0",
        "r5",
        "r14",
    ]


def test_a_record_dated_before_year_1000_reads_back_and_is_reported(
    ledger: Ledger, clock: ManualClock, tmp_path: object
) -> None:
    """Its time used to be stored with an unpadded year ("999-12-31T..."), which no
    read could parse: get, listings and the report of its window failed for good."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", grace_minutes=0, start=t0)
    clock.advance(MIN)
    old = ledger.billing.ingest(
        "shop",
        "old",
        partner="acme",
        order_id="o",
        amount=100,
        currency="USD",
        rate="0.1",
        time="0999-12-31T23:59:59Z",
    )
    assert (old.late, old.bucket) == (True, t0)  # before the reporting start: filed late
    assert ledger.billing.get("shop", "old").time.year == 999
    assert [r.id for r in ledger.billing.records("shop", t0, t0 + 15 * MIN).records] == ["old"]
    clock.advance(15 * MIN)
    reports = ledger.billing.reports.run("shop", sink=DirectorySink(str(tmp_path)))
    assert [r.rows for r in reports if r.kind == "billing"] == [1]
    for bad in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-14:00"):
        with pytest.raises(ValidationError, match="out of range"):
            ledger.billing.ingest(
                "shop",
                "x",
                partner="acme",
                order_id="o",
                amount=100,
                currency="USD",
                rate="0.1",
                time=bad,
            )


@pytest.mark.parametrize("rows", [5, None, "abc", {"r1": {}}])
def test_ingest_many_refuses_rows_that_are_not_pairs(ledger: Ledger, rows: object) -> None:
    # 5 and None raised TypeError, "abc" ValueError (unpacking its letters)
    with pytest.raises(ValidationError, match=r"rows must be an iterable of \(line number"):
        ledger.billing.ingest_many("shop", rows)  # type: ignore[arg-type]


def test_ingest_many_reports_a_malformed_pair_and_goes_on(
    ledger: Ledger, clock: ManualClock
) -> None:
    # [5] raised TypeError and [(1, row, 3)] ValueError, after earlier batches were written
    t0 = aligned_start(clock)
    clock.advance(2 * MIN)
    rows = [5, (1,), (2, record("r1", t0 + MIN), 3), (3, record("r2", t0 + MIN))]
    summary = ledger.billing.ingest_many("shop", rows)  # type: ignore[arg-type]
    assert summary.created == 1
    assert summary.errors == [
        (1, "not a (line number, record) pair"),
        (2, "not a (line number, record) pair"),
        (3, "not a (line number, record) pair"),
    ]
    assert ledger.billing.get("shop", "r2").amount == 1000


@pytest.mark.parametrize("start", ["x", 1.5, True, -1, 2**70])
def test_a_bucket_start_that_is_not_epoch_seconds_is_refused(ledger: Ledger, start: object) -> None:
    # "x" raised TypeError and 2**70 OverflowError
    with pytest.raises(ValidationError, match="start must be epoch seconds"):
        list(ledger.billing.bucket("shop", start))  # type: ignore[arg-type]


@pytest.mark.parametrize("shift", [-(10**12), -15 * 60 * 5000, 1, 60 * 60], ids=str)
def test_a_cursor_bucket_outside_the_listing_is_refused(
    ledger: Ledger, clock: ManualClock, shift: int
) -> None:
    """A bound cursor only tags the listing: its bucket is the client's text. One
    before the range listed buckets outside it (5000 buckets back, with no cap: a
    bucket at epoch 0 was two million queries), one off a bucket boundary read no
    bucket, and one before year 1 was an OverflowError (HTTP 500)."""
    from tallybook.domain.billing import epoch
    from tallybook.errors import StoreValidationError
    from tallybook.store.queries import bind_cursor
    from tallybook.store.records.billing import encode_cursor

    t0 = aligned_start(clock)
    ledger.billing.configure("shop", start=t0 - 24 * 60 * MIN)
    clock.advance(MIN)
    ingest(ledger, "old", t0 - 10 * 60 * MIN)
    low, high = epoch(t0), epoch(t0 + 60 * MIN)
    cursor = bind_cursor(encode_cursor(low + shift, None), "billing-records", "shop", low, high)
    with pytest.raises(StoreValidationError, match="cursor does not belong to this query"):
        ledger.billing.records("shop", t0, t0 + 60 * MIN, cursor=cursor)


def test_a_record_giving_both_id_and_record_id_is_refused(
    ledger: Ledger, clock: ManualClock
) -> None:
    """Was: ``id`` won without a word, so a line meant as record ``r-b`` (its
    ``record_id``, the report's name for it) was filed as ``r-a``."""
    t0 = aligned_start(clock)
    clock.advance(MIN)
    row = {**record("r-a", t0), "record_id": "r-b"}
    summary = ledger.billing.ingest_many("shop", [(1, row), (2, record("r-c", t0))])
    assert summary.created == 1
    assert summary.errors == [(1, "a billing record gives its id once: id or record_id, not both")]
    alias = {k: v for k, v in record("r-d", t0).items() if k != "id"}
    summary = ledger.billing.ingest_many("shop", [(1, {**alias, "record_id": "r-d"})])
    assert (summary.created, summary.errors) == (1, [])
    with pytest.raises(NotFound):
        ledger.billing.get("shop", "r-a")


def test_records_refused_do_not_fix_the_settings(ledger: Ledger, clock: ManualClock) -> None:
    """Was: ``ingest_many`` fixed bucket size and start before reading a line, so a
    file whose every line was refused (or an empty one) fixed them, as did one
    record refused for its date; ``configure`` then said billing had started
    (exit 3 / 409) with no record filed. The first record filed fixes them."""
    t0 = aligned_start(clock)
    ledger.billing.configure("shop", bucket_minutes=60, start=t0)
    clock.advance(MIN)
    ahead = record("r-ahead", t0 + 3 * 24 * 60 * MIN)
    summary = ledger.billing.ingest_many("shop", [(1, {"id": "x"}), (2, ahead)])
    assert (summary.created, [n for n, _ in summary.errors]) == (0, [1, 2])
    assert ledger.billing.ingest_many("shop", []).total == 0
    with pytest.raises(ValidationError, match="ahead"):
        ingest(ledger, "r-ahead", t0 + 3 * 24 * 60 * MIN)
    assert not ledger.billing.state("shop").fixed
    assert ledger.billing.configure("shop", bucket_minutes=30).config.bucket_seconds == 1800
    ingest(ledger, "r1", t0 + MIN)
    assert ledger.billing.state("shop").fixed
    with pytest.raises(NotFound):
        ledger.billing.ingest_many("nope", [(1, {"id": "x"})])
