"""How notifications are stored: active rows, history rows, idempotency rows.

Layout (account partition ``ACCT#{program}#{account}``):

- ``N#A#{type}``: the active notification of that type (at most one: the key
  *is* invariant 6); ``ttl`` = its expiry, if it has one;
- ``N#H#{created_us:016d}#{id}``: one history row per notification, updated
  as it is superseded, dismissed or delivered; ``ttl`` = created + retention;
- ``N#K#{key}``: idempotency row of an add with a key (same ``ttl``).

The services read rows as items (``from_item`` makes them notifications) and
write them with the actions made here, which carry their conditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from tallybook.domain.event_types import NOTIFICATION_DISMISSED, NOTIFICATION_RAISED, event_id
from tallybook.domain.notifications import Notification, Status
from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    ITEM_PRESENT,
    Compare,
    Delete,
    Item,
    ItemStore,
    Key,
    Page,
    Put,
    Set,
    SortCondition,
    Update,
    Value,
)
from tallybook.store.records.codec import iso, malformed, parse_iso

#: what a dismissal writes onto a history row
DISMISS_FIELDS = ("status", "dismissed_at", "dismissed_by", "dismiss_reason")


def epoch(t: datetime) -> int:
    return int(t.timestamp())


def history_key(n: Notification, created_us: int) -> Key:
    return keys.notification_history(n.program, n.account, created_us, n.id)


def history_key_of(item: Item) -> Key:
    """The history row of the notification ``item`` (an active or history row) holds."""
    return keys.notification_history(
        cast(str, item["program"]),
        cast(str, item["account"]),
        created_us(item),
        cast(str, item["id"]),
    )


def active_key(program: str, account: str, type_: str) -> Key:
    return keys.notification_active(program, account, type_)


def active_key_of(item: Item) -> Key:
    """The key of the active row of ``item``'s account and type."""
    return active_key(
        cast(str, item["program"]), cast(str, item["account"]), cast(str, item["type"])
    )


# --- reads -------------------------------------------------------------------


def read_history(store: ItemStore, program: str, account: str, us: int, nid: str) -> Item | None:
    return store.get(keys.notification_history(program, account, us, nid))


def read_active(store: ItemStore, program: str, account: str, type_: str) -> Item | None:
    return store.get(active_key(program, account, type_))


def read_actives(store: ItemStore, program: str, account: str, types: Sequence[str]) -> list[Item]:
    """The active rows of these types (one get for one type, else one batch)."""
    if not types:
        return []
    if len(types) == 1:
        one = read_active(store, program, account, types[0])
        return [one] if one is not None else []
    return store.batch_get([active_key(program, account, t) for t in types])


def read_active_of(
    store: ItemStore, program: str, accounts: Sequence[str], type_: str
) -> list[Item]:
    """The active rows of one type of several accounts (one batch)."""
    return store.batch_get([active_key(program, a, type_) for a in accounts]) if accounts else []


def active_rows(store: ItemStore, program: str, account: str) -> Iterable[Item]:
    """Every active row of the account (one query: they share a sort-key prefix)."""
    return store.query_all(
        keys.account_partition(program, account),
        SortCondition.begins_with(keys.NOTIFICATION_ACTIVE_PREFIX),
    )


def history_rows(store: ItemStore, program: str, account: str) -> Iterable[Item]:
    """Every history row of the account, oldest first (one query)."""
    return store.query_all(
        keys.account_partition(program, account),
        SortCondition.begins_with(keys.NOTIFICATION_HISTORY_PREFIX),
    )


def read_idempotency(store: ItemStore, program: str, account: str, key: str) -> Item | None:
    return store.get(keys.notification_idempotency(program, account, key))


def history_page(
    store: ItemStore,
    program: str,
    account: str,
    *,
    since_us: int | None,
    until_us: int | None,
    forward: bool,
    limit: int,
    cursor: str | None,
) -> Page:
    """History rows created in ``[since_us, until_us)`` (either bound optional)."""
    low, high = keys.time_window(keys.NOTIFICATION_HISTORY_PREFIX, since_us, until_us)
    return store.query(
        keys.account_partition(program, account),
        SortCondition.between(low, high),
        forward=forward,
        limit=limit,
        cursor=cursor,
    )


# --- writes ------------------------------------------------------------------


def idempotency_put(n: Notification, key: str, fingerprint: str, ttl: int) -> Put:
    """The idempotency row of an add with ``key``: put only if the key was never used."""
    return Put(idempotency_item(n, key, fingerprint, ttl), ITEM_ABSENT)


def active_put(n: Notification, created_us: int, previous: Item | None) -> Put:
    """``n`` as the active row of its type, on condition the row is still ``previous``."""
    guard = Compare("id", "=", previous["id"]) if previous else ITEM_ABSENT
    return Put(active_item(n, created_us), guard)


def history_put(n: Notification, created_us: int, ttl: int, number: Value = None) -> Put:
    """``n``'s history row; ``number``: the account's change number its raising
    takes (``chg_raised``, :meth:`~tallybook.store.records.ledger.Changes.numbers`)."""
    item = history_item(n, created_us, ttl)
    if number is not None:
        item["chg_raised"] = number
    return Put(item, ITEM_ABSENT)


def raised_event(n: Notification, created_us: int) -> str:
    """The id of ``n``'s ``notification.raised`` event (from its history row's key)."""
    key = history_key(n, created_us)
    return event_id(key.pk, key.sk, NOTIFICATION_RAISED)


def dismissed_event(item: Item) -> str:
    """The id of the ``notification.dismissed`` event of the notification ``item`` holds."""
    key = history_key_of(item)
    return event_id(key.pk, key.sk, NOTIFICATION_DISMISSED)


def active_delete(item: Item) -> Delete:
    """Remove the active row ``item``, on condition it still holds the same notification."""
    return Delete(active_key_of(item), Compare("id", "=", item["id"]))


def dismissal_update(
    item: Item, status: Status, at: datetime, by: str, reason: str, number: Value = None
) -> Update:
    """Record on ``item``'s history row that it was superseded or dismissed;
    ``number``: the account's change number the dismissal takes (``chg_dismissed``)."""
    fields = dismissal(status, at, by, reason)
    if number is not None:
        fields["chg_dismissed"] = number
    sets = tuple(Set(k, v) for k, v in fields.items())
    return Update(history_key_of(item), sets, ITEM_PRESENT)


def delivery_updates(
    n: Notification, created_us: int, outcome: str, at: datetime, error: str | None
) -> tuple[Update, Update]:
    """Record a delivery's outcome: (on the history row, on the active row if it is
    still ``n``), so that every answer tells the same thing."""
    sets: list[Set] = [Set("delivery", outcome), Set("delivered_at", iso(at))]
    if error:
        sets.append(Set("delivery_error", error))
    history = Update(history_key(n, created_us), tuple(sets), ITEM_PRESENT)
    active = Update(active_key(n.program, n.account, n.type), tuple(sets), Compare("id", "=", n.id))
    return history, active


# --- items -------------------------------------------------------------------


def base_item(n: Notification, created_us: int) -> dict[str, Value]:
    item: dict[str, Value] = {
        "program": n.program,
        "account": n.account,
        "id": n.id,
        "type": n.type,
        "payload": cast(Value, n.payload),
        "created_at": iso(n.created_at),
        "created_us": created_us,
        "listed": n.listed,
    }
    if n.expires_at is not None:
        item["expires_at"] = iso(n.expires_at)
    if n.source is not None:
        item["source"] = n.source
    return item


def active_item(n: Notification, created_us: int) -> Item:
    item: Item = {
        **keys.notification_active(n.program, n.account, n.type).as_item(),
        **base_item(n, created_us),
    }
    if n.expires_at is not None:
        item["ttl"] = epoch(n.expires_at)
    return item


def history_item(n: Notification, created_us: int, ttl: int) -> Item:
    return {
        **history_key(n, created_us).as_item(),
        **base_item(n, created_us),
        "status": str(n.status),
        "ttl": ttl,
    }


def idempotency_item(n: Notification, key: str, fingerprint: str, ttl: int) -> Item:
    return {
        **keys.notification_idempotency(n.program, n.account, key).as_item(),
        "id": n.id,
        "fingerprint": fingerprint,
        "notification": cast(Value, base_item(n, 0)),
        "status": str(n.status),
        "ttl": ttl,
    }


def dismissal(status: Status, at: datetime, by: str, reason: str) -> dict[str, Value]:
    return {
        "status": str(status),
        "dismissed_at": iso(at),
        "dismissed_by": by,
        "dismiss_reason": reason,
    }


def _opt_time(item: dict[str, Any], name: str) -> datetime | None:
    v = item.get(name)
    return parse_iso(v) if isinstance(v, str) else None


def _opt_str(item: dict[str, Any], name: str) -> str | None:
    v = item.get(name)
    return v if isinstance(v, str) else None


def from_item(item: Item, now: datetime, *, status: Status | None = None) -> Notification:
    """A notification from an active, history or idempotency snapshot item."""
    d = cast(dict[str, Any], item)
    expires_at = _opt_time(d, "expires_at")
    stored = Status(d["status"]) if isinstance(d.get("status"), str) else Status.ACTIVE
    current = status or stored
    # expired from the whole second its expires_at falls in, as the store hides
    # the active row (its ``ttl`` is whole seconds): never "active" yet unlisted
    if current is Status.ACTIVE and expires_at is not None and epoch(expires_at) <= epoch(now):
        current = Status.EXPIRED
    return Notification(
        program=d["program"],
        account=d["account"],
        id=d["id"],
        type=d["type"],
        payload=cast(dict[str, Any], d.get("payload") or {}),
        created_at=parse_iso(d["created_at"]),
        status=current,
        listed=bool(d.get("listed", True)),
        expires_at=expires_at,
        dismissed_at=_opt_time(d, "dismissed_at"),
        dismissed_by=_opt_str(d, "dismissed_by"),
        dismiss_reason=_opt_str(d, "dismiss_reason"),
        delivery=_opt_str(d, "delivery"),
        delivered_at=_opt_time(d, "delivered_at"),
        delivery_error=_opt_str(d, "delivery_error"),
        source=_opt_str(d, "source"),
    )


def row_problem(item: Item, account: str) -> str | None:
    """What keeps an active or history row of ``account`` from being read, named
    by its key; None if it reads."""
    found = _row_problem(item)
    return None if found is None else f"malformed notification {item['sk']} of {account}: {found}"


def _row_problem(item: Item) -> str | None:
    optional = [n for n in ("expires_at", "dismissed_at", "delivered_at") if n in item]
    found = malformed(
        item, text=("program", "account", "id", "type"), times=("created_at", *optional)
    )
    if found is not None:
        return found
    status = item.get("status", str(Status.ACTIVE))
    if status not in {str(s) for s in Status}:
        return f"status {status!r} is unknown"
    return None


def created_us(item: Item) -> int:
    v = item.get("created_us")
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def live(item: Item, now: datetime) -> bool:
    """Still visible at the ledger clock's ``now`` (whole seconds, as the store reads ``ttl``)."""
    ttl = item.get("ttl")
    return not (isinstance(ttl, int) and not isinstance(ttl, bool) and ttl <= epoch(now))
