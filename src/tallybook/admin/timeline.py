"""One timeline per customer across all funds: a transaction is one event.

Each fund keeps its own history (newest first by the fund's sequence); a
payment split over bonus, store credit and cash is one transaction with an
entry in each of those funds. The timeline merges the funds' histories and
groups entries by transaction id, so the split payment reads as one event with
a line per fund.

Paging: every fund is read from its own position, at most ``limit`` entries.
Events are taken newest first (by time; ties keep each fund's own order) while
every fund they touch still has read entries, so an event is never cut in two.
The cursor holds each fund's position after what was shown; a position that
stops inside a read page is found again by reading that fund once more with
the number of entries shown (store cursors are opaque), so a page costs at
most two reads per fund (more only when the fund was written to meanwhile:
see ``position_after``).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from tallybook.domain.model import Entry
from tallybook.errors import ValidationError
from tallybook.ledger import Ledger
from tallybook.services.ledger.accounts import MAX_PAGE, EntryPage

#: a fund with no more entries in the range
_DONE = "-"
#: reads past entries written during a page, at most (each read catches up on all so far)
_REREADS = 3


@dataclass(frozen=True, slots=True)
class Event:
    """One transaction as the customer's account saw it: one entry per fund it touched."""

    txn_id: str
    type: str
    created_at: datetime
    entries: tuple[Entry, ...]
    order_id: str | None = None
    description: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TimelinePage:
    events: list[Event]
    cursor: str | None


def _encode(positions: dict[str, str | None]) -> str:
    """Compressed: the funds' cursors repeat the account's partition key."""
    raw = json.dumps(positions, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def _decode(cursor: str, funds: Sequence[str]) -> dict[str, str | None]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(zlib.decompress(raw))
    except (binascii.Error, ValueError, zlib.error):
        raise ValidationError(
            "the timeline cursor is not valid; start from the first page"
        ) from None
    if not isinstance(value, dict) or not all(
        isinstance(v, str | None) and k in funds for k, v in value.items()
    ):
        raise ValidationError("the timeline cursor is not valid; start from the first page")
    return {f: value.get(f) for f in funds}


def _take(
    streams: dict[str, list[Entry]],
    truncated: set[str],
    limit: int,
    newest_first: bool,
    funds_of: Callable[[str], set[str]],
) -> list[list[Entry]]:
    """Group the streams' heads into events in the streams' order, taking only prefixes.

    A transaction whose time ties with the last read entry of a truncated fund may
    have an entry in that fund past what was read: ``funds_of`` (the funds its legs
    touch on this account) says whether it does, and such an event waits."""

    def beyond(at: datetime, fund: str) -> bool:
        """Whether ``fund``'s unread entries may hold a transaction of time ``at``."""
        last = streams[fund][-1].created_at if streams[fund] else None
        return last is None or (at <= last if newest_first else at >= last)

    heads = dict.fromkeys(streams, 0)
    events: list[list[Entry]] = []
    while len(events) < limit:
        if any(heads[f] >= len(streams[f]) for f in truncated):
            break  # a fund has unread entries that may be newer than what is left
        live = [f for f in streams if heads[f] < len(streams[f])]
        if not live:
            break
        # the next transaction (by time, ties in fund order) whose every read entry is
        # at the head of its fund
        candidates: list[tuple[datetime, int, list[str]]] = []
        for f in live:
            txn = streams[f][heads[f]].txn_id
            parts = [g for g in live if any(e.txn_id == txn for e in streams[g][heads[g] :])]
            if not all(streams[g][heads[g]].txn_id == txn for g in parts):
                continue
            at = streams[f][heads[f]].created_at
            unsure = {g for g in truncated if g not in parts and beyond(at, g)}
            if not unsure or not unsure & funds_of(txn):
                candidates.append((at, len(candidates), parts))
        if not candidates:
            break  # inconsistent orders (cannot happen for one account's commits)
        if newest_first:
            _, _, parts = max(candidates, key=lambda c: (c[0], -c[1]))
        else:
            _, _, parts = min(candidates, key=lambda c: (c[0], c[1]))
        events.append([streams[g][heads[g]] for g in parts])
        for g in parts:
            heads[g] += 1
    return events


def timeline(
    ledger: Ledger,
    program: str,
    account: str,
    funds: Sequence[str],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    newest_first: bool = True,
    limit: int = 25,
    cursor: str | None = None,
) -> TimelinePage:
    """A page of ``account``'s events in ``funds``, newest (or oldest) first."""
    positions: dict[str, str | None] = _decode(cursor, funds) if cursor else dict.fromkeys(funds)

    def read(fund: str, position: str | None, count: int) -> EntryPage:
        return ledger.accounts.history(
            program,
            account,
            fund,
            newest_first=newest_first,
            since=since,
            until=until,
            limit=count,
            cursor=position,
        )

    streams: dict[str, list[Entry]] = {}
    after: dict[str, str | None] = {}
    for fund, position in positions.items():
        if position == _DONE:
            continue
        page = read(fund, position, limit)
        streams[fund] = list(page.entries)
        after[fund] = page.cursor
    truncated = {f for f, c in after.items() if c is not None}

    touched: dict[str, set[str]] = {}

    def funds_of(txn_id: str) -> set[str]:
        """The funds ``txn_id`` touches on this account (its record read once a page)."""
        if txn_id not in touched:
            legs = ledger.transactions.get(program, txn_id).legs
            touched[txn_id] = {leg.fund for leg in legs if leg.account == account}
        return touched[txn_id]

    groups = _take(streams, truncated, limit, newest_first, funds_of)
    shown = dict.fromkeys(streams, 0)
    for group in groups:
        for e in group:
            shown[e.fund] += 1

    def position_after(fund: str, count: int) -> str:
        """The fund's position after its first ``count`` entries read, read again.

        Newest first from the top, entries written since the first read come first
        and push it down: read again past them (a fund's sequence numbers have no
        gaps, so their number is the gap between the last entries of both reads)."""
        last = streams[fund][count - 1].seq
        again = read(fund, positions[fund], count)
        for _ in range(_REREADS):
            if not again.entries or again.entries[-1].seq == last:
                break
            count += abs(again.entries[-1].seq - last)
            again = read(fund, positions[fund], min(count, MAX_PAGE))
        return again.cursor or _DONE

    nxt = dict(positions)
    for fund, count in shown.items():
        if count == len(streams[fund]):
            nxt[fund] = after[fund] or _DONE
        elif count:
            nxt[fund] = position_after(fund, count)
    more = any(v != _DONE for v in nxt.values())
    events = [_event(group) for group in groups]
    return TimelinePage(events, _encode(nxt) if more and events else None)


def _event(entries: list[Entry]) -> Event:
    first = entries[0]
    metadata: dict[str, str] = {}
    for e in entries:
        metadata.update(e.metadata)
    return Event(
        txn_id=first.txn_id,
        type=first.type,
        created_at=min(e.created_at for e in entries),
        entries=tuple(entries),
        order_id=next((e.order_id for e in entries if e.order_id), None),
        description=next((e.description for e in entries if e.description), None),
        metadata=metadata,
    )
