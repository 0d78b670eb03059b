"""Finding and dismissing stored notifications (active rows and their history).

A dismissal deletes the active row ``N#A#{type}`` on condition it is still
the same notification (by id) and records on its history row who dismissed
it and why, with the account's next change number (the head's, on condition
its version is unchanged), in one storage transaction. A history row already
past retention (its TTL passed) is left alone: the active row is still removed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import cast

from tallybook.domain.notifications import DismissReason, Notification, Status
from tallybook.errors import ConditionFailed, TransactionConflict
from tallybook.store.port import Action, Item, ItemStore, Update, Value
from tallybook.store.records import notifications as items
from tallybook.store.records.codec import to_us
from tallybook.store.records.ledger import Changes, read_head


def status_of(reason: str) -> Status:
    return Status.SUPERSEDED if reason == DismissReason.SUPERSEDED else Status.DISMISSED


def mark(item: Item, now: datetime, by: str, reason: str, number: Value = None) -> Update:
    """Record on ``item``'s history row that it was superseded or dismissed (taking
    the account's change ``number``, when given)."""
    return items.dismissal_update(item, status_of(reason), now, by, reason, number)


def find(
    store: ItemStore, program: str, account: str, nid: str, us: int, now: datetime
) -> tuple[Item | None, Item | None] | None:
    """(history row, active row if still active) of a notification, or None."""
    hist = items.read_history(store, program, account, us, nid)
    if hist is not None and not items.live(hist, now):
        hist = None
    if hist is not None:
        if hist.get("status") != Status.ACTIVE:
            return hist, None
        active = items.read_active(store, program, account, cast(str, hist["type"]))
    else:
        # history past retention while still active: look among the actives
        rows = items.active_rows(store, program, account)
        active = next((i for i in rows if i.get("id") == nid), None)
    if active is not None and (active.get("id") != nid or not items.live(active, now)):
        active = None
    if hist is None and active is None:
        return None
    return hist, active


def dismiss_active(
    store: ItemStore, active: Item, now: datetime, by: str, reason: str
) -> Notification | None:
    """Delete ``active`` and mark its history; ``None`` if it or the account's head
    changed meanwhile. The dismissal takes the account's next change number."""
    with_history = True
    program, account = cast(str, active["program"]), cast(str, active["account"])
    for _ in range(2):
        actions: list[Action] = [items.active_delete(active)]
        if with_history:
            changes = Changes((items.dismissed_event(active),), to_us(now))
            (number,), taking = changes.taken_on(program, read_head(store, program, account))
            actions.append(mark(active, now, by, reason, number))
            if taking is not None:
                actions.append(taking)
        try:
            store.transact_write(actions)
        except ConditionFailed as exc:
            if exc.index == 1 and exc.reasons[0] is None:
                with_history = False
                continue
            return None
        except TransactionConflict:
            return None
        return replace(
            items.from_item(active, now),
            status=status_of(reason),
            dismissed_at=now,
            dismissed_by=by,
            dismiss_reason=str(reason),
        )
    return None
