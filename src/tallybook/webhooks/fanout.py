"""Fan-out: one delivery per (subscription, event), written once per event.

Each event is fanned out by one group of actions: the event leaves the
pending index (SQLite) or is put for the first time (DynamoDB, from the
stream), and every active subscription that wants its type gets a delivery
record and a queue row. The group's first action's condition makes it
idempotent: an event fanned out already is skipped, so a worker killed halfway
and run again neither loses nor doubles a delivery. Several events' groups go
in one storage transaction (up to :data:`MAX_TRANSACTION_ACTIONS` actions and
:data:`MAX_BATCH_BYTES` of event data); when some of them were fanned out
already, those groups are dropped and the rest written again.

Delivery records and queue rows are keyed by the event's log position, so a
subscription's queue is in log order, which keeps every account's order.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Sequence

from tallybook.domain.webhooks import ACTIVE, Event, Subscription
from tallybook.errors import ConditionFailed, TransactionConflict
from tallybook.store.port import MAX_TRANSACTION_ACTIONS, Action, ItemStore
from tallybook.store.records.webhook_events import (
    delivery_puts,
    event_put,
    fanned_out,
    pending_events,
)
from tallybook.webhooks.log import retention_ttl

__all__ = ["MAX_SUBSCRIPTIONS", "apply_groups", "fan_out_new", "fan_out_pending"]

#: subscriptions of one program (each event is fanned out in one transaction)
MAX_SUBSCRIPTIONS = (MAX_TRANSACTION_ACTIONS - 1) // 2
#: event data per fan-out transaction, at most (DynamoDB takes 4 MB per transaction)
MAX_BATCH_BYTES = 1_000_000


def _deliveries(event: Event, pos: str, subs: Sequence[Subscription], ttl: int) -> list[Action]:
    actions: list[Action] = []
    for sub in subs:
        if sub.status == ACTIVE and sub.wants(event.type):
            actions += delivery_puts(sub.program, sub.id, event, pos, ttl)
    return actions


def fan_out_pending(store: ItemStore, program: str, subs: Sequence[Subscription]) -> int:
    """Fan out the events waiting in the pending index (SQLite); how many."""
    done = 0
    while True:
        pending = pending_events(store, program, limit=200)
        if not pending:
            return done
        ttl = retention_ttl()
        groups = [
            (event, [fanned_out(program, event.id), *_deliveries(event, pos, subs, ttl)])
            for event, pos in pending
        ]
        done += apply_groups(store, groups)


def fan_out_new(
    store: ItemStore, events: Sequence[tuple[Event, str]], subs: dict[str, list[Subscription]]
) -> int:
    """Store events read from the stream and fan them out; how many were new."""
    ttl = retention_ttl()
    groups = [
        (
            event,
            [
                event_put(event, pos, ttl),
                *_deliveries(event, pos, subs.get(event.program, []), ttl),
            ],
        )
        for event, pos in events
    ]
    return apply_groups(store, groups)


def apply_groups(store: ItemStore, groups: Sequence[tuple[Event, list[Action]]]) -> int:
    """Write each event's group of actions, several per transaction, in order; how
    many were written (a group whose first condition fails was fanned out already)."""
    done = 0
    batch: list[list[Action]] = []
    size = 0
    seen: set[str] = set()
    for event, actions in groups:
        if event.id in seen:  # an item changed twice in a row: its first record wins
            continue
        seen.add(event.id)
        weight = len(json.dumps(event.data, default=str))
        full = sum(map(len, batch)) + len(actions) > MAX_TRANSACTION_ACTIONS
        if batch and (full or size + weight > MAX_BATCH_BYTES):
            done += _apply(store, batch)
            batch, size = [], 0
        batch.append(actions)
        size += weight
    if batch:
        done += _apply(store, batch)
    return done


def _apply(store: ItemStore, groups: list[list[Action]]) -> int:
    """Write ``groups`` in one transaction; those whose first condition fails (fanned
    out already) are dropped and the rest written again. How many were written."""
    conflicts = 0
    while groups:
        starts = list(itertools.accumulate((len(g) for g in groups[:-1]), initial=0))
        try:
            store.transact_write([a for g in groups for a in g])
            return len(groups)
        except ConditionFailed as exc:
            failed = {i for i, reason in enumerate(exc.reasons) if reason}
            if exc.index is not None:
                failed.add(exc.index)
            # a group fanned out already fails on its first action (and on the
            # puts of its deliveries, which exist too); any other failure is real
            done = {g for g, start in enumerate(starts) if start in failed}
            if not done or any(bisect.bisect_right(starts, i) - 1 not in done for i in failed):
                raise
            groups = [g for i, g in enumerate(groups) if i not in done]
        except TransactionConflict:
            conflicts += 1
            if conflicts >= 5:
                raise TransactionConflict(
                    "fanning out events kept conflicting; run the worker again"
                ) from None
    return 0
