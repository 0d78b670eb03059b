"""Adding a notification: one storage transaction, retried on conflicts.

The transaction holds the idempotency row (when the add has a key; condition:
absent), the new active row ``N#A#{type}`` (condition: the active row is
still the one read, by id, or absent: invariant 6), the newcomer's history
row, the superseded one's history update (dismissed by the newcomer's id) and,
per type the rule dismisses, a delete of its active row plus its history
update, and the account's head (condition: its version is unchanged): the
raising and each dismissal it causes take the account's next change numbers,
which order the account's webhook events. A lost race fails a condition and
the whole add is planned again.
Delivery, when the rule asks for it, runs after the commit and is recorded on
the history row. An unlisted notification has no active row: it deletes the
active one of its type instead (one listed before the type's rule changed).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from tallybook.domain.model import Account, Program
from tallybook.domain.notifications import (
    DismissReason,
    Notification,
    Status,
    created_us_of,
    make_id,
    parse_rules,
)
from tallybook.domain.postings import fingerprint
from tallybook.errors import (
    ConditionFailed,
    IdempotencyConflict,
    TallybookError,
    TooManyRetries,
    TransactionConflict,
    ValidationError,
)
from tallybook.retry import RetryPolicy, retrying
from tallybook.services.clock import Clock
from tallybook.services.notifications.delivery import Delivery
from tallybook.services.notifications.dismiss import mark
from tallybook.store.port import (
    Action,
    Item,
    ItemStore,
)
from tallybook.store.records import notifications as items
from tallybook.store.records.codec import from_us, iso, to_us
from tallybook.store.records.ledger import Changes, read_head

log = logging.getLogger("tallybook.notifications")


class Notifier(Protocol):
    """What adding uses of the notifications service (``NotificationService``)."""

    store: ItemStore
    clock: Clock
    retry_policy: RetryPolicy
    delivery: Delivery


def add(
    service: Notifier,
    program: Program,
    account: str,
    type_: str,
    payload: dict[str, Any],
    key: str | None,
    expires_at: datetime | None,
    head: Account | None = None,
) -> Notification:
    """Add for ``program`` without checking the account (callers check it).

    ``head``: the account's head as the caller just read it, used by the first
    attempt instead of reading it again (a stale one fails its version
    condition, and the retry reads it afresh)."""
    store = service.store
    rules = parse_rules(program.settings.get("notifications"), stored=True)
    rule = rules.rule(type_)
    fp = fingerprint(
        {
            "type": type_,
            "payload": payload,
            "expires_at": iso(expires_at) if expires_at else None,
        }
    )
    # an unlisted one is never active, yet it supersedes one of its type still
    # active (listed before its rule changed): the newer one is what holds
    targets = [type_, *(t for t in rule.dismisses if t != type_)]
    no_history: set[str] = set()
    with retrying(service.retry_policy) as tries:
        for _ in tries:
            now = service.clock.now()
            current = _actives(service, program.id, account, targets)
            prev = current.get(type_)
            created_us = max(to_us(now), items.created_us(prev) + 1 if prev else 0)
            created = from_us(created_us)
            if expires_at is not None and items.epoch(expires_at) <= items.epoch(created):
                # it would supersede the active one and be gone itself (the store
                # hides it from the whole second its expires_at falls in): refused,
                # unless it is the replay of an add made while it was still ahead
                replayed = _replay(service, program.id, account, key, fp, now) if key else None
                if replayed is not None:
                    return replayed
                when = "is not in the future" if expires_at <= created else "is in this second"
                raise ValidationError(
                    f"expires_at {iso(expires_at)} {when} (now {iso(created)}): a notification "
                    "expires from the whole second its expires_at falls in"
                )
            expiry = expires_at
            if expiry is None and rule.expires_after_days is not None:
                expiry = created + timedelta(days=rule.expires_after_days)
            n = Notification(
                program=program.id,
                account=account,
                id=make_id(created_us, secrets.token_hex(5)),
                type=type_,
                payload=payload,
                created_at=created,
                status=Status.ACTIVE if rule.listed else Status.UNLISTED,
                listed=rule.listed,
                expires_at=expiry,
                source=key,
            )
            ttl = items.epoch(created) + rules.retention_days * 86_400
            marked = [
                old
                for old in current.values()
                if cast(str, old["id"]) not in no_history and items.live(old, now)
            ]
            # the raising, then each dismissal it causes, take the account's next numbers
            if head is None:
                head = read_head(store, program.id, account)
            changes = Changes(
                (
                    items.raised_event(n, created_us),
                    *(items.dismissed_event(old) for old in marked),
                ),
                to_us(now),
            )
            numbers, taking = changes.taken_on(program.id, head)
            actions: list[Action] = []
            if key is not None:
                actions.append(items.idempotency_put(n, key, fp, ttl))
            if rule.listed:
                actions.append(items.active_put(n, created_us, prev))
            actions.append(items.history_put(n, created_us, ttl, numbers[0]))
            number_of = {cast(str, old["id"]): numbers[1 + i] for i, old in enumerate(marked)}
            history_updates: dict[int, str] = {}
            for t, old in current.items():
                superseded = t == type_
                if not superseded or not rule.listed:  # else the newcomer's put replaces it
                    actions.append(items.active_delete(old))
                old_id = cast(str, old["id"])
                if old_id not in number_of:
                    continue
                history_updates[len(actions)] = old_id
                reason = DismissReason.SUPERSEDED if superseded else DismissReason.RULE
                actions.append(mark(old, now, n.id, reason, number_of[old_id]))
            if taking is not None:
                actions.append(taking)
            head = None  # a retry reads it afresh
            try:
                store.transact_write(actions)
            except ConditionFailed as exc:
                if key is not None and exc.index == 0:
                    replayed = _replay(service, program.id, account, key, fp, now)
                    if replayed is not None:
                        return replayed
                    continue
                failed = {i for i, r in enumerate(exc.reasons) if r}
                if failed and failed <= history_updates.keys():
                    # those history rows are past retention: dismiss without them
                    no_history.update(history_updates[i] for i in failed)
                continue
            except TransactionConflict:
                continue
            break
        else:
            raise TooManyRetries(
                f"adding {type_} to {account} kept conflicting with concurrent writers; retry it"
            )
    # delivery is an operation of its own, outside the retry budget of the add
    return deliver(service, n, created_us) if rule.deliver else n


def _actives(service: Notifier, program: str, account: str, types: list[str]) -> dict[str, Item]:
    found = items.read_actives(service.store, program, account, types)
    # rows past expiry by the ledger clock but not yet by the store's are kept:
    # a write must still be conditioned on them
    return {cast(str, i["type"]): i for i in found}


def _replay(
    service: Notifier, program: str, account: str, key: str, fp: str, now: datetime
) -> Notification | None:
    store = service.store
    record = items.read_idempotency(store, program, account, key)
    if record is None:
        return None
    if record.get("fingerprint") != fp:
        raise IdempotencyConflict(
            f"idempotency key {key} was used before with another type or payload"
        )
    snapshot = cast(Item, record["notification"])
    nid = cast(str, record["id"])
    us = created_us_of(nid)
    hist = items.read_history(store, program, account, us, nid) if us else None
    if hist is not None:
        return replace(items.from_item(hist, now), replay=True)
    status = Status(cast(str, record.get("status", Status.ACTIVE)))
    return replace(items.from_item(snapshot, now, status=status), replay=True)


def deliver(service: Notifier, n: Notification, created_us: int) -> Notification:
    """Hand ``n`` to the delivery hook and record the outcome on its history row."""
    error: str | None = None
    try:
        service.delivery.deliver(n)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:300]
        log.warning("delivery of %s (%s) failed: %s", n.id, n.type, error)
    at = service.clock.now()
    outcome = "failed" if error else "delivered"
    history, active = items.delivery_updates(n, created_us, outcome, at, error)
    try:
        try:
            # the active row and the history row carry the same outcome, written
            # together, so every answer (list, get, dismiss, admin page) tells the same
            service.store.transact_write([history, active])
        except ConditionFailed:
            # superseded or dismissed meanwhile (or past retention): the history row alone
            with contextlib.suppress(ConditionFailed):
                service.store.transact_write([history])
    except TallybookError as exc:  # the store failed either write: the add stands
        log.warning("could not record the delivery of %s: %s", n.id, exc)
    return replace(n, delivery=outcome, delivered_at=at, delivery_error=error)
