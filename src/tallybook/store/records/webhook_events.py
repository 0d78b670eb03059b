"""How outbound events and their deliveries are stored.

Layout (see :mod:`tallybook.store.keys`):

- ``EVT#{program}#{event id}`` / ``EVT``: one event (``id``, ``type``,
  ``program``, ``accounts``, ``at``, ``position``, ``data``, ``ttl``), written
  when it is fanned out. (Versions before wrote it on SQLite with the change,
  waiting in the sparse ``gsi1`` partition ``EVPEND#{program}``.) The log
  positions and SQLite's change log are :mod:`~tallybook.store.records.webhook_changes`.
- ``WHDLV#{program}#{sub}`` / ``{position}``: the delivery record of one event
  for one subscription (``status``, ``attempts``, the ``last_*`` figures and the
  ``log`` of its last attempts, newest first), in log order;
- ``WHQ#{program}#{sub}`` / ``{position}``: its queue row while it is
  unfinished (``attempts`` is the row's version, ``next_us``, ``first_us``,
  ``resent``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from tallybook.domain.webhooks import PENDING, Attempt, Delivery, Event, Queued
from tallybook.store import keys
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
    Put,
    Remove,
    Set,
    Update,
    Value,
)

_PENDING_INDEX = "gsi1"
_PENDING_PK, _PENDING_SK = "gsi1pk", "gsi1sk"


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


def stored_positions(store: ItemStore, program: str, ids: Sequence[str]) -> dict[str, str]:
    """The log positions of the events of ``ids`` that are stored, by id."""
    found = store.batch_get([keys.event(program, e) for e in ids])
    return {cast(str, i["id"]): cast(str, i["position"]) for i in found}


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
    return read_queue_page(store, program, sub_id, limit)[0]


def read_queue_page(
    store: ItemStore, program: str, sub_id: str, limit: int, cursor: str | None = None
) -> tuple[list[Queued], str | None]:
    """``limit`` rows of a subscription's queue in log order, from ``cursor``, and
    the cursor of the rows after them (``None`` at the end)."""
    page = store.query(keys.webhook_queue(program, sub_id), limit=limit, cursor=cursor)
    return [_queued(i) for i in page.items], page.cursor


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
