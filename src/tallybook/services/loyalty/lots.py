"""Reading a member's live loyalty lots (stored on their earns' history entries,
see store/records/loyalty.py; the lot arithmetic is in domain/tiers.py), and
how an earn or redeem meets lots past their date that the expiry job has not
expired yet: the plan raises :class:`LotsDue`, the caller expires them
(jobs.py) and plans again, so points past their date are never spent."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from datetime import datetime

from tallybook.domain.tiers import MemberState, lots_may_be_due, with_next_expiry
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
    return due_lots(store, program, fund, account, state, until, limit=limit)[0]


def due_lots(
    store: ItemStore,
    program: str,
    fund: str,
    account: str,
    state: MemberState,
    until: datetime | None,
    *,
    limit: int = 100,
) -> tuple[list[ExpiringLot], ExpiringLot | None]:
    """:func:`lots_until`, and the live lot after them (None: no lot left after them)."""
    out: list[ExpiringLot] = []
    for lot in iter_live_lots(store, program, account, fund, state.live_from, state.lots_used):
        if len(out) >= limit or (
            until is not None and (lot.expires is None or lot.expires > until)
        ):
            return out, lot
        out.append(lot)
    return out, None


def within_available(lots: list[ExpiringLot], available: int) -> list[ExpiringLot]:
    """``lots`` as the expiry job will take them: oldest first, never more in all
    than the member has available (points debited outside loyalty leave lots
    that the balance no longer covers; the job expires at most what is there)."""
    left = max(available, 0)
    out: list[ExpiringLot] = []
    for lot in lots:
        points = min(lot.points, left)
        if points <= 0:
            break
        left -= points
        out.append(lot if points == lot.points else replace(lot, points=points))
    return out


def expiring_lots(
    store: ItemStore,
    program: str,
    fund: str,
    account: str,
    state: MemberState,
    until: datetime,
    available: int,
) -> list[ExpiringLot]:
    """Every lot due by ``until`` as the expiry job will take it (:func:`within_available`
    of :func:`lots_until`, however many lots): what the expiring query, the
    PointsExpiring warning and a posting's tier check count alike."""
    lots = lots_until(store, program, fund, account, state, until, limit=sys.maxsize)
    return within_available(lots, available)


class LotsDue(Exception):
    """A plan met a member whose head shows that a lot may be past its date: the
    caller expires the member's overdue lots and plans again."""


@dataclass
class Settled:
    """Whether the member's overdue lots were expired before this plan, and the
    expiry of the oldest lot then left (``next_expiry``; None: none or not known)."""

    done: bool = False
    next_expiry: str | None = None

    def state(self, state: MemberState, now: datetime) -> MemberState:
        """The state to plan with; raises :class:`LotsDue` while a lot may be due
        and nothing was settled yet."""
        if not self.done:
            if lots_may_be_due(state, now):
                raise LotsDue
            return state
        return with_next_expiry(state, self.next_expiry)
