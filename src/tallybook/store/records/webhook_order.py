"""How the fan-out keeps each account's events in order: lane markers and parked units.

A *lane* is a sequence the ledger numbers without gaps: an account (its
changes' ``account_seq``, 1, 2, ...), or, for records written before accounts
were numbered, an account's fund (its entries' ``seq``) or a hold (1: placed,
2: settled). Layout:

- ``WHORD#{program}#{account}`` / ``A`` or ``F#{fund}``, and
  ``WHORDH#{program}#{hold}`` / ``H``: a lane's marker, the ``seq`` of the last
  unit taken in on it and that unit's last log ``position`` (``ttl``: kept while
  the lane moves; an absent account marker is read back from the unit's
  ``account_previous``, a fund's or hold's from the ledger, see
  :func:`entry_before` and :func:`transaction_before`);
- ``WHPARK#{program}`` / ``A#{account}#{seq}``, ``F#{account}#{fund}#{seq}`` or
  ``H#{hold}#{seq}``: a parked unit (the events of one item, with their log
  positions, and ``parked_us``), waiting on that lane for ``seq - 1``: taking
  that one in looks its successor up by key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tallybook.domain.webhooks import ACCOUNT_LANE, FUND_LANE, Event, Lane, Mark
from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    ITEM_PRESENT,
    Compare,
    Condition,
    Delete,
    Item,
    ItemStore,
    Key,
    Put,
    Set,
    SortCondition,
    Update,
    Value,
    any_of,
)
from tallybook.store.records.codec import parse_iso, to_us
from tallybook.store.records.ledger import transaction_key
from tallybook.store.records.webhook_events import event_from_item, event_item

#: history entries read per page when an absent marker is read back from the ledger
_PAGE = 100
#: an entry's time may run ahead of its transaction's by this much (same-µs postings)
_ENTRY_SLACK_US = 86_400 * 1_000_000


def marker_key(lane: Lane) -> Key:
    if lane.kind == ACCOUNT_LANE:
        return keys.webhook_account_marker(lane.program, lane.id)
    if lane.kind == FUND_LANE:
        return keys.webhook_fund_marker(lane.program, lane.id, lane.fund)
    return keys.webhook_hold_marker(lane.program, lane.id)


def read_marks(store: ItemStore, lanes: Iterable[Lane]) -> dict[Lane, Mark]:
    """The markers of ``lanes`` that exist (an expired one counts as absent)."""
    by_key = {marker_key(lane): lane for lane in lanes}
    out: dict[Lane, Mark] = {}
    if not by_key:
        return out
    for item in store.batch_get(list(by_key)):
        lane = by_key[Key(cast(str, item["pk"]), cast(str, item["sk"]))]
        out[lane] = Mark(int(cast(int, item["seq"])), cast(str, item["position"]))
    return out


def mark_update(lane: Lane, expect: int | None, mark: Mark, now: int, ttl: int) -> Update:
    """Move a lane's marker on to ``mark``, on condition it is at ``expect`` (``None``:
    absent, or expired and not yet removed)."""
    condition: Condition
    if expect is None:
        condition = any_of(ITEM_ABSENT, Compare("ttl", "<", now))
    else:
        condition = Compare("seq", "=", expect)
    updates = (Set("seq", mark.seq), Set("position", mark.position), Set("ttl", ttl))
    return Update(marker_key(lane), updates, condition)


# --- parked units ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parked:
    """A unit waiting for its predecessor on one lane: its events with their log
    positions, and where it waits (``key``: the lane and the unit's ``seq`` there)."""

    key: str
    events: tuple[tuple[Event, str], ...]
    parked_us: int


def _parked_partition(program: str) -> str:
    return keys.webhook_parked(program)


def parked_at(lane: Lane, seq: int) -> str:
    """Where a unit waiting on ``lane`` at ``seq`` is parked (its sort key)."""
    if lane.kind == ACCOUNT_LANE:
        return keys.webhook_parked_on_account(lane.id, seq)
    if lane.kind == FUND_LANE:
        return keys.webhook_parked_on_fund(lane.id, lane.fund, seq)
    return keys.webhook_parked_on_hold(lane.id, seq)


def parked_put(
    program: str, at: str, events: Sequence[tuple[Event, str]], parked_us: int, ttl: int
) -> Put:
    """Park a unit at ``at``; one parked there already (the same unit: a record read
    again) fails the condition."""
    stored: list[Value] = []
    for e, pos in events:
        full = event_item(e, pos, ttl, pending=False)
        stored.append({k: v for k, v in full.items() if k not in ("pk", "sk", "ttl")})
    item: Item = {
        **Key(_parked_partition(program), at).as_item(),
        "events": stored,
        "parked_us": parked_us,
    }
    return Put(item, ITEM_ABSENT)


def parked_delete(program: str, at: str) -> Delete:
    """The parked unit leaves (taken in, or parked on another lane); fails when
    another worker moved it."""
    return Delete(Key(_parked_partition(program), at), ITEM_PRESENT)


def _parked(item: Item) -> Parked:
    stored = cast(list[dict[str, Any]], item.get("events") or [])
    events = tuple((event_from_item(cast(Item, e)), cast(str, e["position"])) for e in stored)
    return Parked(cast(str, item["sk"]), events, int(cast(int, item["parked_us"])))


def read_parked(store: ItemStore, program: str) -> list[Parked]:
    """Every parked unit of ``program``."""
    return [_parked(i) for i in store.query_all(_parked_partition(program))]


def any_parked(store: ItemStore, program: str) -> bool:
    return bool(store.query(_parked_partition(program), limit=1).items)


def read_parked_at(store: ItemStore, program: str, at: Iterable[str]) -> list[Parked]:
    """The units parked at ``at`` (where successors of what was taken in wait)."""
    wanted = [Key(_parked_partition(program), a) for a in dict.fromkeys(at)]
    return [_parked(i) for i in store.batch_get(wanted)] if wanted else []


# --- reading a lane's predecessor back from the ledger ---------------------------------


@dataclass(frozen=True, slots=True)
class Predecessor:
    """The transaction before a unit on a lane: its key (events derive their ids
    from it) and when it was created (µs)."""

    key: Key
    created_us: int


def entry_before(
    store: ItemStore, program: str, account: str, fund: str, seq: int, at_us: int
) -> Predecessor | None:
    """The transaction of the fund's entry ``seq - 1`` (``None`` when there is no such
    entry). Entries sort by time and ``seq`` alike; the newest are read first, from
    a bound past the unit's own entry (``at_us``, its transaction's time)."""
    partition = keys.account_partition(program, account)
    low = keys.entry_prefix(fund)
    high = keys.entry_time_bound(fund, at_us + _ENTRY_SLACK_US)
    cursor: str | None = None
    while True:
        page = store.query(
            partition,
            SortCondition.between(low, high),
            forward=False,
            limit=_PAGE,
            cursor=cursor,
        )
        for item in page.items:
            found = int(cast(int, item.get("seq") or 0))
            if found < seq - 1:
                return None
            if found == seq - 1:
                txn = transaction_key(program, cast(str, item["txn_id"]))
                return Predecessor(txn, to_us(parse_iso(cast(str, item["created_at"]))))
        cursor = page.cursor
        if cursor is None:
            return None


def transaction_before(store: ItemStore, program: str, txn_id: str) -> Predecessor | None:
    """The transaction ``txn_id`` (a hold's placing), if it is kept."""
    key = transaction_key(program, txn_id)
    item = store.get(key)
    if item is None or not isinstance(item.get("created_at"), str):
        return None
    return Predecessor(key, to_us(parse_iso(cast(str, item["created_at"]))))
