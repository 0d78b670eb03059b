"""Billing records: idempotent ingestion into time buckets, bucket reads, settings.

Layout (see ``store/keys.py``): a record lives at ``BILL#{program}#{bucket}`` /
``{time}#{random}``; ``BILLID#{program}#{record id}`` is its idempotency row,
written in the same transaction on condition it does not exist. A replay with
the same body returns the original; another body is an ``IdempotencyConflict``.

Which window a record lands in (invariant 7): its own bucket, the bucket of its
``time``, unless the window holding that bucket has already been reported
(closed). A record whose bucket has already ended when it arrives is written
with a condition check on the program's billing state row (``closed_billing``
<= bucket start); when the check fails the record is filed in the first open
bucket instead and flagged ``late``. Records of the current bucket skip the
check (it would make the state row a hot item); they rely on the report's
grace window being longer than a write takes plus clock skew between hosts.
Where the grace window is shorter than :data:`FILING_MARGIN`, records whose
bucket ends within that margin are checked too (see :meth:`_filing_margin`).

Rows, cursors and the state row are stored and read by
:mod:`tallybook.store.records.billing`; settings change by the rules of
``state``; reports are written by ``reports``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tallybook.domain.billing import (
    MAX_FUTURE,
    BillingConfig,
    BillingRecord,
    RecordDraft,
    bucket_start,
    check_bucket_seconds,
    check_grace_seconds,
    check_time,
    draft_from_mapping,
    epoch,
    iso,
    new_record,
)
from tallybook.domain.ids import check_id, check_progress
from tallybook.domain.postings import fingerprint
from tallybook.errors import (
    ConditionFailed,
    IdempotencyConflict,
    NotFound,
    StoreValidationError,
    TallybookError,
    TooManyRetries,
    ValidationError,
)
from tallybook.retry import RetryPolicy, retrying
from tallybook.services.billing.state import check_unchanged, configure_open
from tallybook.services.clock import Clock
from tallybook.services.ledger.accounts import check_limit
from tallybook.services.ledger.core import ProgramLookup
from tallybook.store.port import Action, ItemStore
from tallybook.store.queries import bind_cursor, unbind_cursor
from tallybook.store.records.billing import (
    BillingState,
    bucket_page,
    bucket_records,
    create_state,
    decode_cursor,
    default_state,
    encode_cursor,
    fix,
    open_check,
    read_filed,
    read_state,
    record_actions,
    set_grace,
)

if TYPE_CHECKING:
    from tallybook.services.billing.reports import ReportService

#: records per storage transaction when ingesting many (2 actions each + 1 check, max 100)
BATCH_RECORDS = 48
#: buckets one listing may span (a quarter hour bucket: about 3 months)
MAX_LIST_BUCKETS = 10_000
#: the last second of 9999-12-31 UTC: a bucket start beyond it is no time
MAX_EPOCH = 253_402_300_799
QUERY_PAGE = 1000
#: filing a record: a bucket closed meanwhile moves it to the first open one
INGEST_RETRY = RetryPolicy(attempts=8)
#: seconds a record's write may take, clock skew between hosts included: with a
#: grace window shorter than this, records whose bucket ends this close are checked
FILING_MARGIN = 60
#: how long a process trusts the grace window it last read before reading it again
GRACE_REFRESH_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class RecordPage:
    records: list[BillingRecord]
    cursor: str | None


@dataclass
class IngestSummary:
    created: int = 0
    replayed: int = 0
    late: int = 0
    #: (line number, message) of each rejected record
    errors: list[tuple[int, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.created + self.replayed + len(self.errors)


Progress = Callable[[int], None]


class BillingService:
    """``ledger.billing``: partner billing records and incremental reports (docs/billing.md)."""

    def __init__(self, store: ItemStore, clock: Clock, programs: ProgramLookup) -> None:
        self.store = store
        self.clock = clock
        self.programs = programs
        self._buckets: dict[str, int] = {}
        #: program -> (grace seconds, time.monotonic() when read)
        self._graces: dict[str, tuple[int, float]] = {}

    @cached_property
    def reports(self) -> ReportService:
        from tallybook.services.billing.reports import ReportService

        return ReportService(self)

    # -- settings and state ----------------------------------------------------

    def configure(
        self,
        program: str,
        *,
        bucket_minutes: int | None = None,
        grace_minutes: int | None = None,
        start: datetime | None = None,
    ) -> BillingState:
        """Set the bucket size and where reporting starts (the first window) until the
        first billing record or report run fixes them; the grace window at any time.
        With no option it only reads: nothing is stored, nothing is fixed."""
        self.programs.get(program)
        for what, minutes in (("bucket_minutes", bucket_minutes), ("grace_minutes", grace_minutes)):
            if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, int)):
                raise ValidationError(f"{what} must be a whole number of minutes")
        bucket = None if bucket_minutes is None else check_bucket_seconds(bucket_minutes * 60)
        grace = check_grace_seconds(grace_minutes * 60) if grace_minutes is not None else None
        first = epoch(check_time(start, "start")) if start else None
        current = self._read_state(program)
        if bucket is None and grace is None and first is None:
            return current if current is not None else self.state(program)
        if current is None or not current.fixed:
            now = self.clock.now()
            current = configure_open(self.store, program, current, bucket, grace, first, now)
            if not current.fixed:
                return current
            self._buckets[program] = current.config.bucket_seconds  # fixed meanwhile
        check_unchanged(current, bucket, first)
        if grace is not None and grace != current.config.grace_seconds:
            set_grace(self.store, program, grace)
            return self.state(program)
        return current

    def state(self, program: str) -> BillingState:
        """The billing state row, or the defaults it would get (a read stores nothing)."""
        self.programs.get(program)
        found = self._read_state(program)
        return (
            found if found is not None else default_state(BillingConfig(), None, self.clock.now())
        )

    def fixed_state(self, program: str) -> BillingState:
        """The state with bucket size and start fixed, as the first record or report
        run leaves it: created with the defaults, or the configured row fixed."""
        self.programs.get(program)
        found = self._read_state(program)
        if found is None:
            # another writer may create the row first, unfixed (configure): fixed below
            found = create_state(self.store, program, BillingConfig(), None, self.clock.now())
        if not found.fixed:
            fix(self.store, program)
            found = self._read_state(program)
        assert found is not None
        self._buckets[program] = found.config.bucket_seconds
        return found

    def _read_state(self, program: str) -> BillingState | None:
        found = read_state(self.store, program)
        if found is not None:
            self._graces[program] = (found.config.grace_seconds, time.monotonic())
            if found.fixed:
                self._buckets[program] = found.config.bucket_seconds
        return found

    def _filing_margin(self, program: str) -> int:
        """Seconds before its bucket's end from which a record is filed with the
        window check: 0 when the grace window covers a write's time and skew,
        :data:`FILING_MARGIN` when it is shorter (a grace of 0 reports a window
        at its very end, while a record of its last bucket may still be in
        flight). The grace read is trusted for :data:`GRACE_REFRESH_SECONDS`."""
        seen = self._graces.get(program)
        if seen is None or time.monotonic() - seen[1] > GRACE_REFRESH_SECONDS:
            self._read_state(program)
            seen = self._graces.get(program)
        grace = seen[0] if seen is not None else BillingConfig().grace_seconds
        return FILING_MARGIN if grace < FILING_MARGIN else 0

    def bucket_seconds(self, program: str) -> int:
        """The bucket size: cached for the process's life once fixed (it never changes)."""
        check_id(program, "program id")  # before the cache: a list is no dict key
        if program in self._buckets:
            return self._buckets[program]
        return self.state(program).config.bucket_seconds

    def _fixed_bucket(self, program: str) -> int:
        """The bucket size for filing a record: fixes the settings if not yet fixed."""
        check_id(program, "program id")
        if program not in self._buckets:
            self.fixed_state(program)
        return self._buckets[program]

    # -- ingestion ----------------------------------------------------------------

    def ingest(
        self,
        program: str,
        record_id: str,
        *,
        partner: str,
        order_id: str,
        amount: int,
        currency: str,
        rate: Any,
        time: datetime | str,
    ) -> BillingRecord:
        """Record one billing record exactly once; a replay returns the original."""
        draft = new_record(
            record_id,
            partner=partner,
            order_id=order_id,
            amount=amount,
            currency=currency,
            rate=rate,
            time=time,
        )
        return self.ingest_draft(program, draft)

    def ingest_draft(self, program: str, draft: RecordDraft) -> BillingRecord:
        """:meth:`ingest` of a record already checked (a :class:`RecordDraft`)."""
        self.programs.get(program)
        # refused before it fixes the settings: only a record filed fixes them
        self._check_not_future(draft, self.clock.now())
        size = self._fixed_bucket(program)
        now = self.clock.now()
        target = bucket_start(epoch(draft.time), size)
        late = False
        margin = self._filing_margin(program)
        with retrying(INGEST_RETRY) as tries:
            for _ in tries:
                actions, record = record_actions(program, draft, target, late, now, size, margin)
                try:
                    self.store.transact_write(actions)
                except ConditionFailed as exc:
                    if exc.index == 0:
                        return self._replay(program, draft)
                    if exc.index == 2:
                        target, late = self._first_open(program, now, size), True
                    continue
                return record
        raise TooManyRetries(f"billing record {draft.id} could not be filed; retry it")

    def ingest_many(
        self,
        program: str,
        rows: Iterable[tuple[int, Mapping[str, Any] | RecordDraft | TallybookError]],
        *,
        progress: Progress | None = None,
    ) -> IngestSummary:
        """Ingest numbered records (an NDJSON file) in transactions of up to
        :data:`BATCH_RECORDS`; a record refused for its content (or a line that
        failed to parse, given as the error) is reported in ``errors`` with its
        number and does not stop the rest."""
        check_progress(progress)
        summary = IngestSummary()
        self.programs.get(program)
        batch: list[tuple[int, RecordDraft]] = []

        def flush() -> None:
            if batch:
                # the first record filed fixes the settings: refused lines do not
                self._ingest_batch(program, batch, self._fixed_bucket(program), summary)
                if progress:
                    progress(len(batch))
                batch.clear()

        if not isinstance(rows, Iterable) or isinstance(rows, str | bytes | Mapping):
            raise ValidationError("rows must be an iterable of (line number, record) pairs")
        for position, pair in enumerate(rows, 1):
            if not isinstance(pair, tuple) or len(pair) != 2:
                summary.errors.append((position, "not a (line number, record) pair"))
                if progress:
                    progress(1)
                continue
            number, row = pair
            try:
                if isinstance(row, TallybookError):
                    raise row
                draft = row if isinstance(row, RecordDraft) else draft_from_mapping(row)
                self._check_not_future(draft, self.clock.now())
            except TallybookError as exc:
                summary.errors.append((number, exc.message))
                if progress:
                    progress(1)
                continue
            if any(d.id == draft.id for _, d in batch):
                flush()
            batch.append((number, draft))
            if len(batch) >= BATCH_RECORDS:
                flush()
        flush()
        return summary

    def _ingest_batch(
        self,
        program: str,
        batch: list[tuple[int, RecordDraft]],
        size: int,
        summary: IngestSummary,
    ) -> None:
        now = self.clock.now()
        margin = self._filing_margin(program)
        actions: list[Action] = []
        earliest_late: int | None = None
        for _, draft in batch:
            target = bucket_start(epoch(draft.time), size)
            actions.extend(record_actions(program, draft, target, False, now, size)[0][:2])
            if target + size <= epoch(now) + margin:
                earliest_late = min(target, earliest_late if earliest_late is not None else target)
        if earliest_late is not None:
            # one check covers every late record of the batch: the earliest bucket is open
            actions.append(open_check(program, earliest_late))
        try:
            self.store.transact_write(actions)
        except (ConditionFailed, StoreValidationError):
            # a replay or a late record among them, or records adding up beyond a
            # transaction's 4 MB: file each on its own
            for number, draft in batch:
                try:
                    record = self.ingest_draft(program, draft)
                except TallybookError as exc:
                    summary.errors.append((number, exc.message))
                    continue
                summary.replayed += record.replay
                summary.created += not record.replay
                summary.late += record.late and not record.replay
            return
        summary.created += len(batch)

    def _first_open(self, program: str, now: datetime, size: int) -> int:
        state = self.state(program)
        return bucket_start(max(epoch(now), state.closed["billing"]), size)

    def _replay(self, program: str, draft: RecordDraft) -> BillingRecord:
        found = read_filed(self.store, program, draft.id, replay=True)
        if found is None:  # pragma: no cover - the row existed a moment ago
            raise TooManyRetries(f"billing record {draft.id} could not be read back; retry it")
        record, stored_fingerprint = found
        if stored_fingerprint != fingerprint(draft.body()):
            raise IdempotencyConflict(
                f"billing record {draft.id} was ingested before with different content"
            )
        return record

    @staticmethod
    def _check_not_future(draft: RecordDraft, now: datetime) -> None:
        if draft.time > now + MAX_FUTURE:
            raise ValidationError(
                f"record {draft.id} is dated more than a day ahead ({iso(draft.time)})"
            )

    # -- reads ------------------------------------------------------------------

    def get(self, program: str, record_id: str) -> BillingRecord:
        """A record by id (one request, through its idempotency row)."""
        check_id(record_id, "record id")
        found = read_filed(self.store, program, record_id)
        if found is None:
            raise NotFound(f"billing record {record_id} not found in program {program}")
        return found[0]

    def bucket(self, program: str, start: int) -> Iterator[BillingRecord]:
        """Every record filed in the bucket starting at ``start`` (epoch seconds)."""
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= MAX_EPOCH:
            raise ValidationError(f"start must be epoch seconds from 0 to {MAX_EPOCH}")
        yield from bucket_records(self.store, program, start, page_size=QUERY_PAGE)

    def records(
        self,
        program: str,
        since: datetime | str,
        until: datetime | str,
        *,
        limit: int = 500,
        cursor: str | None = None,
    ) -> RecordPage:
        """Records filed in the buckets from ``since`` (its bucket) to the last one
        starting before ``until``, whole buckets (records after ``until`` in its
        bucket too), bucket by bucket; late records appear in the bucket they
        were filed under. Pages with ``cursor``."""
        check_limit(limit)
        size = self.bucket_seconds(program)
        low = bucket_start(epoch(check_time(since, "since")), size)
        high = epoch(check_time(until, "until"))
        if high <= low:
            raise ValidationError("'since' must be before 'until'")
        if (high - low) // size > MAX_LIST_BUCKETS:
            raise ValidationError(f"a listing spans at most {MAX_LIST_BUCKETS} buckets")
        listing = ("billing-records", program, low, high)
        start = unbind_cursor(cursor, *listing)
        bucket, inner = (low, None) if start is None else decode_cursor(start)
        if not low <= bucket < high or (bucket - low) % size:
            # a page stops inside the range, on a bucket: any other bucket would read
            # outside it (or past a day's worth of buckets, or no time at all)
            raise StoreValidationError("cursor does not belong to this query")
        out: list[BillingRecord] = []
        while bucket < high:
            found, inner = bucket_page(
                self.store, program, bucket, limit=limit - len(out), cursor=inner
            )
            out.extend(found)
            if inner is None:
                bucket += size
            if len(out) >= limit:
                more = bucket < high
                next_cursor = encode_cursor(bucket, inner) if more else None
                return RecordPage(out, bind_cursor(next_cursor, *listing))
        return RecordPage(out, None)
