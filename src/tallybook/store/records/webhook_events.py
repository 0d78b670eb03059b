"""How outbound events and their deliveries are stored.

Layout (see :mod:`tallybook.store.keys`):

- ``EVCHG#{program}`` / ``{position}``: on SQLite, a change events come from,
  written with it: the item's new ``image`` (the delivery worker derives its
  events, stores them and deletes the row);
- ``EVT#{program}#{event id}`` / ``EVT``: one event (``id``, ``type``,
  ``program``, ``accounts``, ``at``, ``position``, ``data``, ``ttl``), written
  when it is fanned out. (Versions before wrote it on SQLite with the change,
  waiting in the sparse ``gsi1`` partition ``EVPEND#{program}``.)
- ``WHDLV#{program}#{sub}`` / ``{position}``: the delivery record of one event
  for one subscription (``status``, ``attempts``, the ``last_*`` figures and the
  ``log`` of its last attempts, newest first), in log order;
- ``WHQ#{program}#{sub}`` / ``{position}``: its queue row while it is
  unfinished (``attempts`` is the row's version, ``next_us``, ``first_us``,
  ``resent``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from tallybook.domain.webhooks import PENDING, Attempt, Delivery, Event, Queued
from tallybook.store import keys
from tallybook.store.keys import NOTIFICATION_SOURCE as NOTIFICATION_SOURCE
from tallybook.store.keys import REPORT_SOURCE as REPORT_SOURCE
from tallybook.store.keys import TRANSACTION_SOURCE as TRANSACTION_SOURCE
from tallybook.store.port import (
    ITEM_ABSENT,
    ITEM_PRESENT,
    Action,
    Add,
    Compare,
    Delete,
    Exists,
    Item,
    ItemStore,
    Key,
    Put,
    Remove,
    Set,
    Update,
    Value,
)

_PENDING_INDEX = "gsi1"
_PENDING_PK, _PENDING_SK = "gsi1pk", "gsi1sk"


#: a log position: a number (SQLite: the commit time in ns; DynamoDB: the stream
#: record's sequence number) in this many digits, then an index, so they sort as strings
POSITION_DIGITS = 40
#: events one change can stand for, at most (its events' indexes are spaced so)
EVENTS_PER_CHANGE = 8


def position(number: int, index: int) -> str:
    return f"{number:0{POSITION_DIGITS}d}.{index:03d}"


def event_position(number: int, change: int, event: int) -> str:
    """The position of the ``event``-th event of the ``change``-th change at ``number``."""
    return position(number, change * EVENTS_PER_CHANGE + event)


# --- the ledger's items that events come from ----------------------------------


def is_source(image: Item) -> bool:
    """Whether events may be derived from ``image`` (by its key only: cheap)."""
    pk, sk = image.get("pk"), image.get("sk")
    return isinstance(pk, str) and isinstance(sk, str) and keys.change_source(pk, sk) is not None


def source_of(image: Item) -> tuple[str, Key] | None:
    """The kind (:func:`tallybook.store.keys.change_source`) and key of an item the
    ledger wrote, when events are derived from it; else ``None``."""
    pk, sk = image.get("pk"), image.get("sk")
    if not isinstance(pk, str) or not isinstance(sk, str):
        return None
    kind = keys.change_source(pk, sk)
    return None if kind is None else (kind, Key(pk, sk))


@dataclass(frozen=True, slots=True)
class Change:
    """A change events come from, logged on SQLite with the write that made it."""

    key: Key
    #: the item's new image (``None``: a transaction record no longer there)
    image: Item | None
    #: its log position: the number and the change's index under it
    number: int
    index: int


def change_item(image: Item, number: int, index: int, ttl: int) -> Item | None:
    """The change-log row of ``image``, the ``index``-th change at ``number`` (``None``
    for an image without a program, which stands for no event).

    A transaction record is never changed once written (it is put only where
    none is), so its row holds only its key and the worker reads the record;
    the rows of other items, which change, hold their new image."""
    program = image.get("program")
    if not isinstance(program, str):
        return None
    row: Item = {"pk": keys.event_changes(program), "sk": position(number, index), "ttl": ttl}
    pk, sk = image["pk"], image["sk"]
    if keys.change_source(cast(str, pk), cast(str, sk)) == TRANSACTION_SOURCE:
        row["ref"] = [pk, sk]
    else:
        row["image"] = cast(Value, image)
    return row


def pending_changes(store: ItemStore, program: str, limit: int) -> list[Change]:
    """The oldest changes of ``program`` whose events are not derived yet, with their
    images (a transaction record's read from the table, in one batch)."""
    rows = store.query(keys.event_changes(program), limit=limit).items
    refs = [Key(*cast(list[str], r["ref"])) for r in rows if "ref" in r]
    found = {(i["pk"], i["sk"]): i for i in store.batch_get(refs)} if refs else {}
    out: list[Change] = []
    for row in rows:
        sk = cast(str, row["sk"])
        number, _, index = sk.partition(".")
        ref = cast(list[str] | None, row.get("ref"))
        image = found.get((ref[0], ref[1])) if ref else cast(Item, row["image"])
        out.append(Change(Key(cast(str, row["pk"]), sk), image, int(number), int(index)))
    return out


def change_done(change: Change) -> Delete:
    """The change leaves the log (its events are stored)."""
    return Delete(change.key)


# --- events -------------------------------------------------------------------------


def event_item(event: Event, pos: str, ttl: int, *, pending: bool) -> Item:
    """The item of ``event`` at log position ``pos`` (``pending``: in the pending index)."""
    item: Item = {
        **keys.event(event.program, event.id).as_item(),
        "id": event.id,
        "type": event.type,
        "program": event.program,
        "accounts": list(event.accounts),
        "at": event.at,
        "position": pos,
        "data": event.data,
        "ttl": ttl,
    }
    if pending:
        item[_PENDING_PK] = keys.events_pending(event.program)
        item[_PENDING_SK] = pos
    return item


def event_put(event: Event, pos: str, ttl: int) -> Put:
    """Store an event read from the stream; one stored already fails the condition."""
    return Put(event_item(event, pos, ttl, pending=False), ITEM_ABSENT)


def event_from_item(item: Item) -> Event:
    d = cast(dict[str, Any], item)
    return Event(
        id=d["id"],
        type=d["type"],
        program=d["program"],
        accounts=tuple(d.get("accounts") or ()),
        at=d.get("at", ""),
        data=cast(dict[str, Value], d.get("data") or {}),
    )


def pending_events(store: ItemStore, program: str, limit: int) -> list[tuple[Event, str]]:
    """The oldest events of ``program`` an older version wrote and left to fan out
    (in the pending index), with their positions."""
    page = store.query(keys.events_pending(program), index=_PENDING_INDEX, limit=limit)
    return [(event_from_item(i), cast(str, i["position"])) for i in page.items]


def fanned_out(program: str, event_id: str) -> Update:
    """Take the event out of the pending index; fails when it is out already."""
    return Update(
        keys.event(program, event_id),
        (Remove(_PENDING_PK), Remove(_PENDING_SK)),
        Exists(_PENDING_PK),
    )


def read_events(store: ItemStore, program: str, ids: Sequence[str]) -> dict[str, Event]:
    """The events of ``ids`` still kept, by id."""
    found = store.batch_get([keys.event(program, e) for e in ids])
    return {e.id: e for e in map(event_from_item, found)}


# --- deliveries and queue rows ---------------------------------------------------------


def delivery_puts(program: str, sub_id: str, event: Event, pos: str, ttl: int) -> list[Action]:
    """The delivery record and the queue row of ``event`` for a subscription."""
    common: Item = {
        "event_id": event.id,
        "type": event.type,
        "accounts": list(event.accounts),
        "attempts": 0,
    }
    record: Item = {
        **keys.webhook_delivery(program, sub_id, pos).as_item(),
        **common,
        "status": PENDING,
        "at": event.at,
        "ttl": ttl,
    }
    queued: Item = {
        **keys.webhook_queued(program, sub_id, pos).as_item(),
        **common,
        "next_us": 0,
        "first_us": 0,
        "at": event.at,
    }
    return [Put(record, ITEM_ABSENT), Put(queued, ITEM_ABSENT)]


def _queued(item: Item) -> Queued:
    d = cast(dict[str, Any], item)
    return Queued(
        position=d["sk"],
        event_id=d["event_id"],
        type=d.get("type", ""),
        accounts=tuple(d.get("accounts") or ()),
        attempts=int(d.get("attempts") or 0),
        next_us=int(d.get("next_us") or 0),
        first_us=int(d.get("first_us") or 0),
        at=d.get("at", ""),
        resent=bool(d.get("resent")),
    )


def read_queue(store: ItemStore, program: str, sub_id: str, limit: int) -> list[Queued]:
    """The first ``limit`` rows of a subscription's queue, in log order."""
    page = store.query(keys.webhook_queue(program, sub_id), limit=limit)
    return [_queued(i) for i in page.items]


def _delivery(sub_id: str, item: Item) -> Delivery:
    d = cast(dict[str, Any], item)
    return Delivery(
        subscription=sub_id,
        position=d["sk"],
        event_id=d["event_id"],
        type=d["type"],
        accounts=tuple(d.get("accounts") or ()),
        status=d.get("status", PENDING),
        attempts=int(d.get("attempts") or 0),
        at=d.get("at", ""),
        last_code=d.get("last_code"),
        last_error=d.get("last_error"),
        last_latency_ms=d.get("last_latency_ms"),
        log=tuple(d.get("log") or ()),
    )


def read_delivery(store: ItemStore, program: str, sub_id: str, pos: str) -> Delivery | None:
    item = store.get(keys.webhook_delivery(program, sub_id, pos))
    return None if item is None else _delivery(sub_id, item)


def delivery_page(
    store: ItemStore, program: str, sub_id: str, limit: int, cursor: str | None
) -> tuple[list[Delivery], str | None]:
    """A subscription's delivery records, newest first, a page at a time."""
    page = store.query(
        keys.webhook_deliveries(program, sub_id), forward=False, limit=limit, cursor=cursor
    )
    return [_delivery(sub_id, i) for i in page.items], page.cursor


def resend_actions(program: str, delivery: Delivery) -> list[Action]:
    """Queue a delivery again (unless it is queued: the put's condition fails)."""
    queued: Item = {
        **keys.webhook_queued(program, delivery.subscription, delivery.position).as_item(),
        "event_id": delivery.event_id,
        "type": delivery.type,
        "accounts": list(delivery.accounts),
        "attempts": 0,
        "next_us": 0,
        "first_us": 0,
        "at": delivery.at,
        # its record has attempts already: they are read and kept
        "resent": True,
    }
    record = keys.webhook_delivery(program, delivery.subscription, delivery.position)
    return [Put(queued, ITEM_ABSENT), Update(record, (Set("status", PENDING),), ITEM_PRESENT)]


def _attempt_value(a: Attempt) -> dict[str, Value]:
    return {"at_us": a.at_us, "code": a.code, "latency_ms": a.latency_ms, "error": a.error}


def recorded_attempt(
    store: ItemStore,
    program: str,
    sub_id: str,
    row: Queued,
    attempt: Attempt,
    status: str | None,
    keep: int,
) -> Update:
    """Record ``attempt`` on the row's delivery record (the newest ``keep`` are kept),
    with its new ``status`` if any. A row never tried (and not resent) has no
    attempts on its record yet, so the record is read only for the others."""
    key = keys.webhook_delivery(program, sub_id, row.position)
    fresh = not row.attempts and not row.resent
    current = None if fresh else store.get(key)
    log = cast(list[Value], (current or {}).get("log") or [])
    ops: list[Set | Add] = [
        Set("log", [_attempt_value(attempt), *log][:keep]),
        Set("last_code", attempt.code),
        Set("last_error", attempt.error),
        Set("last_latency_ms", attempt.latency_ms),
        Set("last_at_us", attempt.at_us),
        Add("attempts", 1),
    ]
    if status is not None:
        ops.append(Set("status", status))
    return Update(key, tuple(ops))


def unqueue(program: str, sub_id: str, row: Queued) -> Delete:
    """The row leaves the queue, unless another worker moved it on meanwhile."""
    key = keys.webhook_queued(program, sub_id, row.position)
    return Delete(key, Compare("attempts", "=", row.attempts))


def requeue(program: str, sub_id: str, row: Queued, next_us: int, now_us: int) -> Update:
    """The row failed once more: try again at ``next_us`` (unless another worker
    moved it on meanwhile)."""
    updates: list[Set] = [Set("attempts", row.attempts + 1), Set("next_us", next_us)]
    if not row.first_us:
        updates.append(Set("first_us", now_us))
    key = keys.webhook_queued(program, sub_id, row.position)
    return Update(key, tuple(updates), Compare("attempts", "=", row.attempts))
