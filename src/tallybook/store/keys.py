"""The single-table key layout. Every key is namespaced by program.

See docs/table-design.md for the access pattern each key serves and its cost.

=====================  ==========================  ============================
entity                 pk                          sk
=====================  ==========================  ============================
program                PROG#{p}                    PROG
program directory      PROGRAMS                    {p}
account head           ACCT#{p}#{a}                HEAD
history entry          ACCT#{p}#{a}                E#{fund}#{us:016d}#{seq:012d}
account directory      DIR#{p}#{shard:02d}         {a}
system account shard   SYS#{p}#{account}#{n:02d}   SHARD
transaction record     TXN#{p}#{txn}               TXN
=====================  ==========================  ============================

Transaction records are indexed by order id on ``gsi1`` (ORDER#{p}#{order})
and by owner on ``gsi2`` (OWNER#{p}#{a}, newest first by created time).
Capability modules add their own rows under the account partition with their
own sort-key prefixes (holds ``H#``, lots ``L#``, notifications ``N#``...).
"""

from __future__ import annotations

import zlib

from tallybook.store.port import Key

#: shards of each system account and of the account directory
SHARDS = 16


def shard_of(value: str, shards: int = SHARDS) -> int:
    return zlib.crc32(value.encode()) % shards


def program(p: str) -> Key:
    return Key(f"PROG#{p}", "PROG")


PROGRAMS_PARTITION = "PROGRAMS"


def program_directory(p: str) -> Key:
    return Key(PROGRAMS_PARTITION, p)


def account_partition(p: str, a: str) -> str:
    return f"ACCT#{p}#{a}"


def account_head(p: str, a: str) -> Key:
    return Key(account_partition(p, a), "HEAD")


#: every history entry of an account, whatever its fund
ENTRIES_PREFIX = "E#"


def entry_prefix(fund: str) -> str:
    return f"{ENTRIES_PREFIX}{fund}#"


def entry_fund(sort_key: str) -> str:
    """The fund of a history entry's sort key (``E#{fund}#{us}#{seq}``)."""
    return sort_key.split("#")[1]


def entry(p: str, a: str, fund: str, us: int, seq: int) -> Key:
    return Key(account_partition(p, a), f"{entry_prefix(fund)}{us:016d}#{seq:012d}")


def entry_time_bound(fund: str, us: int) -> str:
    return f"{entry_prefix(fund)}{us:016d}"


def entry_us(sort_key: str) -> int:
    """The microseconds of a history entry's sort key (``E#{fund}#{us}#{seq}``)."""
    return int(sort_key.split("#")[-2])


def time_window(prefix: str, since_us: int | None, until_us: int | None) -> tuple[str, str]:
    """Sort-key bounds of the rows under ``prefix`` sorted by a 16-digit time
    (``{prefix}{us:016d}#...``), from ``since_us`` (inclusive) to ``until_us``
    (exclusive); either may be open."""
    low = prefix if since_us is None else f"{prefix}{since_us:016d}"
    high = prefix + "~" if until_us is None else f"{prefix}{until_us - 1:016d}#~"
    return low, high


def directory_partition(p: str, shard: int) -> str:
    return f"DIR#{p}#{shard:02d}"


def directory(p: str, a: str) -> Key:
    return Key(directory_partition(p, shard_of(a)), a)


def system_partition(p: str, account: str, shard: int) -> str:
    """Each shard of a system account is its own partition, so no partition is hot."""
    return f"SYS#{p}#{account}#{shard:02d}"


def system_shard(p: str, account: str, txn_id: str) -> Key:
    return Key(system_partition(p, account, shard_of(txn_id)), "SHARD")


def system_shards(p: str, account: str) -> list[Key]:
    """Every shard of a system account (one BatchGetItem reads them all)."""
    return [Key(system_partition(p, account, n), "SHARD") for n in range(SHARDS)]


def transaction(p: str, txn_id: str) -> Key:
    return Key(f"TXN#{p}#{txn_id}", "TXN")


def order_index(p: str, order_id: str) -> str:
    return f"ORDER#{p}#{order_id}"


def owner_index(p: str, a: str) -> str:
    return f"OWNER#{p}#{a}"


def fund_attr(fund: str) -> str:
    """Top-level attribute of a system shard that holds one fund's balance."""
    return f"f_{fund}"


# --- API keys and HTTP idempotency (services/apikeys.py, http/idempotency.py) ---


def api_key(key_id: str) -> Key:
    """One item per API key: program, scopes, sha256 of the secret, revocation."""
    return Key(f"APIKEY#{key_id}", "KEY")


def api_key_index(p: str) -> str:
    """``gsi1`` partition listing a program's API keys (newest last)."""
    return f"APIKEYS#{p}"


def idempotent_response(p: str, idempotency_key: str) -> Key:
    """The stored HTTP response of a POST, by (program, Idempotency-Key); has a TTL."""
    return Key(f"IDEM#{p}#{idempotency_key}", "IDEM")


# --- notifications (services/notifications/service.py) -------------------------------
# In the account partition: one active row per type (invariant 6 by
# construction), history rows by creation time, idempotency rows per key.

NOTIFICATION_ACTIVE_PREFIX = "N#A#"
NOTIFICATION_HISTORY_PREFIX = "N#H#"


def notification_active(p: str, a: str, type_: str) -> Key:
    return Key(account_partition(p, a), f"{NOTIFICATION_ACTIVE_PREFIX}{type_}")


def notification_history(p: str, a: str, created_us: int, notification_id: str) -> Key:
    return Key(
        account_partition(p, a), f"{notification_history_bound(created_us)}#{notification_id}"
    )


def notification_history_bound(us: int) -> str:
    return f"{NOTIFICATION_HISTORY_PREFIX}{us:016d}"


def notification_idempotency(p: str, a: str, idempotency_key: str) -> Key:
    return Key(account_partition(p, a), f"N#K#{idempotency_key}")


# --- wallet (capability B): grants, holds, charge intents, due index --------
#
# Bonus grants  ACCT#{p}#{a}  G#{expires_us:016d}#{grant}  (earliest expiry first)
# Holds         ACCT#{p}#{a}  H#{hold}                     (authorisations, held credits)
# Charge intent ACCT#{p}#{a}  C#{txn}                      (external charge in flight)
# Rows that fall due later (grant expiry, hold deadline, charge grace) sit in
# the sparse gsi1 partition WDUE#{p}#{kind}#{shard:02d}, sorted by due time,
# until they are resolved; the jobs query it instead of scanning.

WALLET_GRANT_PREFIX = "G#"
WALLET_HOLD_PREFIX = "H#"
WALLET_CHARGE_PREFIX = "C#"


def wallet_grant(p: str, a: str, expires_us: int, grant_id: str) -> Key:
    return Key(account_partition(p, a), f"{WALLET_GRANT_PREFIX}{expires_us:016d}#{grant_id}")


def wallet_grant_bound(expires_us: int) -> str:
    return f"{WALLET_GRANT_PREFIX}{expires_us:016d}"


def wallet_hold(p: str, a: str, hold_id: str) -> Key:
    return Key(account_partition(p, a), f"{WALLET_HOLD_PREFIX}{hold_id}")


def wallet_charge(p: str, a: str, txn_id: str) -> Key:
    return Key(account_partition(p, a), f"{WALLET_CHARGE_PREFIX}{txn_id}")


def wallet_due(p: str, kind: str, shard: int) -> str:
    return f"WDUE#{p}#{kind}#{shard:02d}"


# --- loyalty (capability C) --------------------------------------------------
# Lots sort by their cumulative end (earning order, which is also expiry order);
# tier history rows by time. Layout 2 keeps a lot on its earn's entry (the
# lot-expiry index on gsi2) and tier members in TIER#{p}#{tier}#{shard} rows
# (store/records/loyalty.py); the L# lot items are layout 1's.

LOT_PREFIX = "L#"
TIER_LOG_PREFIX = "TL#"
#: shards of each day of the lot-expiry index (the expiry job reads them all)
LOT_EXPIRY_SHARDS = 4


def lot(p: str, a: str, cum_end: int) -> Key:
    return Key(account_partition(p, a), f"{LOT_PREFIX}{cum_end:020d}")


def lot_after(cum: int) -> str:
    """Sort-key bound: lots whose cumulative end is above ``cum``."""
    return f"{LOT_PREFIX}{cum:020d}"


def lot_expiry_index(p: str, day: str, shard: int) -> str:
    return f"LOTEXP#{p}#{day}#{shard}"


def tier_index(p: str, tier: str) -> str:
    return f"TIER#{p}#{tier}"


def tier_log(p: str, a: str, us: int, txn_id: str) -> Key:
    return Key(account_partition(p, a), f"{TIER_LOG_PREFIX}{us:016d}#{txn_id}")


def loyalty_checkpoint(p: str) -> Key:
    return Key(f"LOYALTY#{p}", "EXPIRY")


# --- billing and reports (capability E) ----------------------------------------
# Billing records are filed by time bucket (one partition per bucket, so a
# report queries exactly the buckets of its window); a separate row per record
# id makes ingestion idempotent. One state row per program holds the bucket
# size, grace and the checkpoints; one row per written report lists it. Entries
# posted against @issuance/@redemption/@expiry are indexed on gsi1 by hour for
# the rewards-issued report. See services/billing/service.py and docs/billing.md.

#: shards of each hour of the rewards index (the report queries them all)
REWARD_INDEX_SHARDS = 4


def billing_bucket(p: str, bucket_iso: str) -> str:
    return f"BILL#{p}#{bucket_iso}"


def billing_record(p: str, bucket_iso: str, position: str) -> Key:
    """A record filed in its bucket; ``position`` is ``{time}#{random}``."""
    return Key(billing_bucket(p, bucket_iso), position)


def billing_record_id(p: str, record_id: str) -> Key:
    return Key(f"BILLID#{p}#{record_id}", "BILLID")


def billing_state(p: str) -> Key:
    return Key(f"BILLSTATE#{p}", "STATE")


def reports_partition(p: str) -> str:
    return f"REPORTS#{p}"


def report_row(p: str, kind: str, window: str) -> Key:
    return Key(reports_partition(p), f"{kind}#{window}")


def reward_index(p: str, hour: str, shard: int) -> str:
    return f"RWD#{p}#{hour}#{shard}"


# --- outbound events and webhooks (tallybook/webhooks) ----------------------
# An event is one item, found by id, written when the delivery worker fans it
# out. On SQLite each change events come from is written with it, as its new
# image in EVCHG#{p} (sorted by log position), until the worker derives its
# events; versions before kept the events themselves waiting in the sparse gsi1
# partition EVPEND#{p}. Subscriptions sit in one
# partition per program. Each (subscription, event) has a delivery record, in
# event order under its subscription, and while unfinished a queue row in
# WHQ#{p}#{sub} (a strongly consistent read of the queue, no index). The stream
# reader of DynamoDB keeps one checkpoint row per shard. Per-account order on a
# stream of several shards: a marker per lane (an account's fund: WHORD#{p}#{account}
# / F#{fund}; a hold: WHORDH#{p}#{hold} / H) holds the last unit taken in, and a
# unit read before its predecessor waits in WHPARK#{p} under its lane and seq.
# See docs/webhooks.md.


def event(p: str, event_id: str) -> Key:
    return Key(f"EVT#{p}#{event_id}", "EVT")


def events_pending(p: str) -> str:
    return f"EVPEND#{p}"


def webhook_subscriptions(p: str) -> str:
    return f"WHSUB#{p}"


WEBHOOK_SUBSCRIPTION_PREFIX = "SUB#"


def webhook_subscription(p: str, sub_id: str) -> Key:
    return Key(webhook_subscriptions(p), f"{WEBHOOK_SUBSCRIPTION_PREFIX}{sub_id}")


def webhook_deliveries(p: str, sub_id: str) -> str:
    return f"WHDLV#{p}#{sub_id}"


def webhook_delivery(p: str, sub_id: str, position: str) -> Key:
    return Key(webhook_deliveries(p, sub_id), position)


def webhook_queue(p: str, sub_id: str) -> str:
    return f"WHQ#{p}#{sub_id}"


def webhook_queued(p: str, sub_id: str, position: str) -> Key:
    return Key(webhook_queue(p, sub_id), position)


def webhook_lease(p: str, sub_id: str) -> Key:
    return Key(webhook_subscriptions(p), f"LEASE#{sub_id}")


def webhook_account_marker(p: str, account: str) -> Key:
    return Key(f"WHORD#{p}#{account}", "A")


def webhook_fund_marker(p: str, account: str, fund: str) -> Key:
    return Key(f"WHORD#{p}#{account}", f"F#{fund}")


def webhook_hold_marker(p: str, hold_id: str) -> Key:
    return Key(f"WHORDH#{p}#{hold_id}", "H")


def webhook_parked(p: str) -> str:
    return f"WHPARK#{p}"


def webhook_parked_on_account(account: str, seq: int) -> str:
    return f"A#{account}#{seq:012d}"


def webhook_parked_on_fund(account: str, fund: str, seq: int) -> str:
    return f"F#{account}#{fund}#{seq:012d}"


def webhook_parked_on_hold(hold_id: str, seq: int) -> str:
    return f"H#{hold_id}#{seq:012d}"


STREAM_CHECKPOINTS = "WHSTREAM"


def stream_checkpoint(shard_id: str) -> Key:
    return Key(STREAM_CHECKPOINTS, shard_id)


#: the ledger's items that outbound events are derived from (``change_source``)
TRANSACTION_SOURCE = "transaction"
NOTIFICATION_SOURCE = "notification"
REPORT_SOURCE = "report"


def change_source(pk: str, sk: str) -> str | None:
    """Which kind of the ledger's items the key ``pk``/``sk`` is, if events are derived
    from it: a transaction record, a notification history row or a report row; else
    ``None``. (On SQLite every write asks, inside the writer's lock: kept cheap.)"""
    if sk == "TXN":
        return TRANSACTION_SOURCE if pk.startswith("TXN#") else None
    if sk.startswith(NOTIFICATION_HISTORY_PREFIX):
        return NOTIFICATION_SOURCE if pk.startswith("ACCT#") else None
    if pk.startswith("REPORTS#"):
        return REPORT_SOURCE
    return None


def event_changes(p: str) -> str:
    """SQLite's change log: the new images events are derived from, by log position."""
    return f"EVCHG#{p}"
