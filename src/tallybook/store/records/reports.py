"""How reports are stored and found: one row per written report, and the hourly
rewards index the rewards-issued report reads.

- ``REPORTS#{program}`` / ``{kind}#{window}``: a written report (its window,
  rows, file digests, where it went), newest window last;
- the rewards index: a customer entry posted against issuance, redemption or
  expiry carries ``counter`` and sits on ``gsi1`` under
  ``RWD#{program}#{hour}#{shard}`` (4 shards an hour), sorted by
  ``{time}#{txn}#{account}#{fund}``: no extra item per posting, and the report
  reads exactly the hours of its window.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import cast

from tallybook.domain.reports import ALL_KINDS, RewardFlow
from tallybook.errors import StoreValidationError
from tallybook.store import keys
from tallybook.store.port import Item, ItemStore, Put, SortCondition, Value
from tallybook.store.queries import bind_cursor, decode_cursor, encode_cursor, unbind_cursor


@dataclass(frozen=True, slots=True)
class ReportInfo:
    program: str
    kind: str
    window: str
    start: str
    end: str
    rows: int
    sha256: dict[str, str]
    location: str
    written_at: str


def report_put(info: ReportInfo) -> Put:
    """The row recording a written report (written with its checkpoint's advance)."""
    row: Item = {
        **keys.report_row(info.program, info.kind, info.window).as_item(),
        "program": info.program,
        "kind": info.kind,
        "window": info.window,
        "start": info.start,
        "end": info.end,
        "rows": info.rows,
        "sha256": cast(Value, info.sha256),
        "location": info.location,
        "written_at": info.written_at,
    }
    return Put(row)


def report_of(item: Item) -> ReportInfo:
    return ReportInfo(
        program=cast(str, item["program"]),
        kind=cast(str, item["kind"]),
        window=cast(str, item["window"]),
        start=cast(str, item["start"]),
        end=cast(str, item["end"]),
        rows=cast(int, item["rows"]),
        sha256=cast(dict[str, str], item.get("sha256") or {}),
        location=cast(str, item.get("location", "")),
        written_at=cast(str, item.get("written_at", "")),
    )


def read_report(store: ItemStore, program: str, kind: str, window: str) -> ReportInfo | None:
    item = store.get(keys.report_row(program, kind, window))
    return None if item is None else report_of(item)


def report_page(
    store: ItemStore, program: str, kind: str | None, *, limit: int, cursor: str | None = None
) -> tuple[list[ReportInfo], str | None]:
    """A page of the reports written (of ``kind``, or of every kind), newest window
    first (kinds in :data:`ALL_KINDS` order within a window), and the cursor of the
    next page (``None`` after the last).

    Rows sort by ``{kind}#{window}``: every kind is read on its own and the
    newest windows of all are kept, else the listing of every kind would be
    the rewards reports first, however old, and the billing ones only after.
    The cursor names the last report shown; the next page reads each kind from
    the report after it in that order."""
    listing = ("reports", program, kind)
    after = _report_position(unbind_cursor(cursor, *listing))
    if after is not None and kind is not None and after[1] != kind:
        raise StoreValidationError("cursor does not belong to this query")
    order = {str(k): n for n, k in enumerate(ALL_KINDS)}
    found: list[ReportInfo] = []
    for one in [kind] if kind else [str(k) for k in ALL_KINDS]:
        if after is None:
            sort = SortCondition.begins_with(f"{one}#")
        else:
            sort = SortCondition.between(f"{one}#", f"{one}#{after[0]}")
        page = store.query(keys.reports_partition(program), sort, forward=False, limit=limit + 2)
        found.extend(report_of(item) for item in page.items)
    if after is not None:  # the window shown last: only the kinds after the last one shown
        last = order.get(after[1], len(order))
        found = [r for r in found if r.window != after[0] or order.get(r.kind, len(order)) > last]
    found.sort(key=lambda r: order.get(r.kind, len(order)))
    found.sort(key=lambda r: r.window, reverse=True)
    if len(found) <= limit:
        return found, None
    shown = found[:limit]
    position = encode_cursor({"w": shown[-1].window, "k": shown[-1].kind})
    return shown, bind_cursor(position, *listing)


def _report_position(cursor: str | None) -> tuple[str, str] | None:
    """(window, kind) of the last report a page showed."""
    if cursor is None:
        return None
    position = decode_cursor(cursor)
    window, kind = position.get("w"), position.get("k")
    if set(position) != {"w", "k"} or window is None or kind not in {str(k) for k in ALL_KINDS}:
        raise StoreValidationError("malformed cursor")
    return window, str(kind)


# --- the rewards index -----------------------------------------------------------


def reward_index_fields(
    program: str, shares: Mapping[str, int], txn_id: str, account: str, fund: str, now_iso: str
) -> Item:
    """Attributes that put a customer entry posted against the counters of
    ``shares`` (issuance, redemption or expiry -> the entry's share of each) in
    the hourly rewards index. An entry against one counter names it
    (``counter``); one against several also keeps each share (``counter_shares``)."""
    shard = keys.shard_of(txn_id, keys.REWARD_INDEX_SHARDS)
    fields: Item = {
        "counter": min(shares),
        "gsi1pk": keys.reward_index(program, now_iso[:13], shard),
        "gsi1sk": f"{now_iso}#{txn_id}#{account}#{fund}",
    }
    if len(shares) > 1:
        fields["counter_shares"] = dict(shares)
    return fields


def reward_flows(
    store: ItemStore, program: str, hour: str, low_iso: str, high_iso: str
) -> Iterator[RewardFlow]:
    """Entries of the index hour ``hour`` (``YYYY-MM-DDTHH``) made in
    ``[low_iso, high_iso)``, shard by shard."""
    # index sort keys are "{time}#{txn}#...": "{end}#..." sorts above "{end}",
    # so ``between`` keeps the window's end exclusive
    sort = SortCondition.between(low_iso, high_iso)
    for shard in range(keys.REWARD_INDEX_SHARDS):
        partition = keys.reward_index(program, hour, shard)
        for item in store.query_all(partition, sort, index="gsi1", page_size=1000):
            metadata = cast(dict[str, str], item.get("metadata") or {})
            yield RewardFlow(
                partner=metadata.get("partner", ""),
                fund=cast(str, item["fund"]),
                unit=cast(str, item["unit"]),
                shares=_shares(item),
                txn_id=cast(str, item["txn_id"]),
                account=cast(str, item["account"]),
            )


def _shares(item: Item) -> dict[str, int]:
    """An indexed entry's amount per counter it was posted against."""
    shares = item.get("counter_shares")
    if isinstance(shares, dict):
        return cast(dict[str, int], shares)
    return {cast(str, item["counter"]): cast(int, item["amount"])}
