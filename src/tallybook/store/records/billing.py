"""How billing is stored: record rows in time buckets, their idempotency rows,
and the program's billing state row.

A record lives at ``BILL#{program}#{bucket}`` / ``{time}#{random}``;
``BILLID#{program}#{record id}`` is its idempotency row (it holds a copy of the
record and where it was filed), written in the same transaction on condition
it does not exist.

The state row (``BILLSTATE#{program}`` / ``STATE``) holds the settings (bucket
size, grace window), where reporting starts and, per report kind, the
checkpoint (end of the last reported window, ``ckpt_{kind}``) and the closed
mark (end of the window being reported, ``closed_{kind}``: records no longer
enter buckets before it). Reading stores nothing. ``billing configure`` stores
the row *unfixed* (attribute ``unfixed``): bucket size and start may still
change. The first billing record or report run fixes the row (or creates it
fixed, with the defaults); from then on bucket size and start never change.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from tallybook.domain.billing import (
    BillingConfig,
    BillingRecord,
    RecordDraft,
    bucket_start,
    epoch,
    from_epoch,
    iso,
    parse_iso,
)
from tallybook.domain.postings import fingerprint
from tallybook.domain.reports import ALL_KINDS
from tallybook.errors import ConditionFailed, DamagedItem, ValidationError
from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    Action,
    Compare,
    ConditionCheck,
    Exists,
    Item,
    ItemStore,
    Put,
    Remove,
    Set,
    Update,
    Value,
    all_of,
)


def bucket_label(seconds: int) -> str:
    return from_epoch(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def record_from_item(item: Mapping[str, Value], *, replay: bool = False) -> BillingRecord:
    """The billing record an item holds; :class:`DamagedItem` naming it and what is
    wrong when it does not read (its amounts are looked at, the rest caught: a
    report sums them, and a record it cannot read is no record it may leave out)."""
    problem = record_problem(item)
    if problem is None:
        try:
            return _record(item, replay)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
    where = f"{item.get('pk')} / {item.get('sk')}" if "pk" in item else "its idempotency row"
    raise DamagedItem(
        f"billing record {item.get('record_id')} of program {item.get('program')} "
        f"({where}) is damaged: {problem}"
    )


def record_problem(item: Mapping[str, Value]) -> str | None:
    """What keeps a billing record's amounts from being read (the text and times
    are caught when read); None if they read."""
    for name in ("amount", "commission"):
        value = item.get(name)
        if value is None:
            return f"no {name}"
        if type(value) is not int:
            return f"{name} {value!r} is not an integer"
    return None


def _record(item: Mapping[str, Value], replay: bool) -> BillingRecord:
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
    margin: int = 0,
) -> tuple[list[Action], BillingRecord]:
    """The idempotency row, the record row in bucket ``target`` and, when that
    bucket has already ended (or ends within ``margin`` seconds), the check that
    its window is still open."""
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
    at = keys.billing_record(
        program, bucket_label(target), f"{iso(draft.time)}#{secrets.token_hex(6)}"
    )
    row: Item = {**at.as_item(), **body}
    id_row: Item = {
        **keys.billing_record_id(program, draft.id).as_item(),
        "fingerprint": fingerprint(draft.body()),
        "record": body,
        "record_pk": at.pk,
        "record_sk": at.sk,
    }
    actions: list[Action] = [Put(id_row, ITEM_ABSENT), Put(row, ITEM_ABSENT)]
    if target + size <= epoch(now) + margin:
        actions.append(open_check(program, target))
    return actions, record


def open_check(program: str, bucket: int) -> ConditionCheck:
    """The bucket starting at ``bucket`` is not in a closed (reported) window."""
    return ConditionCheck(keys.billing_state(program), Compare("closed_billing", "<=", bucket))


def read_filed(
    store: ItemStore, program: str, record_id: str, *, replay: bool = False
) -> tuple[BillingRecord, Value] | None:
    """A record through its idempotency row, and the fingerprint of the body it
    was ingested with (one request)."""
    item = store.get(keys.billing_record_id(program, record_id))
    if item is None:
        return None
    record = record_from_item(cast(dict[str, Value], item["record"]), replay=replay)
    return record, item.get("fingerprint")


def bucket_records(
    store: ItemStore, program: str, start: int, *, page_size: int
) -> Iterator[BillingRecord]:
    """Every record filed in the bucket starting at ``start`` (epoch seconds)."""
    partition = keys.billing_bucket(program, bucket_label(start))
    for item in store.query_all(partition, page_size=page_size):
        yield record_from_item(item)


def bucket_page(
    store: ItemStore, program: str, start: int, *, limit: int, cursor: str | None
) -> tuple[list[BillingRecord], str | None]:
    """One page of a bucket's records, and the cursor of the next."""
    page = store.query(
        keys.billing_bucket(program, bucket_label(start)), limit=limit, cursor=cursor
    )
    return [record_from_item(i) for i in page.items], page.cursor


def encode_cursor(bucket: int, inner: str | None) -> str:
    raw = json.dumps({"b": bucket, "c": inner}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str | None]:
    if not isinstance(cursor, str):
        raise ValidationError("malformed cursor: a cursor is the string a page returned")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        bucket, inner = data["b"], data["c"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationError("malformed cursor") from exc
    if not isinstance(bucket, int) or not (inner is None or isinstance(inner, str)):
        raise ValidationError("malformed cursor")
    return bucket, inner


# --- the billing state row ---------------------------------------------------

#: marks a row whose bucket size and start may still change (no record, no report yet)
UNFIXED = "unfixed"


@dataclass(frozen=True, slots=True)
class BillingState:
    """Settings, start, and per report kind the checkpoint and the closed mark."""

    config: BillingConfig
    start: int
    checkpoints: dict[str, int]
    closed: dict[str, int]
    #: settled by the first record or report run: bucket size and start are final
    fixed: bool = True


def read_state(store: ItemStore, program: str) -> BillingState | None:
    item = store.get(keys.billing_state(program))
    if item is None:
        return None
    config = BillingConfig(cast(int, item["bucket_seconds"]), cast(int, item["grace_seconds"]))
    return BillingState(
        config=config,
        start=cast(int, item["start"]),
        checkpoints={k: cast(int, item[f"ckpt_{k}"]) for k in ALL_KINDS},
        closed={k: cast(int, item[f"closed_{k}"]) for k in ALL_KINDS},
        fixed=UNFIXED not in item,
    )


def default_state(config: BillingConfig, start: int | None, now: datetime) -> BillingState:
    """What the row would hold if created now (a read shows it, and stores nothing)."""
    first = start if start is not None else bucket_start(epoch(now), config.bucket_seconds)
    marks: dict[str, int] = {str(k): first for k in ALL_KINDS}
    return BillingState(config, first, dict(marks), dict(marks), fixed=False)


def create_state(
    store: ItemStore,
    program: str,
    config: BillingConfig,
    start: int | None,
    now: datetime,
    *,
    fixed: bool = True,
) -> BillingState:
    """Create the row unless another writer did first; returns the row as stored."""
    item: Item = {**keys.billing_state(program).as_item(), "program": program}
    item.update(_settings(default_state(config, start, now)))
    if not fixed:
        item[UNFIXED] = True
    with contextlib.suppress(ConditionFailed):
        store.put(item, ITEM_ABSENT)
    found = read_state(store, program)
    assert found is not None
    return found


def reset_unfixed(store: ItemStore, program: str, state: BillingState) -> bool:
    """Replace an unfixed row's settings; False once the row has been fixed."""
    updates = [Set(k, v) for k, v in _settings(state).items()]
    try:
        store.update(keys.billing_state(program), updates, Exists(UNFIXED))
    except ConditionFailed:
        return False
    return True


def fix(store: ItemStore, program: str) -> None:
    """Settle an unfixed row's bucket size and start (a no-op once fixed)."""
    with contextlib.suppress(ConditionFailed):
        store.update(keys.billing_state(program), [Remove(UNFIXED)], Exists(UNFIXED))


def set_grace(store: ItemStore, program: str, grace_seconds: int) -> None:
    store.update(keys.billing_state(program), [Set("grace_seconds", grace_seconds)])


def close_window(program: str, kind: str, checkpoint: int, closed: int, end: int) -> Update:
    """Mark the window up to ``end`` closed for ``kind``, on condition no other
    runner moved the checkpoint or the mark since they were read."""
    return Update(
        keys.billing_state(program),
        (Set(f"closed_{kind}", end),),
        all_of(Compare(f"ckpt_{kind}", "=", checkpoint), Compare(f"closed_{kind}", "=", closed)),
    )


def advance_checkpoint(program: str, kind: str, start: int, end: int) -> Update:
    """Move ``kind``'s checkpoint from ``start`` to ``end`` (only from ``start``)."""
    return Update(
        keys.billing_state(program),
        (Set(f"ckpt_{kind}", end),),
        Compare(f"ckpt_{kind}", "=", start),
    )


def _settings(state: BillingState) -> dict[str, Value]:
    out: dict[str, Value] = {
        "bucket_seconds": state.config.bucket_seconds,
        "grace_seconds": state.config.grace_seconds,
        "start": state.start,
    }
    for kind in ALL_KINDS:
        out[f"ckpt_{kind}"] = state.checkpoints[kind]
        out[f"closed_{kind}"] = state.closed[kind]
    return out
