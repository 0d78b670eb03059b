"""The event log: one item per event, with its place in the log.

An event's *position* orders the log: on SQLite the commit time in nanoseconds
taken under the engine's single-writer lock (so positions follow commit
order), on DynamoDB the stream record's sequence number. Both are written as
:data:`POSITION_DIGITS` digits and a per-change index, so they sort as strings.
Events of one account are committed in order (postings of an account conflict
on its head), so ordering by position keeps every account's order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import cast

from tallybook.store.port import Item, ItemStore
from tallybook.store.records.webhook_events import event_item
from tallybook.webhooks.events import derive

POSITION_DIGITS = 40
#: events are kept this long after they are logged (deliveries read them)
EVENT_RETENTION_DAYS = 30


def position(number: int, index: int) -> str:
    return f"{number:0{POSITION_DIGITS}d}.{index:03d}"


def retention_ttl() -> int:
    """The ``ttl`` of an event logged now, and of its deliveries."""
    return int(time.time()) + EVENT_RETENTION_DAYS * 86_400


def capture(images: Sequence[Item]) -> list[Item]:
    """The SQLite engine's change hook: event items for the items a transaction
    writes, inserted in that same transaction (never overwriting one that exists)."""
    events = [e for image in images for e in derive(image)]
    if not events:
        return []
    now = time.time_ns()
    ttl = retention_ttl()
    return [event_item(e, position(now, i), ttl, pending=True) for i, e in enumerate(events)]


def install(store: ItemStore) -> None:
    """Make a SQLite or in-memory engine write the event log with every change
    (a no-op on DynamoDB, whose stream is read instead)."""
    from tallybook.store.memory import MemoryStore
    from tallybook.store.sqlite import SqliteStore

    engine = unwrap(store)
    if isinstance(engine, SqliteStore | MemoryStore):
        engine.capture = capture


def unwrap(store: ItemStore) -> ItemStore:
    """The engine under test or metering wrappers (they keep it as ``inner``)."""
    while isinstance(getattr(store, "inner", None), ItemStore):
        store = cast(ItemStore, store.inner)  # type: ignore[attr-defined]
    return store
