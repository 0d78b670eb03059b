"""Wallet request and response bodies (pydantic models at the HTTP edge).

Amounts are strict integers in minor units; times carry a time zone.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tallybook.domain.money import MAX_AMOUNT
from tallybook.domain.wallet import MAX_HOLD_SECONDS, Grant, Hold, WalletBalance
from tallybook.http.schemas.common import ID_PATTERN, Time, TimeOut
from tallybook.services.wallet.holds import HoldResult
from tallybook.services.wallet.records import WalletTransaction
from tallybook.services.wallet.service import MAX_GRANT_DAYS

Amount = Annotated[int, Field(strict=True, gt=0, le=MAX_AMOUNT, description="minor units")]
Description = Annotated[str | None, Field(max_length=500)]


class FundViewOut(BaseModel):
    fund: str
    unit: str
    total: int
    withheld: int
    available: int


class WalletBalanceOut(BaseModel):
    account: str
    funds: list[FundViewOut]
    total_available: int
    as_of: TimeOut

    @staticmethod
    def of(b: WalletBalance) -> WalletBalanceOut:
        return WalletBalanceOut(
            account=b.account,
            funds=[FundViewOut(**vars_of(f)) for f in b.funds],
            total_available=b.total_available,
            as_of=b.as_of,
        )


class GrantOut(BaseModel):
    grant_id: str
    awarded: int
    available: int
    expires_at: TimeOut
    granted_at: TimeOut

    @staticmethod
    def of(g: Grant) -> GrantOut:
        return GrantOut(
            grant_id=g.id,
            awarded=g.awarded,
            available=g.available,
            expires_at=g.expires_at,
            granted_at=g.granted_at,
        )


class WalletTransactionOut(BaseModel):
    id: str
    type: str
    account: str | None
    funds: dict[str, int] = Field(description="fund -> signed change of the owner's balance")
    held: dict[str, int] = Field(description="fund -> signed change of the amount withheld")
    availability: dict[str, int] = Field(description="available per fund after, and total")
    grants: list[dict[str, Any]]
    hold_id: str | None
    charge: dict[str, Any] | None
    order_id: str | None
    description: str | None
    created_at: TimeOut
    replay: bool

    @staticmethod
    def of(t: WalletTransaction) -> WalletTransactionOut:
        return WalletTransactionOut(
            id=t.id,
            type=str(t.type),
            account=t.account,
            funds=t.funds,
            held=t.held,
            availability=t.availability,
            grants=t.grants,
            hold_id=t.hold_id,
            charge=t.charge,
            order_id=t.order_id,
            description=t.description,
            created_at=t.created_at,
            replay=t.replay,
        )


class HoldOut(BaseModel):
    hold_id: str
    account: str
    kind: Literal["debit", "credit"]
    status: Literal["active", "captured", "voided", "expired", "released"]
    amount: int
    amounts: dict[str, int]
    captured: int
    captured_funds: dict[str, int]
    deadline: TimeOut
    created_at: TimeOut
    finished_at: TimeOut | None

    @staticmethod
    def of(h: Hold) -> HoldOut:
        return HoldOut(
            hold_id=h.id,
            account=h.account,
            kind=h.kind.value,
            status=h.status.value,
            amount=h.amount,
            amounts=h.amounts,
            captured=h.captured,
            captured_funds=h.captured_funds,
            deadline=h.deadline,
            created_at=h.created_at,
            finished_at=h.finished_at,
        )


class HoldResultOut(BaseModel):
    hold: HoldOut
    transaction: WalletTransactionOut | None = Field(
        description="what this call applied; null when there was nothing left to do"
    )

    @staticmethod
    def of(r: HoldResult) -> HoldResultOut:
        return HoldResultOut(
            hold=HoldOut.of(r.hold),
            transaction=WalletTransactionOut.of(r.transaction) if r.transaction else None,
        )


class _In(BaseModel):
    """Request bodies refuse unknown fields (422), so a misnamed field is never ignored."""

    model_config = ConfigDict(extra="forbid")


class GrantIn(_In):
    amount: Amount
    expires_at: Time | None = Field(
        default=None, description="when the grant expires (with a time zone)"
    )
    expires_in_days: Annotated[int | None, Field(strict=True, ge=1, le=MAX_GRANT_DAYS)] = Field(
        default=None, description="or: days from now until it expires"
    )
    description: Description = None

    @model_validator(mode="after")
    def _one_expiry(self) -> GrantIn:
        if (self.expires_at is None) == (self.expires_in_days is None):
            raise ValueError("give exactly one of expires_at or expires_in_days")
        return self


class CreditIn(_In):
    fund: Literal["cash", "store_credit"]
    amount: Amount
    description: Description = None


class HeldCreditIn(CreditIn):
    release_at: Time = Field(description="when the credit becomes available")


class DebitIn(_In):
    amount: Amount
    on_shortfall: Literal["reject", "charge"] = "reject"
    order_id: Annotated[str | None, Field(max_length=128, pattern=ID_PATTERN)] = None
    description: Description = None


class AuthorizeIn(_In):
    amount: Amount
    expires_in: Annotated[int | None, Field(strict=True, ge=1, le=MAX_HOLD_SECONDS)] = Field(
        default=None, description="seconds until the hold expires (default 7 days)"
    )
    description: Description = None


class CaptureIn(_In):
    amount: Amount | None = Field(default=None, description="default: the whole hold")


class WalletTransactionPageOut(BaseModel):
    transactions: list[WalletTransactionOut]
    cursor: str | None


class ReconcileOut(BaseModel):
    actions: list[str]
    refunds_failed: int = Field(
        description="charges whose refund the processor failed: listed in actions, "
        "left for the next run"
    )


def vars_of(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}
