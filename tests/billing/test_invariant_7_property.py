"""Invariant 7 as a property: whatever records arrive when (on bucket and window
boundaries, late, before the start, replayed, one by one or in batches), however
the grace window changes and whatever intervals the runs use, the reported
windows tile the time since the start, every record lands in exactly one of
them, each window's totals equal the sum of its line items, the CSV says what
the JSON says, and a rerun gives the same bytes."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.billing import commission, epoch, from_epoch, iso, parse_iso, rate_fraction
from tallybook.ledger import Ledger
from tallybook.services.billing.sinks import DirectorySink
from tallybook.services.clock import ManualClock

from .helpers import MIN, examples, new_program, snapshot

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

EXAMPLES = {"memory": 40, "sqlite": 40, "dynamodb": 4}

ingest_op = st.tuples(
    st.just("ingest"),
    st.integers(-180, 20),  # minutes from now: before the start, late, current, ahead
    st.sampled_from([0, 0, -1, 1, 500_000]),  # microseconds: on, just before, after a boundary
    st.integers(-(10**6), 10**6).filter(bool),
    st.sampled_from(["0", "0.05", "0.1", "0.015", "0.33333333", "1"]),
    st.sampled_from(["acme", "zeta", "z"]),
    st.sampled_from(["USD", "EUR"]),
    st.booleans(),  # through ingest_many
)
operation = st.one_of(
    ingest_op,
    st.tuples(st.just("replay"), st.integers(0, 50)),
    st.tuples(st.just("advance"), st.integers(0, 40 * 60)),
    st.tuples(st.just("run"), st.sampled_from(["15m", "30m", "45m", "1h"])),
    st.tuples(st.just("grace"), st.sampled_from([0, 1, 5])),
)


def _csv_rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode(), newline="")))


def _check_window(folder: Path, start: int, end: int) -> list[dict[str, Any]]:
    doc = json.loads((folder / "billing.json").read_bytes())
    assert (doc["window"]["start"], doc["window"]["end"]) == (
        iso(from_epoch(start)),
        iso(from_epoch(end)),
    )
    items = doc["line_items"]
    assert doc["records"] == len(items)
    sums: dict[tuple[str, str], list[int]] = {}
    for item in items:
        rate = item["rate"]
        assert item["commission"] == commission(item["amount"], rate_fraction(rate))
        row = sums.setdefault((item["partner"], item["currency"]), [0, 0, 0])
        row[0] += 1
        row[1] += item["amount"]
        row[2] += item["commission"]
    assert [
        [t["partner"], t["currency"], t["records"], t["amount"], t["commission"]]
        for t in doc["totals"]
    ] == [[p, c, *v] for (p, c), v in sorted(sums.items())]
    totals_csv = _csv_rows((folder / "billing_totals.csv").read_bytes())
    assert totals_csv[1:] == [
        [str(v) for v in t.values()]
        for t in (
            {k: t[k] for k in ("partner", "currency", "records", "amount", "commission")}
            for t in doc["totals"]
        )
    ]
    lines_csv = _csv_rows((folder / "billing_line_items.csv").read_bytes())
    header = lines_csv[0]
    assert lines_csv[1:] == [
        [str(i[k]).lower() if k == "late" else str(i[k]) for k in header] for i in items
    ]
    return list(items)


@pytest.mark.slow
def test_every_record_lands_in_exactly_one_window(
    ledger: Ledger, clock: ManualClock, engine: str, tmp_path: Path
) -> None:
    @examples(EXAMPLES[engine])
    @given(
        bucket=st.sampled_from([5, 15]),
        grace=st.sampled_from([0, 1, 5]),
        ops=st.lists(operation, max_size=30),
    )
    def run(bucket: int, grace: int, ops: list[tuple[Any, ...]]) -> None:
        # each example starts on a fresh hour, a day after the last one's end
        program, t0 = new_program(ledger, clock, "inv7p", days_on=2)
        ledger.billing.configure(
            program, bucket_minutes=bucket, grace_minutes=grace, start=t0 - 60 * MIN
        )
        out = tmp_path / program
        sink = DirectorySink(out)
        bodies: list[dict[str, Any]] = []
        for op in ops:
            if op[0] == "ingest":
                _, minutes, micros, amount, rate, partner, currency, many = op
                body = {
                    "id": f"r{len(bodies)}",
                    "partner": partner,
                    "order_id": f"o{len(bodies)}",
                    "amount": amount,
                    "currency": currency,
                    "rate": rate,
                    "time": (
                        clock.now() + minutes * MIN + timedelta(microseconds=micros)
                    ).isoformat(),
                }
                bodies.append(body)
                if many:
                    summary = ledger.billing.ingest_many(program, [(1, body)])
                    assert (summary.created, summary.errors) == (1, [])
                else:
                    fields = {k: v for k, v in body.items() if k != "id"}
                    assert not ledger.billing.ingest(program, body["id"], **fields).replay
            elif op[0] == "replay" and bodies:
                body = bodies[op[1] % len(bodies)]
                summary = ledger.billing.ingest_many(program, [(1, body)])
                assert (summary.replayed, summary.errors) == (1, [])
            elif op[0] == "advance":
                clock.advance(timedelta(seconds=op[1]))
            elif op[0] == "run":
                ledger.billing.reports.run(program, sink=sink, interval=op[1], kinds=["billing"])
            elif op[0] == "grace":
                ledger.billing.configure(program, grace_minutes=op[1])
        # past every bucket a record can be filed in (its time, at most 20 minutes
        # ahead, or the first open bucket) by a bucket, the grace and an hour's window
        clock.advance(timedelta(hours=3))
        ledger.billing.reports.run(program, sink=sink, interval="1h", kinds=["billing"])

        state = ledger.billing.state(program)
        reported = sorted(
            ledger.billing.reports.list(program, kind="billing", limit=1000), key=lambda r: r.start
        )
        # the windows tile [start, checkpoint) without a gap or an overlap
        bounds = [(epoch(parse_iso(r.start)), epoch(parse_iso(r.end))) for r in reported]
        assert bounds[0][0] == state.start
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
        assert bounds[-1][1] == state.checkpoints["billing"]
        seen: Counter[str] = Counter()
        again = tmp_path / f"{program}-again"
        for info, (start, end) in zip(reported, bounds, strict=True):
            folder = out / program / "billing" / info.window
            items = _check_window(folder, start, end)
            seen.update(i["record_id"] for i in items)
            for item in items:
                filed = ledger.billing.get(program, item["record_id"])
                assert start <= epoch(filed.bucket) < end
                assert item["late"] == filed.late
            ledger.billing.reports.rerun(
                program, info.window, kind="billing", sink=DirectorySink(again)
            )
        assert snapshot(again) == snapshot(out)
        assert set(seen) == {b["id"] for b in bodies}
        assert all(n == 1 for n in seen.values()), seen

    run()
