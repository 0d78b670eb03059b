"""The event log: one item per event, with its place in the log.

An event's *position* orders the log: on SQLite the commit time in nanoseconds
taken under the engine's single-writer lock (so positions follow commit
order), on DynamoDB the stream record's sequence number. Both are written as
:data:`~tallybook.store.records.webhook_events.POSITION_DIGITS` digits and a
per-change index, so they sort as strings. Events of one account are
committed in order (postings of an account conflict on its head), so ordering
by position keeps every account's order.

On SQLite the writing transaction logs only the *changes* events come from
(:func:`capture`: the new image of each transaction record, notification
history row and report row, picked by its key); the delivery worker derives
their events when it fans them out (:func:`tallybook.webhooks.fanout.fan_out_pending`),
as it does for DynamoDB's stream records. Deriving is pure, so doing it later
gives the same events, and the posting pays only for one row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import cast

from tallybook.store.port import Item, ItemStore
from tallybook.store.records.webhook_changes import change_item, is_source

#: events are kept this long after they are logged (deliveries read them), and
#: so are changes not yet derived
EVENT_RETENTION_DAYS = 30


def retention_ttl(now: int) -> int:
    """The ``ttl`` of an event logged at ``now``, and of its deliveries: ``now`` is
    the store's :meth:`~tallybook.store.port.ItemStore.ttl_now`, the time its TTLs
    are read on (a ledger's ``ManualClock``), so they live as long on any clock."""
    return now + EVENT_RETENTION_DAYS * 86_400


def capture(images: Sequence[Item], ttl_now: Callable[[], int] | None = None) -> list[Item]:
    """The SQLite engine's change hook: the change-log rows of the items a transaction
    writes that events come from, inserted in that same transaction (``ttl_now``:
    the engine's, the wall clock if not given)."""
    sources = [image for image in images if is_source(image)]
    if not sources:
        return []
    now = time.time_ns()
    ttl = retention_ttl(int(time.time()) if ttl_now is None else ttl_now())
    rows = (change_item(image, now, i, ttl) for i, image in enumerate(sources))
    return [row for row in rows if row is not None]


def install(store: ItemStore) -> None:
    """Make a SQLite or in-memory engine write the event log with every change
    (a no-op on DynamoDB, whose stream is read instead)."""
    from tallybook.store.memory import MemoryStore
    from tallybook.store.sqlite import SqliteStore

    engine = unwrap(store)
    if isinstance(engine, SqliteStore | MemoryStore):
        engine.capture = partial(capture, ttl_now=engine.ttl_now)


def unwrap(store: ItemStore) -> ItemStore:
    """The engine under test or metering wrappers (they keep it as ``inner``)."""
    while isinstance(getattr(store, "inner", None), ItemStore):
        store = cast(ItemStore, store.inner)  # type: ignore[attr-defined]
    return store
