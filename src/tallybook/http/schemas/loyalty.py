"""Request and response bodies of loyalty: earn, redeem, tiers, members, expiring points."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from tallybook.domain.money import MAX_AMOUNT
from tallybook.http.schemas.common import ID_PATTERN, Time
from tallybook.http.schemas.ledger import Metadata, TransactionOut
from tallybook.services.loyalty.service import MAX_ORDER_ID, EarnResult, RedeemResult

Id = Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN)]
#: an order id: its earn's transaction id is ``order:{order_id}``, at most 128 characters
OrderId = Annotated[str, Field(min_length=1, max_length=MAX_ORDER_ID, pattern=ID_PATTERN)]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class EarnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    amount: int = Field(strict=True, ge=1, le=MAX_AMOUNT, description="order amount in minor units")
    currency: str | None = Field(None, description="default: the program's currency")
    at: Time | None = Field(None, description="when the order was placed; default now")
    description: str | None = Field(None, max_length=500)
    metadata: Metadata | None = None


class EarnOut(_Out):
    order_id: str
    account: str
    points: int
    tier: str
    previous_tier: str | None
    lot_expires: str | None
    campaigns: list[str]
    transaction: TransactionOut

    @classmethod
    def of(cls, r: EarnResult) -> EarnOut:
        return cls(
            order_id=r.order_id,
            account=r.account,
            points=r.points,
            tier=r.tier,
            previous_tier=r.previous_tier,
            lot_expires=r.lot_expires,
            campaigns=list(r.campaigns),
            transaction=TransactionOut.of(r.transaction),
        )


class RedeemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    points: int = Field(strict=True, ge=1, le=MAX_AMOUNT)
    reward_id: Id
    description: str | None = Field(None, max_length=500)
    metadata: Metadata | None = None


class RedeemOut(_Out):
    account: str
    reward_id: str
    points: int
    balance: int
    tier: str
    previous_tier: str | None
    transaction: TransactionOut

    @classmethod
    def of(cls, r: RedeemResult) -> RedeemOut:
        return cls(
            account=r.account,
            reward_id=r.reward_id,
            points=r.points,
            balance=r.balance,
            tier=r.tier,
            previous_tier=r.previous_tier,
            transaction=TransactionOut.of(r.transaction),
        )


class TierOut(_Out):
    account: str
    tier: str
    qualifying_points: int
    balance: int
    available: int
    lifetime_points: int
    qualified_at: datetime | None
    next_tier: str | None
    points_to_next_tier: int | None


class TierChangeOut(_Out):
    at: datetime
    previous: str | None
    tier: str
    reason: str
    txn_id: str


class TierHistoryOut(_Out):
    changes: list[TierChangeOut]
    cursor: str | None = None


class MemberOut(_Out):
    account: str
    points: int = Field(description="balance of the loyalty fund")
    qualifying_points: int = Field(description="what the tier rules count")


class MembersOut(_Out):
    tier: str
    members: list[MemberOut]
    accounts: list[str] = Field(description="the members' ids (the same order as `members`)")
    cursor: str | None = None


class ExpiringLotOut(_Out):
    expires: datetime | None
    points: int
    order_id: str | None
    earned_at: str


class ExpiringOut(_Out):
    account: str
    points: int = Field(description="points expiring within the horizon, over every lot")
    lots: list[ExpiringLotOut] = Field(description="one page of lots, oldest first")
    cursor: str | None = None


class OrderOut(_Out):
    order_id: str
    account: str
    points: int
    transaction: TransactionOut


class ExpiryReportOut(_Out):
    days: int
    accounts: int
    lots: int
    points: int
    transactions: int
    warned: int
    warnings_failed: int


class ReviewReportOut(_Out):
    members: int
    downgraded: int
