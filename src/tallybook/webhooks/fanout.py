"""Fan-out: one delivery per (subscription, event), written once per event.

Events come from new images: SQLite's change log (rows the ledger wrote with
its changes, :func:`tallybook.webhooks.log.capture`) or DynamoDB's stream.
Each event is fanned out by one group of actions (:mod:`tallybook.webhooks.apply`):
the event is put for the first time, and every active subscription that wants
its type gets a delivery record and a queue row. The group's first action's
condition makes it idempotent: an event fanned out already is skipped, so a
worker killed halfway and run again neither loses nor doubles a delivery. A
SQLite change leaves its log in a group after its events' groups (an older
version's events waiting in the pending index leave it in their own group's
first action).

Delivery records and queue rows are keyed by the event's log position, so a
subscription's queue is in log order. Transaction events are taken in lane
order first (:mod:`tallybook.webhooks.order`): a transaction waits (parked)
until the transactions before it on its accounts' funds and its hold are in,
and sorts after them, so every account's order holds on any number of shards.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from tallybook.domain.webhooks import Event, Subscription
from tallybook.errors import TransactionConflict
from tallybook.store.port import MAX_TRANSACTION_ACTIONS, ItemStore
from tallybook.store.records.webhook_changes import (
    Change,
    change_done,
    event_position,
    pending_changes,
)
from tallybook.store.records.webhook_events import fanned_out, pending_events
from tallybook.webhooks.apply import Group, Replan, apply_groups, deliveries
from tallybook.webhooks.events import derive
from tallybook.webhooks.log import retention_ttl
from tallybook.webhooks.order import (
    MOVING,
    REPLANS,
    Ordering,
    Unit,
    release,
    sweep,
    take_in,
    units_of,
)

__all__ = [
    "MAX_SUBSCRIPTIONS",
    "change_events",
    "fan_out_new",
    "fan_out_pending",
    "sweep_parked",
]

#: subscriptions of one program (each event is fanned out in one transaction)
MAX_SUBSCRIPTIONS = (MAX_TRANSACTION_ACTIONS - 1) // 2


def _now_us() -> int:
    return time.time_ns() // 1000


def fan_out_pending(store: ItemStore, program: str, subs: Sequence[Subscription]) -> int:
    """Derive and fan out the events of the changes SQLite logged; how many events."""
    done = _fan_out_legacy(store, program, subs)
    by_program = {program: subs}
    replans = 0
    while changes := pending_changes(store, program, limit=100):
        ordering = Ordering(store, by_program, _now_us())
        planned: list[tuple[list[Unit], Group]] = []
        for change in changes:
            planned.append((units_of(change_events(change)), Group([change_done(change)])))
        ordering.load(unit for units, _ in planned for unit in units)
        groups: list[Group] = []
        for units, done_group in planned:
            for unit in units:
                groups += ordering.groups(unit)
            groups.append(done_group)
        try:
            done += apply_groups(store, groups)
        except Replan as exc:
            done += exc.done
            replans += 1
            if replans >= REPLANS:
                raise TransactionConflict(MOVING) from None
        done += release(store, by_program, _now_us(), ordering.moved)
    return done + sweep(store, by_program, _now_us(), [program])


def change_events(change: Change) -> list[tuple[Event, str]]:
    """The events a change SQLite logged stands for, each with its log position."""
    events = derive(change.image) if change.image else []
    return [(e, event_position(change.number, change.index, i)) for i, e in enumerate(events)]


def _fan_out_legacy(store: ItemStore, program: str, subs: Sequence[Subscription]) -> int:
    """Fan out the events an older version wrote with their changes (pending index)."""
    done = 0
    while pending := pending_events(store, program, limit=200):
        ttl = retention_ttl(store.ttl_now())
        groups = [
            Group([fanned_out(program, event.id), *deliveries(event, pos, subs, ttl)], event)
            for event, pos in pending
        ]
        done += apply_groups(store, groups)
    return done


def fan_out_new(
    store: ItemStore,
    events: Sequence[tuple[Event, str]],
    subs: Mapping[str, Sequence[Subscription]],
) -> int:
    """Store events read from the stream and fan them out, in lane order; how many
    were new (parked ones count when they are taken in)."""
    done, moved = take_in(store, subs, _now_us(), units_of(events))
    return done + release(store, subs, _now_us(), moved)


def sweep_parked(store: ItemStore, subs: Mapping[str, Sequence[Subscription]]) -> int:
    """Take in the parked units that are ready (a worker killed between taking a
    unit in and releasing its successor left them); how many events. Each pass
    of the worker does it."""
    return sweep(store, subs, _now_us(), subs)
