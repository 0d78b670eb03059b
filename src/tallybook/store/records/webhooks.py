"""How webhook subscriptions are stored, with their leases, outcome counters and
the DynamoDB stream reader's checkpoints.

Layout (see :mod:`tallybook.store.keys`):

- ``WHSUB#{program}`` / ``SUB#{id}``: a subscription; its secret sealed under
  the server key (``secret_sealed``; an item of an older version holds it in
  plain text as ``secret``), ``secret_hint`` and the outcome counters
  ``n_delivered`` / ``n_failed`` / ``n_dead``;
- ``WHSUB#{program}`` / ``LEASE#{id}``: the lease of the worker delivering the
  subscription's queue (``owner``, ``expires_us``);
- ``WHSTREAM`` / ``{shard id}``: how far the stream reader got in a shard
  (``seq``), or that it read the shard to its end (``closed``).

Events, delivery records and queue rows are :mod:`~tallybook.store.records.webhook_events`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from tallybook.domain.webhooks import ACTIVE, DISABLED, Subscription, secret_hint
from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    ITEM_PRESENT,
    Add,
    Compare,
    Delete,
    Item,
    ItemStore,
    Remove,
    Set,
    SortCondition,
    Update,
    any_of,
)

#: the delivery outcomes counted on each subscription
OUTCOMES = ("delivered", "failed", "dead")


@dataclass(frozen=True, slots=True)
class StoredSubscription:
    """A subscription as stored: its secret as kept, and its outcome counters."""

    subscription: Subscription
    #: the secret sealed under the server key (``None`` in an item of an older version)
    sealed: str | None
    #: an older item's plain-text secret (``None`` once sealed)
    plain: str | None
    #: deliveries per outcome (:data:`OUTCOMES`)
    counts: Mapping[str, int]


def subscription_from_item(item: Item) -> StoredSubscription:
    d = cast(dict[str, Any], item)
    plain = d.get("secret")
    sealed = d.get("secret_sealed")
    sub = Subscription(
        program=d["program"],
        id=d["id"],
        url=d["url"],
        types=tuple(d.get("types") or ()),
        status=d.get("status", ACTIVE),
        created_at=d.get("created_at", ""),
        secret_hint=d.get("secret_hint") or secret_hint(str(plain or "")),
        description=d.get("description"),
        disabled_reason=d.get("disabled_reason"),
        allow_http=bool(d.get("allow_http", False)),
    )
    counts = {o: n for o in OUTCOMES if isinstance(n := d.get(f"n_{o}"), int)}
    return StoredSubscription(
        sub,
        sealed if isinstance(sealed, str) else None,
        None if plain is None else str(plain),
        counts,
    )


def put_subscription(store: ItemStore, sub: Subscription, sealed: str) -> None:
    """Store a new subscription; one with its id is :class:`ConditionFailed`."""
    item: Item = {
        **keys.webhook_subscription(sub.program, sub.id).as_item(),
        "program": sub.program,
        "id": sub.id,
        "url": sub.url,
        "types": list(sub.types),
        "status": sub.status,
        "secret_sealed": sealed,
        "secret_hint": sub.secret_hint,
        "allow_http": sub.allow_http,
        "created_at": sub.created_at,
    }
    if sub.description:
        item["description"] = sub.description
    store.put(item, ITEM_ABSENT)


def read_subscription(store: ItemStore, program: str, sub_id: str) -> StoredSubscription | None:
    item = store.get(keys.webhook_subscription(program, sub_id))
    return None if item is None else subscription_from_item(item)


def list_subscriptions(store: ItemStore, program: str) -> list[StoredSubscription]:
    items = store.query_all(
        keys.webhook_subscriptions(program),
        SortCondition.begins_with(keys.WEBHOOK_SUBSCRIPTION_PREFIX),
    )
    return [subscription_from_item(i) for i in items]


def sealing(sealed: str, hint: str) -> tuple[Set | Remove, ...]:
    """The changes that keep a secret sealed as ``sealed`` (a plain one goes)."""
    return (Set("secret_sealed", sealed), Set("secret_hint", hint), Remove("secret"))


def update_subscription(
    store: ItemStore,
    program: str,
    sub_id: str,
    changes: tuple[Set | Remove, ...],
) -> None:
    """Apply ``changes``; a subscription deleted meanwhile is :class:`ConditionFailed`."""
    store.update(keys.webhook_subscription(program, sub_id), changes, ITEM_PRESENT)


def status_changes(status: str, reason: str | None) -> tuple[Set, ...]:
    return (Set("status", status), Set("disabled_reason", reason))


def disable_if_active(store: ItemStore, program: str, sub_id: str, reason: str) -> None:
    """Disable unless already disabled (:class:`ConditionFailed` when it is, or is gone)."""
    store.update(
        keys.webhook_subscription(program, sub_id),
        status_changes(DISABLED, reason),
        Compare("status", "=", ACTIVE),
    )


def delete_subscription(store: ItemStore, program: str, sub_id: str) -> None:
    """Remove the subscription, then its queue: rows left behind were sent to the
    next subscription given its id (its URL, whatever its types). Its delivery
    records stay until they expire."""
    store.delete(keys.webhook_subscription(program, sub_id))
    queue = keys.webhook_queue(program, sub_id)
    while rows := store.query(queue, limit=_CLEAR_BATCH).items:
        store.transact_write(
            [Delete(keys.webhook_queued(program, sub_id, str(row["sk"]))) for row in rows]
        )


#: queue rows removed per transaction when a subscription is deleted
_CLEAR_BATCH = 25


def count_outcomes(program: str, sub_id: str, outcomes: list[str]) -> Update:
    """Add to the subscription's outcome counters (``/metrics`` reads them)."""
    ops = tuple(Add(f"n_{outcome}", n) for outcome, n in Counter(outcomes).items())
    return Update(keys.webhook_subscription(program, sub_id), ops, ITEM_PRESENT)


# --- leases -------------------------------------------------------------------


def take_lease(
    store: ItemStore, program: str, sub_id: str, owner: str, now_us: int, expires_us: int
) -> None:
    """Take the lease unless another owner's is still running (:class:`ConditionFailed`)."""
    item: Item = {
        **keys.webhook_lease(program, sub_id).as_item(),
        "owner": owner,
        "expires_us": expires_us,
    }
    store.put(item, any_of(ITEM_ABSENT, Compare("expires_us", "<", now_us)))


def lease_renewal(program: str, sub_id: str, owner: str, expires_us: int) -> Update:
    """Extend the lease while it is ``owner``'s."""
    return Update(
        keys.webhook_lease(program, sub_id),
        (Set("expires_us", expires_us),),
        Compare("owner", "=", owner),
    )


def lease_release(program: str, sub_id: str, owner: str) -> Delete:
    """Give the lease up while it is ``owner``'s."""
    return Delete(keys.webhook_lease(program, sub_id), Compare("owner", "=", owner))


# --- stream checkpoints -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """How far a shard of the table's stream was read."""

    #: the last sequence number handed on (``None``: from the oldest record kept)
    seq: str | None = None
    #: read to its end
    closed: bool = False


def read_checkpoint(store: ItemStore, shard_id: str) -> Checkpoint:
    item = cast(dict[str, Any], store.get(keys.stream_checkpoint(shard_id)) or {})
    return Checkpoint(cast(str | None, item.get("seq")), bool(item.get("closed")))


def save_checkpoint(store: ItemStore, shard_id: str, checkpoint: Checkpoint) -> None:
    item: Item = {**keys.stream_checkpoint(shard_id).as_item()}
    if checkpoint.closed:
        item["closed"] = True
    else:
        item["seq"] = checkpoint.seq
    store.put(item)


def is_checkpoint_record(record: Mapping[str, Any]) -> bool:
    """Whether a stream record is of a checkpoint row (the reader's own writes)."""
    pk = record.get("dynamodb", {}).get("Keys", {}).get("pk", {}).get("S")
    return bool(pk == keys.STREAM_CHECKPOINTS)
