"""How loyalty's aggregates are stored: lots and tier membership.

**Lots ride on their earn's history entry.** An earn's entry in the loyalty
fund carries ``cum_end`` (the cumulative end of the lot), ``lot_amount`` and
``expires``, and sits on ``gsi2`` under ``LOTEXP#{p}#{day}#{shard}`` for the
expiry job. No item of its own, and nothing is deleted when a lot expires:
the member state's ``lots_used`` counter says how much of each lot is gone
(see :mod:`tallybook.domain.tiers`). A member's live lots are read from the
loyalty fund's history starting at ``live_from`` (a lower bound kept in the
member state), so the read covers the live lots and the entries between them,
not the whole history.

**Tier membership** is one row per member in ``TIER#{p}#{tier}#{shard}``
(16 shards per tier), written only when the tier changes: the head carries no
index key, so the many postings that do not change a tier write no index.
Each change also leaves a row in the member's partition (``TL#{us}#{txn}``),
the member's tier history.

**The expiry checkpoint** (``LOYALTY#{p}`` / ``EXPIRY``) is the last day the
expiry job has done.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import cast

from tallybook.domain.tiers import NEVER, lot_remaining
from tallybook.errors import DamagedItem, StoreValidationError
from tallybook.store import keys
from tallybook.store.port import (
    ITEM_ABSENT,
    Delete,
    Item,
    ItemStore,
    Key,
    Put,
    SortCondition,
    Value,
)
from tallybook.store.queries import cursor_number, encode_cursor
from tallybook.store.records.codec import iso, malformed, parse_iso, to_us

#: shards of each day of the lot-expiry index (the expiry job reads them all)
LOT_EXPIRY_SHARDS = keys.LOT_EXPIRY_SHARDS
TIER_SHARDS = keys.SHARDS


@dataclass(frozen=True, slots=True)
class ExpiringLot:
    """What is left of one earn's points, and when it expires (``None``: never)."""

    expires: datetime | None
    points: int
    amount: int
    earned_at: str
    order_id: str | None
    txn_id: str
    cum_end: int
    #: microseconds of the earn's history entry
    at_us: int
    #: the earn's partner (its metadata ``partner``; empty when it named none)
    partner: str = ""


def expiry_day(expires: str) -> str:
    """The UTC day (``YYYY-MM-DD``) of an ISO expiry time."""
    return expires[:10]


def lot_shard(account: str) -> int:
    return zlib.crc32(account.encode()) % LOT_EXPIRY_SHARDS


def parse_expiry(expires: str) -> datetime | None:
    if expires == NEVER:
        return None
    return datetime.fromisoformat(expires).astimezone(UTC)


def lot_fields(program_id: str, account: str, cum_end: int, amount: int, expires: str) -> Item:
    """Attributes that make an earn's history entry a lot."""
    fields: Item = {"cum_end": cum_end, "lot_amount": amount, "expires": expires}
    if expires != NEVER:
        day = expiry_day(expires)
        fields["gsi2pk"] = keys.lot_expiry_index(program_id, day, lot_shard(account))
        fields["gsi2sk"] = f"{account}#{cum_end:020d}"
    return fields


def lot_problem(item: Item) -> str | None:
    """What keeps a history entry that is a lot (it has ``cum_end``, ``lot_amount``
    or ``expires``) from being read as one; None if it reads, or is no lot."""
    if not any(name in item for name in ("cum_end", "lot_amount", "expires")):
        return None
    found = malformed(item, text=("expires",), ints=("cum_end", "lot_amount"))
    if found is not None:
        return f"lot: {found}"
    amount, cum_end = cast(int, item["lot_amount"]), cast(int, item["cum_end"])
    if amount <= 0:
        return f"lot: lot_amount {amount} is not positive"
    if cum_end < amount:
        return f"lot: cum_end {cum_end} is less than its lot_amount {amount}"
    try:
        parse_expiry(cast(str, item["expires"]))
    except ValueError:
        return f"lot: expires {item['expires']!r} is not a time"
    return None


def lot_span(item: Item) -> tuple[int, int] | None:
    """``(cum_end, lot_amount)`` of a history entry that is a lot (one that reads:
    see :func:`lot_problem`), None if it is no lot."""
    if "cum_end" not in item:
        return None
    return cast(int, item["cum_end"]), cast(int, item["lot_amount"])


def lot_of(item: Item, used: int) -> ExpiringLot:
    """The lot an earn's entry holds; :class:`DamagedItem` naming the entry and what
    is wrong when it does not read (its amounts are looked at, the rest caught:
    every earn and redeem of a member with lots reads them)."""
    amount, cum_end = item.get("lot_amount"), item.get("cum_end")
    if type(amount) is int and type(cum_end) is int:
        try:
            return _lot(item, amount, cum_end, used)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise damaged_lot(item, f"{type(exc).__name__}: {exc}") from exc
    raise damaged_lot(item)


def damaged_lot(item: Item, why: str = "it does not read as a lot") -> DamagedItem:
    """What to raise of an earn's entry whose lot does not read."""
    problem = lot_problem(item) or why
    return DamagedItem(
        f"loyalty lot {item.get('sk')} of {item.get('account')} ({item.get('pk')}) is "
        f"damaged: {problem}"
    )


def _lot(item: Item, amount: int, cum_end: int, used: int) -> ExpiringLot:
    return ExpiringLot(
        expires=parse_expiry(cast(str, item["expires"])),
        points=lot_remaining(amount, cum_end, used),
        amount=amount,
        earned_at=cast(str, item["created_at"]),
        order_id=cast(str | None, item.get("order_id")),
        txn_id=cast(str, item["txn_id"]),
        cum_end=cum_end,
        at_us=keys.entry_us(cast(str, item["sk"])),
        partner=cast(dict[str, str], item.get("metadata") or {}).get("partner", ""),
    )


def iter_live_lots(
    store: ItemStore, program: str, account: str, fund: str, live_from: int, used: int
) -> Iterator[ExpiringLot]:
    """Lots with points left, oldest (and so earliest expiring) first."""
    prefix = keys.entry_prefix(fund)
    sort = SortCondition.between(keys.entry_time_bound(fund, live_from), prefix + "~")
    partition = keys.account_partition(program, account)
    for item in store.query_all(partition, sort, page_size=100):
        if "cum_end" not in item:
            continue
        cum_end = item["cum_end"]
        if type(cum_end) is not int:
            raise damaged_lot(item)
        if cum_end > used:
            yield lot_of(item, used)


def accounts_due(store: ItemStore, program: str, day: str) -> list[str]:
    """Accounts with a lot expiring on ``day`` (one query per shard of the day).

    Through an eventually consistent index, which is safe here: a lot's entry
    is indexed when it is earned, a whole expiry period before its day comes,
    so no lag hides it by then; the job then reads the account's lots from the
    table, by key range."""
    accounts: list[str] = []
    for shard in range(LOT_EXPIRY_SHARDS):
        part = keys.lot_expiry_index(program, day, shard)
        accounts += [cast(str, i["account"]) for i in store.query_all(part, index="gsi2")]
    return list(dict.fromkeys(accounts))


# --- tier membership ---------------------------------------------------------


def _tier_partition(program: str, tier: str, shard: int) -> str:
    return f"{keys.tier_index(program, tier)}#{shard:02d}"


def _membership_key(program: str, tier: str, account: str) -> Key:
    shard = zlib.crc32(account.encode()) % TIER_SHARDS
    return Key(_tier_partition(program, tier, shard), account)


def in_tier_index(store: ItemStore, program: str, tier: str, account: str) -> bool:
    """Whether ``account`` has its row among ``tier``'s members (one key read)."""
    return store.get(_membership_key(program, tier, account)) is not None


def membership_moves(
    program: str, account: str, previous: str | None, tier: str, at: str
) -> list[Put | Delete]:
    """The writes that move ``account`` from tier ``previous`` to ``tier``."""
    row: Item = {**_membership_key(program, tier, account).as_item(), "account": account}
    row["since"] = at
    moves: list[Put | Delete] = [Put(row)]
    if previous is not None and previous != tier:
        moves.append(Delete(_membership_key(program, previous, account)))
    return moves


def members_page(
    store: ItemStore, program: str, tier: str, *, limit: int, cursor: str | None
) -> tuple[list[str], str | None]:
    """Member ids of a tier, shard by shard in account order, and the next cursor."""
    shard, inner = 0, None
    if cursor is not None:
        shard, position = cursor_number(cursor, "shard", below=TIER_SHARDS)
        if position.get("tier", tier) != tier:  # another tier's page: it would skip shards
            raise StoreValidationError("cursor does not belong to this query")
        inner = position.get("inner") or None
    out: list[str] = []
    while shard < TIER_SHARDS and len(out) < limit:
        page = store.query(
            _tier_partition(program, tier, shard), limit=limit - len(out), cursor=inner
        )
        out += [cast(str, i["account"]) for i in page.items]
        if page.cursor is None:
            shard, inner = shard + 1, None
        else:
            inner = page.cursor
    if shard >= TIER_SHARDS:
        return out, None
    position_out: dict[str, Value] = {"tier": tier, "shard": str(shard), "inner": inner or ""}
    return out, encode_cursor(position_out)


# --- tier history --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TierChange:
    at: datetime
    previous: str | None
    tier: str
    reason: str
    txn_id: str


def tier_change_put(program: str, account: str, change: TierChange) -> Put:
    row: Item = {
        **keys.tier_log(program, account, to_us(change.at), change.txn_id).as_item(),
        "account": account,
        "previous": change.previous,
        "tier": change.tier,
        "reason": change.reason,
        "txn_id": change.txn_id,
        "at": iso(change.at),
    }
    return Put(row)


def tier_changes_page(
    store: ItemStore, program: str, account: str, *, limit: int, cursor: str | None
) -> tuple[list[TierChange], str | None]:
    """A member's tier changes, newest first, and the next page's cursor."""
    page = store.query(
        keys.account_partition(program, account),
        SortCondition.begins_with(keys.TIER_LOG_PREFIX),
        forward=False,
        limit=limit,
        cursor=cursor,
    )
    changes = [
        TierChange(
            at=parse_iso(cast(str, i["at"])),
            previous=cast(str | None, i.get("previous")),
            tier=cast(str, i["tier"]),
            reason=cast(str, i["reason"]),
            txn_id=cast(str, i["txn_id"]),
        )
        for i in page.items
    ]
    return changes, page.cursor


# --- the expiry job's checkpoint --------------------------------------------------


def read_expiry_checkpoint(store: ItemStore, program: str) -> date | None:
    """The last day the expiry job has done, if it ever ran (or was started)."""
    item = store.get(keys.loyalty_checkpoint(program))
    return None if item is None else date.fromisoformat(cast(str, item["through"]))


def expiry_checkpoint_put(program: str, through: date, *, first: bool = False) -> Put:
    """The job has done every day up to ``through``; ``first``: only if none is set."""
    item: Item = {**keys.loyalty_checkpoint(program).as_item(), "through": through.isoformat()}
    return Put(item, ITEM_ABSENT if first else None)
