"""Incremental reports: billing commission per partner, rewards issued per partner.

Each program has, per report kind, a checkpoint (end of the last reported
window) and a closed mark in its billing state row. A run reports every window
after the checkpoint that is older than the grace window, one at a time:

1. close the window (``closed_{kind}`` = its end): from then on, billing
   records dated inside it are filed in a later open bucket instead;
2. read exactly the window's buckets (billing) or hourly index partitions
   (rewards) — never a scan;
3. write the files (deterministic names and bytes);
4. advance the checkpoint and record the report row, in one transaction.

A crash after step 1 or 3 leaves ``closed > checkpoint``: the next run repeats
exactly that window (whatever its interval), rewriting the same files, so no
record is reported twice or lost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from tallybook.domain.billing import (
    BillingRecord,
    check_interval,
    epoch,
    from_epoch,
    iso,
    next_window,
    parse_interval,
    parse_window,
    window_name,
)
from tallybook.domain.ids import check_progress
from tallybook.domain.reports import (
    ALL_KINDS,
    ReportKind,
    RewardFlow,
    check_kind,
    render_billing,
    render_rewards,
    report_path,
)
from tallybook.errors import ConditionFailed, InvalidState, NotFound, ValidationError
from tallybook.services.billing.sinks import ReportSink
from tallybook.services.clock import Clock
from tallybook.services.ledger.core import ProgramLookup
from tallybook.store.port import ItemStore
from tallybook.store.records.billing import BillingState, advance_checkpoint, close_window
from tallybook.store.records.reports import ReportInfo as ReportInfo
from tallybook.store.records.reports import (
    read_report,
    report_page,
    report_put,
    reward_flows,
)

Progress = Callable[[str], None]
_HOUR = 3600
#: seconds a rewards window waits after its end whatever the grace window: the
#: hourly index is eventually consistent and a posting dated before the end may
#: still be committing (a grace of 0 would report the window without them, for good)
REWARDS_MIN_WAIT = 60


@dataclass(frozen=True, slots=True)
class ReportPage:
    """A page of the reports written; ``cursor`` reads the next (``None``: the last)."""

    reports: list[ReportInfo]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class ReportResult:
    program: str
    kind: str
    window: str
    start: str
    end: str
    #: file name -> where it was written
    files: dict[str, str]
    #: file name -> sha256 of its bytes
    sha256: dict[str, str]
    #: billing records or reward entries in the window
    rows: int
    #: a repeat of a window interrupted before its checkpoint advanced
    repeated: bool = False


class Billing(Protocol):
    """What reports use of the billing service (``BillingService``): its settings
    and the records of one bucket."""

    store: ItemStore
    clock: Clock
    programs: ProgramLookup

    def state(self, program: str) -> BillingState: ...

    def fixed_state(self, program: str) -> BillingState: ...

    def bucket(self, program: str, start: int) -> Iterator[BillingRecord]: ...


class ReportService:
    def __init__(self, billing: Billing) -> None:
        self.billing = billing
        self.store = billing.store
        self.clock = billing.clock

    # -- runs ---------------------------------------------------------------------

    def run(
        self,
        program: str,
        *,
        sink: ReportSink,
        interval: str = "15m",
        kinds: Sequence[str] = ALL_KINDS,
        progress: Progress | None = None,
        max_windows: int | None = None,
    ) -> list[ReportResult]:
        """Report every due window since each kind's checkpoint; returns what was written."""
        check_progress(progress)
        seconds = parse_interval(interval)
        chosen = [check_kind(k) for k in kinds]
        state = self.billing.fixed_state(program)  # a report run fixes the settings
        if ReportKind.BILLING in chosen:
            check_interval(seconds, state.config.bucket_seconds)
        elif seconds % 60:
            raise ValidationError("interval must be whole minutes")
        results: list[ReportResult] = []
        for kind in chosen:
            for result in self._run_kind(program, kind, seconds, sink):
                results.append(result)
                if progress:
                    progress(f"{kind} {result.window}")
                if max_windows is not None and len(results) >= max_windows:
                    return results
        return results

    def _run_kind(
        self, program: str, kind: ReportKind, interval: int, sink: ReportSink
    ) -> Iterator[ReportResult]:
        while True:
            state = self.billing.state(program)
            ckpt, closed = state.checkpoints[kind], state.closed[kind]
            repeated = closed > ckpt
            if repeated:
                window = (ckpt, closed)
            else:
                now = epoch(self.clock.now())
                grace = state.config.grace_seconds
                if kind is ReportKind.REWARDS:
                    grace = max(grace, REWARDS_MIN_WAIT)
                due = next_window(ckpt, interval, now, grace)
                if due is None:
                    return
                window = due
                if not self._close(program, kind, ckpt, closed, window[1]):
                    continue
            result = self._write(program, kind, state, window, sink, repeated=repeated)
            if self._advance(program, kind, window, result, sink):
                yield result

    def _close(self, program: str, kind: ReportKind, ckpt: int, closed: int, end: int) -> bool:
        try:
            self.store.transact_write([close_window(program, kind, ckpt, closed, end)])
        except ConditionFailed:
            return False  # another runner moved first: read the state again
        return True

    def _write(
        self,
        program: str,
        kind: ReportKind,
        state: BillingState,
        window: tuple[int, int],
        sink: ReportSink,
        *,
        repeated: bool = False,
    ) -> ReportResult:
        files, rows = self._render(program, kind, state, *window)
        written = {
            name: sink.write(report_path(program, kind, *window, name), data)
            for name, data in files.items()
        }
        return ReportResult(
            program=program,
            kind=str(kind),
            window=window_name(*window),
            start=iso(from_epoch(window[0])),
            end=iso(from_epoch(window[1])),
            files=written,
            sha256={name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
            rows=rows,
            repeated=repeated,
        )

    def _advance(
        self,
        program: str,
        kind: ReportKind,
        window: tuple[int, int],
        result: ReportResult,
        sink: ReportSink,
    ) -> bool:
        """Advance the checkpoint past ``window`` and record the report, atomically."""
        info = ReportInfo(
            program=program,
            kind=str(kind),
            window=result.window,
            start=result.start,
            end=result.end,
            rows=result.rows,
            sha256=result.sha256,
            location=sink.describe(),
            written_at=iso(self.clock.now()),
        )
        try:
            self.store.transact_write(
                [advance_checkpoint(program, kind, *window), report_put(info)]
            )
        except ConditionFailed:
            return False  # another runner reported this window already
        return True

    # -- rerun, render, list -----------------------------------------------------------

    def rerun(self, program: str, window: str, *, kind: str, sink: ReportSink) -> ReportResult:
        """Write a reported window's files again, as this version renders them: the
        first run's bytes unless an earlier version wrote it in another format (the
        report row's sha256 is left as first written; nothing compares them)."""
        report_kind = check_kind(kind)
        bounds = parse_window(window)
        state = self.billing.state(program)
        self._check_reported(program, state, report_kind, bounds)
        return self._write(program, report_kind, state, bounds, sink)

    def render(self, program: str, kind: str, window: str) -> dict[str, bytes]:
        """A reported window's files, in memory (HTTP downloads)."""
        report_kind = check_kind(kind)
        bounds = parse_window(window)
        state = self.billing.state(program)
        self._check_reported(program, state, report_kind, bounds)
        return self._render(program, report_kind, state, *bounds)[0]

    def list(self, program: str, *, kind: str | None = None, limit: int = 100) -> list[ReportInfo]:
        """Reports written, newest window first (the first page of :meth:`page`)."""
        return self.page(program, kind=kind, limit=limit).reports

    def page(
        self,
        program: str,
        *,
        kind: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ReportPage:
        """A page of the reports written, newest window first; pass its ``cursor``
        back (with the same ``kind``) for the next one, until it is ``None``."""
        from tallybook.services.ledger.accounts import check_limit

        self.billing.programs.get(program)
        check_limit(limit)
        if cursor is not None and not isinstance(cursor, str):
            raise ValidationError("cursor must be a string")
        reports, next_cursor = report_page(
            self.store, program, str(check_kind(kind)) if kind else None, limit=limit, cursor=cursor
        )
        return ReportPage(reports, next_cursor)

    def get(self, program: str, kind: str, window: str) -> ReportInfo:
        found = read_report(self.store, program, check_kind(kind), window)
        if found is None:
            raise NotFound(f"no {kind} report for window {window} in program {program}")
        return found

    def _check_reported(
        self, program: str, state: BillingState, kind: ReportKind, bounds: tuple[int, int]
    ) -> None:
        """``bounds`` is a window a run reported (not merely inside the reported range:
        a part or a union of reported windows matches no report written)."""
        start, end = bounds
        if start < state.start:
            raise InvalidState(
                f"window {window_name(start, end)} starts before reporting does "
                f"({iso(from_epoch(state.start))}): nothing before it is reported"
            )
        if end > state.checkpoints[kind]:
            raise InvalidState(
                f"window {window_name(start, end)} has not been reported yet "
                f"(reported up to {iso(from_epoch(state.checkpoints[kind]))})"
            )
        if kind is ReportKind.BILLING and (
            start % state.config.bucket_seconds or end % state.config.bucket_seconds
        ):
            raise ValidationError("a billing window starts and ends on bucket boundaries")
        name = window_name(start, end)
        if read_report(self.store, program, kind, name) is None:
            raise NotFound(
                f"no {kind} report for window {name} in program {program}: rerun a window "
                "that a run reported (report list)"
            )

    # -- reading a window -----------------------------------------------------------

    def _render(
        self, program: str, kind: ReportKind, state: BillingState, start: int, end: int
    ) -> tuple[dict[str, bytes], int]:
        if kind is ReportKind.BILLING:
            size = state.config.bucket_seconds
            records = [r for b in range(start, end, size) for r in self.billing.bucket(program, b)]
            return render_billing(program, start, end, records), len(records)
        flows = list(self._reward_flows(program, start, end))
        return render_rewards(program, start, end, flows), len(flows)

    def _reward_flows(self, program: str, start: int, end: int) -> Iterator[RewardFlow]:
        """Entries against issuance/redemption/expiry, from the hourly gsi1 partitions."""
        hour = start - start % _HOUR
        while hour < end:
            low, high = max(start, hour), min(end, hour + _HOUR)
            label = from_epoch(hour).strftime("%Y-%m-%dT%H")
            yield from reward_flows(
                self.store, program, label, iso(from_epoch(low)), iso(from_epoch(high))
            )
            hour += _HOUR
