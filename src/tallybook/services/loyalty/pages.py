"""Paged loyalty reads: points expiring soon, and the members of a tier with their points.

The expiring total covers every live lot within the horizon, not only the page
of lots returned (a member with 120 one-point lots expiring has 120 points
expiring, whatever the page size); lots come oldest first, paged by the
cumulative end of the last lot shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tallybook.domain.loyalty import LoyaltyConfig
from tallybook.domain.model import Account
from tallybook.domain.tiers import MemberState, qualifying_points
from tallybook.errors import StoreValidationError
from tallybook.services.loyalty.lots import expiring_lots
from tallybook.services.loyalty.values import MemberStanding
from tallybook.store.port import ItemStore, Value
from tallybook.store.queries import cursor_number, encode_cursor
from tallybook.store.records.ledger import read_heads
from tallybook.store.records.loyalty import ExpiringLot

#: heads read per batch request
_BATCH = 100


@dataclass(frozen=True, slots=True)
class ExpiringPage:
    #: points expiring within the horizon over every lot, not only this page's
    points: int
    lots: list[ExpiringLot]
    cursor: str | None


def expiring_page(
    store: ItemStore,
    program: str,
    fund: str,
    account: str,
    state: MemberState,
    horizon: datetime,
    available: int,
    *,
    limit: int,
    cursor: str | None,
) -> ExpiringPage:
    """One page of lots expiring by ``horizon``, oldest first, with the total of all
    (at most ``available``, the member's available points: :func:`expiring_lots`)."""
    after, position = cursor_number(cursor, "after") if cursor else (0, {})
    if position.get("account", account) != account:  # another member's: it would skip lots
        raise StoreValidationError("cursor does not belong to this query")
    every = expiring_lots(store, program, fund, account, state, horizon, available)
    rest = [lot for lot in every if lot.cum_end > after]
    page = rest[:limit]
    more = len(rest) > limit
    position_out: dict[str, Value] = (
        {"account": account, "after": str(page[-1].cum_end)} if page else {}
    )
    return ExpiringPage(
        points=sum(lot.points for lot in every),
        lots=page,
        cursor=encode_cursor(position_out) if more else None,
    )


def standings(
    store: ItemStore, program: str, cfg: LoyaltyConfig, accounts: Sequence[str], now: datetime
) -> list[MemberStanding]:
    """Points and qualifying points of ``accounts`` (their heads, one batch per 100)."""
    found: dict[str, Account] = {}
    for start in range(0, len(accounts), _BATCH):
        chunk = accounts[start : start + _BATCH]
        for acct in read_heads(store, program, chunk):
            found[acct.id] = acct
    out = []
    for account in accounts:
        if account not in found:
            continue  # gone between the membership read and this one
        acct = found[account]
        balance = acct.fund(cfg.fund).balance
        state = MemberState.from_value(acct.attributes.get("loyalty"))
        out.append(MemberStanding(account, balance, qualifying_points(cfg, state, now, balance)))
    return out
