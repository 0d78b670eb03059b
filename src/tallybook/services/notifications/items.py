"""Stored items of notifications: active rows, history rows, idempotency rows.

Layout (account partition ``ACCT#{program}#{account}``):

- ``N#A#{type}``: the active notification of that type (at most one: the key
  *is* invariant 6); ``ttl`` = its expiry, if it has one;
- ``N#H#{created_us:016d}#{id}``: one history row per notification, updated
  as it is superseded, dismissed or delivered; ``ttl`` = created + retention;
- ``N#K#{key}``: idempotency row of an add with a key (same ``ttl``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from tallybook.domain.notifications import Notification, Status
from tallybook.store import keys
from tallybook.store.port import Item, Key, Value
from tallybook.store.records.codec import iso, parse_iso

#: what a dismissal writes onto a history row
DISMISS_FIELDS = ("status", "dismissed_at", "dismissed_by", "dismiss_reason")


def epoch(t: datetime) -> int:
    return int(t.timestamp())


def history_key(n: Notification, created_us: int) -> Key:
    return keys.notification_history(n.program, n.account, created_us, n.id)


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
    if current is Status.ACTIVE and expires_at is not None and expires_at <= now:
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


def created_us(item: Item) -> int:
    v = item.get("created_us")
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def live(item: Item, now: datetime) -> bool:
    """Still visible at the ledger clock's ``now`` (the store hides by wall time)."""
    ttl = item.get("ttl")
    return not (isinstance(ttl, int) and not isinstance(ttl, bool) and ttl <= epoch(now))
