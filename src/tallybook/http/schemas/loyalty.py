"""Request and response bodies of loyalty: earn, redeem, tiers, members, expiring points."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from tallybook.domain.loyalty_rules import (
    BASES,
    DOWNGRADE_RULES,
    MAX_CAMPAIGNS,
    MAX_MULTIPLIER,
    MAX_PLACES,
    MAX_TIERS,
    ROUNDINGS,
    WINDOWS,
)
from tallybook.domain.money import MAX_AMOUNT
from tallybook.http.schemas.common import FUND_PATTERN, ID_PATTERN, Time, TimeOut
from tallybook.http.schemas.ledger import Metadata, TransactionOut
from tallybook.services.loyalty.service import MAX_ORDER_ID, EarnResult, RedeemResult

Id = Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN)]
#: an order id: its earn's transaction id is ``order:{order_id}``, at most 128 characters
OrderId = Annotated[str, Field(min_length=1, max_length=MAX_ORDER_ID, pattern=ID_PATTERN)]


def _int(low: int, high: int | None = None, description: str = "") -> dict[str, Any]:
    limits: dict[str, Any] = {"type": "integer", "minimum": low}
    if high is not None:
        limits["maximum"] = high
    return {**limits, "description": description} if description else limits


def _table(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties, **more}


_MULTIPLIER = {
    "anyOf": [
        {"type": "number", "exclusiveMinimum": 0, "maximum": int(MAX_MULTIPLIER)},
        {"type": "string", "description": 'a decimal, such as "1.5"'},
    ],
    "description": f"positive, at most {int(MAX_MULTIPLIER)}, with at most {MAX_PLACES} digits "
    "after the decimal point",
}
_WHEN = {"type": "string", "description": "ISO date or date-time (UTC without a zone)"}
#: the body of ``PUT /v1/program/loyalty`` (examples/loyalty.toml as JSON), with
#: every limit :func:`tallybook.domain.loyalty_parse.parse_config` enforces (a 400
#: ``invalid-config`` beyond)
LOYALTY_RULES_SCHEMA: dict[str, Any] = _table(
    {
        "fund": {"type": "string", "pattern": FUND_PATTERN, "default": "points"},
        "earn": _table(
            {
                "points_per_unit": _MULTIPLIER,
                "unit_size": _int(1, description="minor units per earning unit"),
                "rounding": {"enum": list(ROUNDINGS)},
                "currency": {"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9_]{0,15}$"},
            }
        ),
        "tiers": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_TIERS,
            "items": _table(
                {
                    "name": {"type": "string", "pattern": ID_PATTERN, "maxLength": 128},
                    "threshold": _int(0, description="increasing; the first tier's is 0"),
                    "multiplier": _MULTIPLIER,
                },
                required=["name", "threshold"],
            ),
        },
        "qualification": _table(
            {
                "window": {"enum": list(WINDOWS)},
                "months": _int(1, 120),
                "basis": {"enum": list(BASES)},
            }
        ),
        "downgrade": _table(
            {
                "rule": {"enum": list(DOWNGRADE_RULES)},
                "hold_months": _int(0, 120),
                "max_steps": _int(0, MAX_TIERS),
            }
        ),
        "campaigns": {
            "type": "array",
            "maxItems": MAX_CAMPAIGNS,
            "items": _table(
                {
                    "id": {"type": "string", "pattern": ID_PATTERN, "maxLength": 128},
                    "starts": _WHEN,
                    "ends": _WHEN,
                    "multiplier": _MULTIPLIER,
                    "bonus": _int(0, 10**12),
                    "tiers": {"type": "array", "items": {"type": "string"}},
                    "min_amount": _int(0),
                },
                required=["id", "starts", "ends"],
            ),
        },
        "expiry": _table(
            {
                "days": _int(1, 36_500, "give days or months, not both"),
                "months": _int(1, 1200),
                "warn_days": _int(0, 366),
            }
        ),
    }
)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class EarnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    amount: int = Field(strict=True, ge=1, le=MAX_AMOUNT, description="order amount in minor units")
    currency: str | None = Field(
        None,
        pattern=r"^[A-Za-z][A-Za-z0-9_]{0,15}$",
        description="the program's currency (the default); another is a 422",
    )
    at: Time | None = Field(None, description="when the order was placed; default now")
    description: str | None = Field(None, max_length=500)
    metadata: Metadata | None = None


class EarnOut(_Out):
    order_id: str
    account: str
    points: int
    tier: str
    previous_tier: str | None
    lot_expires: str | None = Field(
        description="when the order's points expire (a time, `2028-01-31T12:00:11.000000Z`); "
        "`never` when the rules set no expiry; null when the order earned no points"
    )
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
    qualified_at: TimeOut | None
    next_tier: str | None
    points_to_next_tier: int | None


class TierChangeOut(_Out):
    at: TimeOut
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
    expires: TimeOut | None
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
