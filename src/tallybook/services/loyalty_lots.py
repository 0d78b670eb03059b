"""Reading an account's loyalty lots (see domain/tiers.py for the lot arithmetic)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from tallybook.domain.tiers import NEVER, lot_remaining
from tallybook.store import keys
from tallybook.store.port import Item, ItemStore, SortCondition


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


def expiry_day(expires: str) -> str:
    """The UTC day (``YYYY-MM-DD``) of an ISO expiry time."""
    return expires[:10]


def lot_shard(account: str) -> int:
    return zlib.crc32(account.encode()) % keys.LOT_EXPIRY_SHARDS


def parse_expiry(expires: str) -> datetime | None:
    if expires == NEVER:
        return None
    return datetime.fromisoformat(expires).astimezone(UTC)


def lot_of(item: Item, used: int) -> ExpiringLot:
    amount = cast(int, item["amount"])
    cum_end = cast(int, item["cum_end"])
    return ExpiringLot(
        expires=parse_expiry(cast(str, item["expires"])),
        points=lot_remaining(amount, cum_end, used),
        amount=amount,
        earned_at=cast(str, item["earned_at"]),
        order_id=cast(str | None, item.get("order_id")),
        txn_id=cast(str, item["txn_id"]),
        cum_end=cum_end,
    )


def read_lots(
    store: ItemStore,
    program: str,
    account: str,
    used: int,
    *,
    until: datetime | None = None,
    limit: int = 100,
) -> list[ExpiringLot]:
    """Lots with points left (cumulative end above ``used``), oldest first, that
    expire at or before ``until`` (every live lot when ``until`` is None)."""
    out: list[ExpiringLot] = []
    cursor: str | None = None
    while len(out) < limit:
        page = store.query(
            keys.account_partition(program, account),
            SortCondition.between(keys.lot_after(used + 1), keys.LOT_PREFIX + "~"),
            limit=min(limit - len(out), 100),
            cursor=cursor,
        )
        for item in page.items:
            lot = lot_of(item, used)
            if until is not None and (lot.expires is None or lot.expires > until):
                return out
            out.append(lot)
        if page.cursor is None:
            break
        cursor = page.cursor
    return out
