"""Adding a notification: one storage transaction, retried on conflicts.

The transaction holds the idempotency row (when the add has a key; condition:
absent), the new active row ``N#A#{type}`` (condition: the active row is
still the one read, by id, or absent: invariant 6), the newcomer's history
row, the superseded one's history update (dismissed by the newcomer's id) and,
per type the rule dismisses, a delete of its active row plus its history
update. A lost race fails a condition and the whole add is planned again.
Delivery, when the rule asks for it, runs after the commit and is recorded on
the history row.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from tallybook.domain.model import Program
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
)
from tallybook.retry import RetryPolicy, retrying
from tallybook.services.clock import Clock
from tallybook.services.notifications import items as items
from tallybook.services.notifications.delivery import Delivery
from tallybook.services.notifications.dismiss import active_key, mark
from tallybook.store import keys
from tallybook.store.port import (
    Action,
    Compare,
    Delete,
    Exists,
    Item,
    ItemStore,
    NotExists,
    Put,
    Set,
    Update,
)
from tallybook.store.records.codec import from_us, iso, to_us

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
) -> Notification:
    """Add for ``program`` without checking the account (callers check it)."""
    store = service.store
    rules = parse_rules(program.settings.get("notifications"))
    rule = rules.rule(type_)
    fp = fingerprint(
        {
            "type": type_,
            "payload": payload,
            "expires_at": iso(expires_at) if expires_at else None,
        }
    )
    targets = ([type_] if rule.listed else []) + [t for t in rule.dismisses if t != type_]
    no_history: set[str] = set()
    with retrying(service.retry_policy) as tries:
        for _ in tries:
            now = service.clock.now()
            current = _actives(service, program.id, account, targets)
            prev = current.get(type_)
            created_us = max(to_us(now), items.created_us(prev) + 1 if prev else 0)
            created = from_us(created_us)
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
            actions: list[Action] = []
            if key is not None:
                actions.append(Put(items.idempotency_item(n, key, fp, ttl), NotExists("pk")))
            if rule.listed:
                guard = Compare("id", "=", prev["id"]) if prev else NotExists("pk")
                actions.append(Put(items.active_item(n, created_us), guard))
            actions.append(Put(items.history_item(n, created_us, ttl), NotExists("pk")))
            history_updates: dict[int, str] = {}
            for t, old in current.items():
                superseded = t == type_
                if not superseded:
                    actions.append(Delete(active_key(old), Compare("id", "=", old["id"])))
                old_id = cast(str, old["id"])
                if old_id in no_history or not items.live(old, now):
                    continue
                history_updates[len(actions)] = old_id
                reason = DismissReason.SUPERSEDED if superseded else DismissReason.RULE
                actions.append(mark(old, now, n.id, reason))
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
    if not types:
        return {}
    if len(types) == 1:
        one = service.store.get(keys.notification_active(program, account, types[0]))
        found = [one] if one is not None else []
    else:
        found = service.store.batch_get(
            [keys.notification_active(program, account, t) for t in types]
        )
    # rows past expiry by the ledger clock but not yet by the store's are kept:
    # a write must still be conditioned on them
    return {cast(str, i["type"]): i for i in found}


def _replay(
    service: Notifier, program: str, account: str, key: str, fp: str, now: datetime
) -> Notification | None:
    store = service.store
    record = store.get(keys.notification_idempotency(program, account, key))
    if record is None:
        return None
    if record.get("fingerprint") != fp:
        raise IdempotencyConflict(
            f"idempotency key {key} was used before with another type or payload"
        )
    snapshot = cast(Item, record["notification"])
    nid = cast(str, record["id"])
    us = created_us_of(nid)
    hist = store.get(keys.notification_history(program, account, us, nid)) if us else None
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
    sets: list[Set] = [Set("delivery", outcome), Set("delivered_at", iso(at))]
    if error:
        sets.append(Set("delivery_error", error))
    history = items.history_key(n, created_us)
    active = keys.notification_active(n.program, n.account, n.type)
    try:
        # the active row and the history row carry the same outcome, written together,
        # so every answer (list, get, dismiss, admin page) tells the same thing
        service.store.transact_write(
            [
                Update(history, tuple(sets), Exists("pk")),
                Update(active, tuple(sets), Compare("id", "=", n.id)),
            ]
        )
    except ConditionFailed:
        # superseded or dismissed meanwhile (or past retention): the history row alone
        with contextlib.suppress(ConditionFailed):
            service.store.update(history, sets, Exists("pk"))
    except TallybookError as exc:
        log.warning("could not record the delivery of %s: %s", n.id, exc)
    return replace(n, delivery=outcome, delivered_at=at, delivery_error=error)
