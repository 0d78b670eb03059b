"""Fan-out: one delivery per (subscription, event), written once per event.

Events come from new images: SQLite's change log (rows the ledger wrote with
its changes, :func:`tallybook.webhooks.log.capture`) or DynamoDB's stream.
Each event is fanned out by one group of actions: the event is put for the
first time, and every active subscription that wants its type gets a delivery
record and a queue row. The group's first action's condition makes it
idempotent: an event fanned out already is skipped, so a worker killed halfway
and run again neither loses nor doubles a delivery. A SQLite change leaves its
log in a group after its events' groups (an older version's events waiting in
the pending index leave it in their own group's first action). Several events' groups go
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
from tallybook.store.records.webhook_changes import change_done, event_position, pending_changes
from tallybook.store.records.webhook_events import (
    delivery_puts,
    event_put,
    fanned_out,
    pending_events,
)
from tallybook.webhooks.events import derive
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
    """Derive and fan out the events of the changes SQLite logged; how many events."""
    done = _fan_out_legacy(store, program, subs)
    while True:
        changes = pending_changes(store, program, limit=100)
        if not changes:
            return done
        ttl = retention_ttl()
        groups: list[tuple[Event | None, list[Action]]] = []
        for change in changes:
            for i, event in enumerate(derive(change.image) if change.image else []):
                pos = event_position(change.number, change.index, i)
                groups.append(
                    (event, [event_put(event, pos, ttl), *_deliveries(event, pos, subs, ttl)])
                )
            groups.append((None, [change_done(change)]))
        done += apply_groups(store, groups)


def _fan_out_legacy(store: ItemStore, program: str, subs: Sequence[Subscription]) -> int:
    """Fan out the events an older version wrote with their changes (pending index)."""
    done = 0
    while pending := pending_events(store, program, limit=200):
        ttl = retention_ttl()
        groups: list[tuple[Event | None, list[Action]]] = [
            (event, [fanned_out(program, event.id), *_deliveries(event, pos, subs, ttl)])
            for event, pos in pending
        ]
        done += apply_groups(store, groups)
    return done


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


def apply_groups(store: ItemStore, groups: Sequence[tuple[Event | None, list[Action]]]) -> int:
    """Write each event's group of actions, several per transaction, in order; how
    many events were written (a group whose first condition fails was fanned out
    already). A group without an event is bookkeeping, written in its turn."""
    done = 0
    batch: list[tuple[bool, list[Action]]] = []
    size = 0
    seen: set[str] = set()
    for event, actions in groups:
        weight = 0
        if event is not None:
            if event.id in seen:  # an item changed twice in a row: its first record wins
                continue
            seen.add(event.id)
            weight = len(json.dumps(event.data, default=str))
        full = sum(len(g) for _, g in batch) + len(actions) > MAX_TRANSACTION_ACTIONS
        if batch and (full or size + weight > MAX_BATCH_BYTES):
            done += _apply(store, batch)
            batch, size = [], 0
        batch.append((event is not None, actions))
        size += weight
    if batch:
        done += _apply(store, batch)
    return done


def _apply(store: ItemStore, groups: list[tuple[bool, list[Action]]]) -> int:
    """Write ``groups`` in one transaction; those whose first condition fails (fanned
    out already) are dropped and the rest written again. How many groups that are
    events (``True``) were written."""
    conflicts = 0
    while groups:
        starts = list(itertools.accumulate((len(g) for _, g in groups[:-1]), initial=0))
        try:
            store.transact_write([a for _, g in groups for a in g])
            return sum(1 for counted, _ in groups if counted)
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
