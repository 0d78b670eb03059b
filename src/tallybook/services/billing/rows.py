"""Stored rows of billing records, and the listing cursor.

A record lives at ``BILL#{program}#{bucket}`` / ``{time}#{random}``;
``BILLID#{program}#{record id}`` is its idempotency row (it holds a copy of the
record and where it was filed), written in the same transaction on condition
it does not exist. Pure: builds items and actions, never talks to the store.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import cast

from tallybook.domain.billing import BillingRecord, RecordDraft, epoch, from_epoch, iso, parse_iso
from tallybook.domain.postings import fingerprint
from tallybook.errors import ValidationError
from tallybook.store import keys
from tallybook.store.port import Action, Compare, ConditionCheck, Item, NotExists, Put, Value


def bucket_label(seconds: int) -> str:
    return from_epoch(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_from_item(item: Mapping[str, Value], *, replay: bool = False) -> BillingRecord:
    return BillingRecord(
        program=cast(str, item["program"]),
        id=cast(str, item["record_id"]),
        partner=cast(str, item["partner"]),
        order_id=cast(str, item["order_id"]),
        amount=cast(int, item["amount"]),
        currency=cast(str, item["currency"]),
        rate=cast(str, item["rate"]),
        commission=cast(int, item["commission"]),
        time=parse_iso(cast(str, item["time"])),
        bucket=parse_iso(cast(str, item["bucket"])),
        ingested_at=parse_iso(cast(str, item["ingested_at"])),
        late=bool(item.get("late")),
        replay=replay,
    )


def record_actions(
    program: str,
    draft: RecordDraft,
    target: int,
    late: bool,
    now: datetime,
    size: int,
) -> tuple[list[Action], BillingRecord]:
    """The idempotency row, the record row in bucket ``target`` and, when that
    bucket has already ended, the check that its window is still open."""
    record = BillingRecord(
        program=program,
        id=draft.id,
        partner=draft.partner,
        order_id=draft.order_id,
        amount=draft.amount,
        currency=draft.currency,
        rate=draft.rate,
        commission=draft.commission,
        time=draft.time,
        bucket=from_epoch(target),
        ingested_at=now,
        late=late,
    )
    body: dict[str, Value] = {
        "program": program,
        "record_id": draft.id,
        "partner": draft.partner,
        "order_id": draft.order_id,
        "amount": draft.amount,
        "currency": draft.currency,
        "rate": draft.rate,
        "commission": record.commission,
        "time": iso(draft.time),
        "bucket": iso(record.bucket),
        "ingested_at": iso(now),
        "late": late,
    }
    row: Item = {
        "pk": keys.billing_bucket(program, bucket_label(target)),
        "sk": f"{iso(draft.time)}#{secrets.token_hex(6)}",
        **body,
    }
    id_row: Item = {
        **keys.billing_record_id(program, draft.id).as_item(),
        "fingerprint": fingerprint(draft.body()),
        "record": body,
        "record_pk": row["pk"],
        "record_sk": row["sk"],
    }
    actions: list[Action] = [Put(id_row, NotExists("pk")), Put(row, NotExists("pk"))]
    if target + size <= epoch(now):
        actions.append(open_check(program, target))
    return actions, record


def open_check(program: str, bucket: int) -> ConditionCheck:
    """The bucket starting at ``bucket`` is not in a closed (reported) window."""
    return ConditionCheck(keys.billing_state(program), Compare("closed_billing", "<=", bucket))


def encode_cursor(bucket: int, inner: str | None) -> str:
    raw = json.dumps({"b": bucket, "c": inner}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str | None]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        bucket, inner = data["b"], data["c"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationError("malformed cursor") from exc
    if not isinstance(bucket, int) or not (inner is None or isinstance(inner, str)):
        raise ValidationError("malformed cursor")
    return bucket, inner
