"""Fan-out: one delivery per (subscription, event), written once per event.

Each event is fanned out in one storage transaction: the event leaves the
pending index (SQLite) or is put for the first time (DynamoDB, from the
stream), and every active subscription that wants its type gets a delivery
record and a queue row. The first action's condition makes the whole step
idempotent: an event fanned out already is skipped, so a worker killed halfway
and run again neither loses nor doubles a delivery.

Delivery records and queue rows are keyed by the event's log position, so a
subscription's queue is in log order, which keeps every account's order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import cast

from tallybook.errors import ConditionFailed, TransactionConflict
from tallybook.store import keys
from tallybook.store.port import (
    MAX_TRANSACTION_ACTIONS,
    Action,
    Exists,
    Item,
    ItemStore,
    NotExists,
    Put,
    Remove,
    Update,
)
from tallybook.webhooks.events import Event
from tallybook.webhooks.log import EVENT_RETENTION_DAYS, event_from_item, event_item
from tallybook.webhooks.subscriptions import ACTIVE, Subscription

#: subscriptions of one program (each event is fanned out in one transaction)
MAX_SUBSCRIPTIONS = (MAX_TRANSACTION_ACTIONS - 1) // 2
PENDING = "pending"


def delivery_items(sub: Subscription, event: Event, pos: str) -> tuple[Item, Item]:
    """The delivery record and the queue row of ``event`` for ``sub``."""
    ttl = int(time.time()) + EVENT_RETENTION_DAYS * 86_400
    common: Item = {
        "event_id": event.id,
        "type": event.type,
        "accounts": list(event.accounts),
        "attempts": 0,
    }
    record: Item = {
        **keys.webhook_delivery(sub.program, sub.id, pos).as_item(),
        **common,
        "status": PENDING,
        "at": event.at,
        "ttl": ttl,
    }
    queued: Item = {
        **keys.webhook_queued(sub.program, sub.id, pos).as_item(),
        **common,
        "next_us": 0,
        "first_us": 0,
        "at": event.at,
    }
    return record, queued


def _deliveries(event: Event, pos: str, subs: Sequence[Subscription]) -> list[Action]:
    actions: list[Action] = []
    for sub in subs:
        if sub.status != ACTIVE or not sub.wants(event.type):
            continue
        record, queued = delivery_items(sub, event, pos)
        actions += [Put(record, NotExists("pk")), Put(queued, NotExists("pk"))]
    return actions


def fan_out_pending(store: ItemStore, program: str, subs: Sequence[Subscription]) -> int:
    """Fan out the events waiting in the pending index (SQLite); how many."""
    done = 0
    while True:
        page = store.query(keys.events_pending(program), index="gsi1", limit=200)
        if not page.items:
            return done
        for item in page.items:
            event = event_from_item(item)
            pos = cast(str, item["position"])
            first = Update(
                keys.event(program, event.id),
                (Remove("gsi1pk"), Remove("gsi1sk")),
                Exists("gsi1pk"),
            )
            if _apply(store, [first, *_deliveries(event, pos, subs)]):
                done += 1


def fan_out_new(
    store: ItemStore, events: Sequence[tuple[Event, str]], subs: dict[str, list[Subscription]]
) -> int:
    """Store events read from the stream and fan them out; how many were new."""
    done = 0
    for event, pos in events:
        first = Put(event_item(event, pos, pending=False), NotExists("pk"))
        if _apply(store, [first, *_deliveries(event, pos, subs.get(event.program, []))]):
            done += 1
    return done


def _apply(store: ItemStore, actions: list[Action]) -> bool:
    """False when the event was fanned out already (its first condition failed)."""
    for _ in range(5):
        try:
            store.transact_write(actions)
            return True
        except ConditionFailed as exc:
            if exc.index == 0:
                return False
            raise
        except TransactionConflict:
            continue
    raise TransactionConflict("fanning out an event kept conflicting; run the worker again")
