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

from typing import Any, Final, cast

from tallybook.domain.event_types import (
    EVENT_TYPES,
    NOTIFICATION_DISMISSED,
    NOTIFICATION_RAISED,
    REPORT_FILED,
    TIER_CHANGED,
    TRANSACTION_POSTED,
    event_accounts,
    event_id,
    transaction_event_types,
)
from tallybook.domain.webhooks import Event
from tallybook.store.port import Item, Value
from tallybook.store.records.codec import from_us, iso
from tallybook.store.records.webhook_changes import (
    NOTIFICATION_SOURCE,
    TRANSACTION_SOURCE,
    source_of,
)

__all__ = ["EVENT_TYPES", "Event", "derive", "event_id"]

_RAISED_STATUSES: Final = frozenset({"active", "unlisted"})


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
    owner = d.get("owner")
    owners = event_accounts(
        (leg["account"] for leg in legs), details, owner if isinstance(owner, str) else None
    )
    base: dict[str, Value] = {"txn_id": d["txn_id"], "txn_type": txn_type}
    numbers = d.get("chg")
    base.update(_account_order(numbers if isinstance(numbers, dict) else {}))

    def event(type_: str, data: dict[str, Value]) -> Event:
        return Event(event_id(pk, sk, type_), type_, program, owners, at, {**base, **data})

    out: list[Event] = []
    for type_ in transaction_event_types(txn_type, bool(legs), details):
        if type_ == TRANSACTION_POSTED:
            posted: dict[str, Value] = {"legs": cast(Value, legs), "details": cast(Value, details)}
            for name in ("order_id", "description", "metadata"):
                if name in d:
                    posted[name] = d[name]
            out.append(event(type_, posted))
        elif type_ == TIER_CHANGED:
            tier = {"tier": details.get("tier"), "previous_tier": details.get("previous_tier")}
            if isinstance(details.get("tier_changes"), dict):  # a posting's, per account
                tier["changes"] = details["tier_changes"]
            out.append(event(type_, cast(dict[str, Value], tier)))
        else:
            out.append(event(type_, _specific_data(details, legs)))
    return out


def _account_order(numbers: dict[str, Value]) -> dict[str, Value]:
    """``account_seq`` (per account, its change's number) and ``account_previous``
    (per account, the previous change's first event id and time, when there was
    one) from the numbers an item records (``[n, previous event id, its µs]``,
    :class:`tallybook.store.records.ledger.Changes`)."""
    seqs: dict[str, Value] = {}
    previous: dict[str, Value] = {}
    for account, value in numbers.items():
        if not isinstance(value, list) or not value or not isinstance(value[0], int):
            continue
        seqs[account] = value[0]
        if len(value) == 3 and isinstance(value[1], str) and isinstance(value[2], int):
            previous[account] = {"id": value[1], "at": iso(from_us(value[2]))}
    out: dict[str, Value] = {"account_seq": seqs} if seqs else {}
    if previous:
        out["account_previous"] = previous
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
        type_, at, number = NOTIFICATION_RAISED, str(d.get("created_at", "")), "chg_raised"
    else:
        type_, at = NOTIFICATION_DISMISSED, str(d.get("dismissed_at") or d.get("created_at"))
        number = "chg_dismissed"
        for name in ("dismissed_at", "dismissed_by", "dismiss_reason"):
            data[name] = d.get(name)
    data.update(_account_order({account: d.get(number)}))
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
