"""Outbound events, derived from the items the ledger writes.

One pure function, :func:`derive`, turns the *new image* of an item (what a
write left in the table) into the events it stands for. Both engines feed it
the same images: SQLite from inside the writing transaction
(:mod:`tallybook.webhooks.capture`), DynamoDB from the table's stream
(:mod:`tallybook.webhooks.stream`). So a committed change cannot miss its event,
and a replayed posting, which writes nothing, emits none.

Sources:

- a transaction record (``TXN#``): ``transaction.posted`` when it has legs, and
  by its type ``hold.authorized`` / ``hold.captured`` / ``hold.voided`` /
  ``hold.expired`` (a debit hold's expiry, or a held credit's release, which
  moves no money and so has no ``transaction.posted``), ``grant.expired``,
  ``points.expired``; ``tier.changed`` when its details say the tier changed;
- a notification history row (``N#H#``): ``notification.raised`` when it is
  written, ``notification.dismissed`` once its status says so;
- a report row (``REPORTS#``): ``report.filed``.

An event's id is a hash of its source item's key and its type, so deriving it
again (a stream record read twice, a history row updated after delivery)
yields the same id, and storing it is idempotent.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, cast

from tallybook.domain.ids import is_system_account
from tallybook.domain.webhooks import Event
from tallybook.store.port import Item, Value
from tallybook.store.records.webhook_changes import (
    NOTIFICATION_SOURCE,
    TRANSACTION_SOURCE,
    source_of,
)

__all__ = ["EVENT_TYPES", "Event", "derive", "event_id"]

TRANSACTION_POSTED: Final = "transaction.posted"
HOLD_AUTHORIZED: Final = "hold.authorized"
HOLD_CAPTURED: Final = "hold.captured"
HOLD_VOIDED: Final = "hold.voided"
HOLD_EXPIRED: Final = "hold.expired"
GRANT_EXPIRED: Final = "grant.expired"
POINTS_EXPIRED: Final = "points.expired"
TIER_CHANGED: Final = "tier.changed"
NOTIFICATION_RAISED: Final = "notification.raised"
NOTIFICATION_DISMISSED: Final = "notification.dismissed"
REPORT_FILED: Final = "report.filed"

EVENT_TYPES: Final = (
    TRANSACTION_POSTED,
    HOLD_AUTHORIZED,
    HOLD_CAPTURED,
    HOLD_VOIDED,
    HOLD_EXPIRED,
    GRANT_EXPIRED,
    POINTS_EXPIRED,
    TIER_CHANGED,
    NOTIFICATION_RAISED,
    NOTIFICATION_DISMISSED,
    REPORT_FILED,
)

_HOLD_TYPES: Final = {
    "authorize": HOLD_AUTHORIZED,
    "capture": HOLD_CAPTURED,
    "void": HOLD_VOIDED,
    # a held credit reaching its release date: the expiry job released the hold
    "release": HOLD_EXPIRED,
}
_RAISED_STATUSES: Final = frozenset({"active", "unlisted"})


def event_id(pk: str, sk: str, type_: str) -> str:
    digest = hashlib.sha256(f"{pk}\x00{sk}\x00{type_}".encode()).hexdigest()
    return f"evt_{digest[:32]}"


def derive(image: Item) -> list[Event]:
    """The events an item's new image stands for (none for most items)."""
    source = source_of(image)
    if source is None:
        return []
    kind, key = source
    if kind == TRANSACTION_SOURCE:
        return _from_transaction(key.pk, key.sk, image)
    if kind == NOTIFICATION_SOURCE:
        return _from_notification(key.pk, key.sk, image)
    return _from_report(key.pk, key.sk, image)


def _str(d: dict[str, Any], name: str) -> str | None:
    v = d.get(name)
    return v if isinstance(v, str) else None


def _from_transaction(pk: str, sk: str, image: Item) -> list[Event]:
    d = cast(dict[str, Any], image)
    if "refused" in d or not isinstance(d.get("txn_id"), str):
        return []
    program, txn_type, at = d["program"], str(d.get("type", "")), str(d.get("created_at", ""))
    details = cast(dict[str, Any], d.get("details") or {})
    legs = cast(list[dict[str, Any]], d.get("legs") or [])
    accounts = [leg["account"] for leg in legs if not is_system_account(leg["account"])]
    for name in ("account", "owner"):
        who = details.get(name) if name == "account" else d.get(name)
        if isinstance(who, str) and not is_system_account(who):
            accounts.append(who)
    owners = tuple(dict.fromkeys(accounts))
    base: dict[str, Value] = {"txn_id": d["txn_id"], "txn_type": txn_type}

    def event(type_: str, data: dict[str, Value]) -> Event:
        return Event(event_id(pk, sk, type_), type_, program, owners, at, {**base, **data})

    out: list[Event] = []
    if legs:
        posted: dict[str, Value] = {"legs": cast(Value, legs), "details": cast(Value, details)}
        for name in ("order_id", "description", "metadata"):
            if name in d:
                posted[name] = d[name]
        out.append(event(TRANSACTION_POSTED, posted))
    hold_id = details.get("hold_id")
    specific = _HOLD_TYPES.get(txn_type)
    if txn_type == "expire":
        if hold_id is not None:
            specific = HOLD_EXPIRED
        elif "grants" in details:
            specific = GRANT_EXPIRED
        else:
            specific = POINTS_EXPIRED
    if specific is not None and (legs or specific != POINTS_EXPIRED):
        out.append(event(specific, _specific_data(details, legs)))
    if details.get("tier_changed"):
        tier = {"tier": details.get("tier"), "previous_tier": details.get("previous_tier")}
        out.append(event(TIER_CHANGED, cast(dict[str, Value], tier)))
    return out


def _specific_data(details: dict[str, Any], legs: list[dict[str, Any]]) -> dict[str, Value]:
    keep = ("account", "hold_id", "held", "captured", "released", "grants", "expired")
    data = {k: details[k] for k in keep if k in details}
    data["legs"] = legs
    return cast(dict[str, Value], data)


def _from_notification(pk: str, sk: str, image: Item) -> list[Event]:
    d = cast(dict[str, Any], image)
    program, account = _str(d, "program"), _str(d, "account")
    status = _str(d, "status") or "active"
    if program is None or account is None:
        return []
    data: dict[str, Value] = {
        "notification_id": d.get("id"),
        "notification_type": d.get("type"),
        "payload": d.get("payload"),
        "created_at": d.get("created_at"),
        "status": status,
    }
    if status in _RAISED_STATUSES:
        type_, at = NOTIFICATION_RAISED, str(d.get("created_at", ""))
    else:
        type_, at = NOTIFICATION_DISMISSED, str(d.get("dismissed_at") or d.get("created_at"))
        for name in ("dismissed_at", "dismissed_by", "dismiss_reason"):
            data[name] = d.get(name)
    return [Event(event_id(pk, sk, type_), type_, program, (account,), at, data)]


def _from_report(pk: str, sk: str, image: Item) -> list[Event]:
    d = cast(dict[str, Any], image)
    program = _str(d, "program")
    if program is None or "window" not in d:
        return []
    keep = ("kind", "window", "start", "end", "rows", "sha256", "location")
    data = cast(dict[str, Value], {k: d[k] for k in keep if k in d})
    at = str(d.get("written_at", ""))
    return [Event(event_id(pk, sk, REPORT_FILED), REPORT_FILED, program, (), at, data)]
