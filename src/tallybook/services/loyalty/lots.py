"""Reading a member's live loyalty lots (stored on their earns' history entries,
see store/records/loyalty.py; the lot arithmetic is in domain/tiers.py)."""

from __future__ import annotations

from datetime import datetime

from tallybook.domain.tiers import MemberState
from tallybook.store.port import ItemStore
from tallybook.store.records.loyalty import ExpiringLot, iter_live_lots


def lots_until(
    store: ItemStore,
    program: str,
    fund: str,
    account: str,
    state: MemberState,
    until: datetime | None,
    *,
    limit: int = 100,
) -> list[ExpiringLot]:
    """Lots with points left, oldest first, that expire at or before ``until``
    (every live lot when ``until`` is None), at most ``limit`` of them."""
    out: list[ExpiringLot] = []
    for lot in iter_live_lots(store, program, account, fund, state.live_from, state.lots_used):
        if len(out) >= limit or (
            until is not None and (lot.expires is None or lot.expires > until)
        ):
            break
        out.append(lot)
    return out
