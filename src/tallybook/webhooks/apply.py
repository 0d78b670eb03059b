"""Writing the fan-out: groups of actions, several per storage transaction, in order.

A :class:`Group` is what one event (or one piece of bookkeeping) writes. Its
first action's condition fails when it was written already (an event stored,
a unit parked or taken in by another worker), so a group found done is dropped
and the rest written again: a worker killed halfway and run again neither
loses nor doubles anything. A group may also move lane markers
(:mod:`tallybook.webhooks.order`); the moves of one transaction are merged per
lane (the first move's condition, the last move's value: a transaction cannot
touch an item twice) and written after the groups' actions. A marker whose
condition fails means another worker moved the lane meanwhile: :class:`Replan`
asks the caller to read the markers again and plan the rest anew.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from tallybook.domain.webhooks import ACTIVE, Event, Lane, Mark, Subscription
from tallybook.errors import ConditionFailed, TransactionConflict
from tallybook.store.port import MAX_TRANSACTION_ACTIONS, Action
from tallybook.store.port import ItemStore as Store
from tallybook.store.records.webhook_events import delivery_puts
from tallybook.store.records.webhook_order import mark_update
from tallybook.webhooks.log import retention_ttl

__all__ = ["MAX_BATCH_BYTES", "Group", "MarkMove", "Replan", "apply_groups", "deliveries"]

#: event data per fan-out transaction, at most (DynamoDB takes 4 MB per transaction)
MAX_BATCH_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class MarkMove:
    """Move ``lane``'s marker from ``expect`` (``None``: absent) to ``mark``."""

    lane: Lane
    expect: int | None
    mark: Mark


@dataclass(frozen=True, slots=True)
class Group:
    #: the first one's condition fails when the group was written already
    actions: list[Action]
    #: the event it stores (counted when written), if any
    event: Event | None = None
    marks: tuple[MarkMove, ...] = field(default=())


class Replan(Exception):
    """A lane marker moved under the plan; ``done`` events were written before."""

    def __init__(self, done: int) -> None:
        super().__init__("a lane marker moved meanwhile; plan again")
        self.done = done


def deliveries(event: Event, pos: str, subs: Sequence[Subscription], ttl: int) -> list[Action]:
    """The delivery records and queue rows of ``event`` at ``pos`` for ``subs``."""
    actions: list[Action] = []
    for sub in subs:
        if sub.status == ACTIVE and sub.wants(event.type):
            actions += delivery_puts(sub.program, sub.id, event, pos, ttl)
    return actions


def apply_groups(store: Store, groups: Sequence[Group]) -> int:
    """Write the groups in order, several per transaction; how many events were
    written (a group whose first condition fails was written already)."""
    done = 0
    batch: list[Group] = []
    lanes: dict[Lane, Mark] = {}
    size = actions = 0
    seen: set[str] = set()
    for group in groups:
        weight = 0
        if group.event is not None:
            if group.event.id in seen:  # an item changed twice in a row: its first record wins
                continue
            seen.add(group.event.id)
            weight = len(json.dumps(group.event.data, default=str))
        chained = True
        count = actions + len(lanes) + len(group.actions)
        for move in group.marks:
            if move.lane not in lanes:
                count += 1
            elif lanes[move.lane].seq != move.expect:
                chained = False
        full = count > MAX_TRANSACTION_ACTIONS
        if batch and (full or size + weight > MAX_BATCH_BYTES or not chained):
            done += _apply(store, batch, done)
            batch, lanes, size, actions = [], {}, 0, 0
        batch.append(group)
        for move in group.marks:
            lanes[move.lane] = move.mark
        size += weight
        actions += len(group.actions)
    if batch:
        done += _apply(store, batch, done)
    return done


def _merged(store: Store, groups: Sequence[Group]) -> list[Action]:
    first: dict[Lane, MarkMove] = {}
    last: dict[Lane, Mark] = {}
    for group in groups:
        for move in group.marks:
            first.setdefault(move.lane, move)
            last[move.lane] = move.mark
    now = store.ttl_now()
    ttl = retention_ttl(now)
    return [mark_update(lane, first[lane].expect, last[lane], now, ttl) for lane in first]


def _apply(store: Store, groups: list[Group], done_before: int) -> int:
    """Write ``groups`` in one transaction; those whose first condition fails (written
    already) are dropped and the rest written again. How many events were written."""
    conflicts = 0
    while groups:
        owner = [i for i, g in enumerate(groups) for _ in g.actions]
        firsts: dict[int, int] = {}  # a group's first action's index -> the group
        at = 0
        for i, g in enumerate(groups):
            if g.actions:
                firsts[at] = i
            at += len(g.actions)
        try:
            store.transact_write([a for g in groups for a in g.actions] + _merged(store, groups))
            return sum(1 for g in groups if g.event is not None)
        except ConditionFailed as exc:
            failed = {i for i, reason in enumerate(exc.reasons) if reason}
            if exc.index is not None:
                failed.add(exc.index)
            if any(i >= len(owner) for i in failed):
                raise Replan(done_before) from None
            # a group written already fails on its first action (and on the puts
            # of its deliveries, which exist too); any other failure is real
            dropped = {firsts[i] for i in failed if i in firsts}
            if not dropped or any(owner[i] not in dropped for i in failed):
                if any(g.marks for g in groups):
                    raise Replan(done_before) from None
                raise
            groups = [g for i, g in enumerate(groups) if i not in dropped]
        except TransactionConflict:
            conflicts += 1
            if conflicts >= 5:
                raise TransactionConflict(
                    "fanning out events kept conflicting; run the worker again"
                ) from None
    return 0
