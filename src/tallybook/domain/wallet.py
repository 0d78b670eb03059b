"""Pure wallet rules: funds, spend order, bonus grants, holds and the balance view.

A wallet has three funds: ``bonus`` (made of expiring grants), ``store_credit``
and ``cash``. A debit spends bonus first (the grant that expires first, first),
then store credit, then cash. Nothing here does I/O: the services read grants
and holds from storage and ask these functions what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from tallybook.domain.ids import check_client_txn_id
from tallybook.domain.model import FundState
from tallybook.errors import ValidationError

BONUS = "bonus"
STORE_CREDIT = "store_credit"
CASH = "cash"
#: the order a debit spends funds in
SPEND_ORDER = (BONUS, STORE_CREDIT, CASH)
#: funds that can receive a plain or held credit (bonus comes only from grants)
CREDIT_FUNDS = (STORE_CREDIT, CASH)

DEFAULT_HOLD_SECONDS = 7 * 24 * 3600
MAX_HOLD_SECONDS = 90 * 24 * 3600
#: hold ids become part of derived transaction ids (``{hold}:capture``)
MAX_HOLD_ID = 100
#: a debit or capture touches at most this many grant items in one transaction
MAX_GRANTS_PER_TXN = 40


class HoldKind(StrEnum):
    DEBIT = "debit"  # an authorisation: funds withheld until capture or void
    CREDIT = "credit"  # a held credit (sale proceeds): pending until release


class HoldStatus(StrEnum):
    ACTIVE = "active"
    CAPTURED = "captured"
    VOIDED = "voided"
    EXPIRED = "expired"
    RELEASED = "released"


@dataclass(frozen=True, slots=True)
class Grant:
    """A bonus grant: ``available`` is what is neither spent, held nor expired away."""

    id: str
    awarded: int
    available: int
    expires_at: datetime
    granted_at: datetime

    def expired(self, now: datetime) -> bool:
        return self.expires_at <= now


@dataclass(frozen=True, slots=True)
class GrantTake:
    """An amount taken from (or returned to) one grant."""

    grant_id: str
    expires_at: datetime
    amount: int


@dataclass(frozen=True, slots=True)
class Allocation:
    """How a debit of ``requested`` splits over the funds, and what is missing."""

    requested: int
    funds: dict[str, int]
    grants: tuple[GrantTake, ...]
    shortfall: int

    @property
    def covered(self) -> int:
        return self.requested - self.shortfall


def in_spend_order(per_fund: Mapping[str, int]) -> dict[str, int]:
    """``per_fund`` keyed in spend order (other keys, such as ``total``, last), as it
    was written: a DynamoDB map comes back in no particular order."""
    order = {fund: i for i, fund in enumerate(SPEND_ORDER)}
    return dict(sorted(per_fund.items(), key=lambda kv: order.get(kv[0], len(SPEND_ORDER))))


def spendable_grants(grants: Iterable[Grant], now: datetime) -> list[Grant]:
    """Unexpired grants with something left, earliest expiry first."""
    live = [g for g in grants if not g.expired(now) and g.available > 0]
    return sorted(live, key=lambda g: (g.expires_at, g.id))


def allocate(
    amount: int,
    grants: Iterable[Grant],
    available: Mapping[str, int],
    now: datetime,
) -> Allocation:
    """Split ``amount`` in spend order; ``available`` gives store credit and cash.

    Bonus is limited by the unexpired grants (and by ``available[bonus]`` when
    given, a guard against a head that disagrees with its grants).
    """
    remaining = amount
    takes: list[GrantTake] = []
    bonus_cap = available.get(BONUS)
    bonus_taken = 0
    for g in spendable_grants(grants, now):
        if remaining == 0:
            break
        take = min(g.available, remaining)
        if bonus_cap is not None:
            take = min(take, bonus_cap - bonus_taken)
        if take <= 0:
            break
        takes.append(GrantTake(g.id, g.expires_at, take))
        bonus_taken += take
        remaining -= take
    funds: dict[str, int] = {}
    if bonus_taken:
        funds[BONUS] = bonus_taken
    for fund in (STORE_CREDIT, CASH):
        take = min(max(available.get(fund, 0), 0), remaining)
        if take > 0:
            funds[fund] = take
            remaining -= take
    if len(takes) > MAX_GRANTS_PER_TXN:
        raise ValidationError(
            f"this debit would spend from {len(takes)} bonus grants; at most "
            f"{MAX_GRANTS_PER_TXN} fit in one transaction - split it into smaller debits"
        )
    return Allocation(amount, funds, tuple(takes), remaining)


@dataclass(frozen=True, slots=True)
class CaptureSplit:
    """A capture of part of a hold: what is spent and what goes back."""

    captured: dict[str, int]
    captured_grants: tuple[GrantTake, ...]
    released: dict[str, int]
    released_grants: tuple[GrantTake, ...]


def split_capture(
    amounts: Mapping[str, int], grants: Sequence[GrantTake], capture: int
) -> CaptureSplit:
    """Capture ``capture`` of a hold in spend order; the rest is released."""
    total = sum(amounts.values())
    if not 0 <= capture <= total:
        raise ValidationError(f"capture amount must be at most the amount held ({total})")
    remaining = capture
    captured_grants: list[GrantTake] = []
    released_grants: list[GrantTake] = []
    for g in sorted(grants, key=lambda t: (t.expires_at, t.grant_id)):
        take = min(g.amount, remaining)
        remaining -= take
        if take:
            captured_grants.append(GrantTake(g.grant_id, g.expires_at, take))
        if g.amount - take:
            released_grants.append(GrantTake(g.grant_id, g.expires_at, g.amount - take))
    captured: dict[str, int] = {}
    released: dict[str, int] = {}
    bonus_captured = sum(t.amount for t in captured_grants)
    for fund in SPEND_ORDER:
        held = amounts.get(fund, 0)
        if fund == BONUS:
            take = bonus_captured
        else:
            take = min(held, remaining)
            remaining -= take
        if take:
            captured[fund] = take
        if held - take:
            released[fund] = held - take
    return CaptureSplit(captured, tuple(captured_grants), released, tuple(released_grants))


def check_hold_id(hold_id: object, what: str = "hold id") -> str:
    """A hold id a client chooses: a client transaction id of 1-``MAX_HOLD_ID`` characters."""
    return check_client_txn_id(hold_id, what, max_length=MAX_HOLD_ID)


def hold_deadline(now: datetime, seconds: int | None) -> datetime:
    if seconds is None:
        seconds = DEFAULT_HOLD_SECONDS
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise ValidationError("the hold duration must be an integer number of seconds")
    if not 1 <= seconds <= MAX_HOLD_SECONDS:
        raise ValidationError(f"a hold lasts from 1 to {MAX_HOLD_SECONDS} seconds")
    return now + timedelta(seconds=seconds)


def check_future(when: datetime, now: datetime, what: str) -> datetime:
    if when.tzinfo is None:
        raise ValidationError(f"{what} needs a time zone (for example 2026-05-01T00:00:00Z)")
    if when <= now:
        raise ValidationError(f"{what} must be in the future")
    return when


@dataclass(frozen=True, slots=True)
class FundView:
    fund: str
    unit: str
    total: int
    withheld: int
    available: int


@dataclass(frozen=True, slots=True)
class WalletBalance:
    account: str
    funds: tuple[FundView, ...]
    total_available: int
    as_of: datetime

    def fund(self, name: str) -> FundView:
        return next(f for f in self.funds if f.fund == name)


def unexpired_bonus(grants: Iterable[Grant], now: datetime) -> int:
    return sum(g.available for g in grants if not g.expired(now))


def fund_views(
    states: Mapping[str, FundState],
    units: Mapping[str, str],
    grants: Iterable[Grant] | None,
    now: datetime,
) -> tuple[FundView, ...]:
    """Per fund: total, withheld, available. Bonus counts unexpired grants only
    (plus what holds reserved from grants while they were valid); ``grants`` is
    None when the caller knows they hold exactly the fund's available amount.

    Bonus available never exceeds the fund's own available amount, should the
    fund have been debited outside the wallet."""
    views = []
    for fund in SPEND_ORDER:
        if fund not in units:
            continue
        state = states.get(fund, FundState())
        if fund == BONUS:
            free = state.available
            if grants is not None:
                free = max(0, min(unexpired_bonus(grants, now), free))
            views.append(FundView(fund, units[fund], free + state.held, state.held, free))
        else:
            views.append(FundView(fund, units[fund], state.balance, state.held, state.available))
    return tuple(views)


@dataclass(frozen=True, slots=True)
class Hold:
    """A hold as stored: an authorisation (debit) or a pending credit."""

    id: str
    account: str
    kind: HoldKind
    status: HoldStatus
    amounts: dict[str, int]
    grants: tuple[GrantTake, ...]
    deadline: datetime
    created_at: datetime
    captured: int = 0
    finished_at: datetime | None = None
    captured_funds: dict[str, int] = field(default_factory=dict)

    @property
    def amount(self) -> int:
        return sum(self.amounts.values())

    def overdue(self, now: datetime) -> bool:
        return self.status is HoldStatus.ACTIVE and self.deadline <= now


#: a :attr:`WalletMarks.grant_due` that never comes: no grant has anything left
NEVER_DUE = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class WalletMarks:
    """What the account head carries so that a wallet balance read is one
    request (``services/wallet/marks.py`` says how the marks are kept)."""

    #: no active hold falls due before this (None: not known)
    hold_due: datetime | None = None
    #: until this the unexpired grants hold exactly the free bonus
    #: (:data:`NEVER_DUE`: no grant has anything left; None: not known)
    grant_due: datetime | None = None
    #: the bonus fund's sequence number ``grant_due`` was computed at
    bonus_seq: int | None = None
