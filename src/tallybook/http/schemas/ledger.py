"""Request and response bodies of the ledger core: programs, accounts, entries,
transactions (see :mod:`tallybook.http.schemas.common` for the convention)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tallybook.domain.ids import MAX_ID_LENGTH
from tallybook.domain.model import (
    Account,
    Balance,
    Entry,
    FundSpec,
    PostedLeg,
    Program,
    Transaction,
)
from tallybook.domain.money import MAX_AMOUNT
from tallybook.domain.postings import (
    MAX_ATTRIBUTE_NAME,
    MAX_ATTRIBUTE_VALUE,
    MAX_ATTRIBUTES,
    MAX_DESCRIPTION,
    MAX_LEGS,
    MAX_METADATA_KEYS,
    MAX_METADATA_VALUE,
)
from tallybook.http.schemas.common import FUND_PATTERN, LEG_ACCOUNT_PATTERN, Id, TimeOut

FundName = Annotated[str, Field(pattern=FUND_PATTERN, examples=["points"])]
Amount = Annotated[
    int,
    Field(strict=True, gt=0, le=MAX_AMOUNT, description="positive, in minor units"),
]
SignedAmount = Annotated[
    int,
    Field(
        strict=True, ge=-MAX_AMOUNT, le=MAX_AMOUNT, description="non-zero, signed, in minor units"
    ),
]
Metadata = Annotated[
    dict[
        Annotated[str, Field(min_length=1, max_length=64)],
        Annotated[str, Field(max_length=MAX_METADATA_VALUE)],
    ],
    Field(max_length=MAX_METADATA_KEYS, description="string values only"),
]
Description = Annotated[str, Field(max_length=MAX_DESCRIPTION)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- responses ---------------------------------------------------------------


class FundOut(BaseModel):
    name: str
    unit: str
    allow_overdraft: bool
    low_balance_threshold: int | None = None

    @classmethod
    def of(cls, f: FundSpec) -> FundOut:
        return cls(
            name=f.name,
            unit=f.unit,
            allow_overdraft=f.allow_overdraft,
            low_balance_threshold=f.low_balance_threshold,
        )


class ProgramOut(BaseModel):
    id: str
    name: str
    currency: str
    funds: list[FundOut]
    created_at: TimeOut

    @classmethod
    def of(cls, p: Program) -> ProgramOut:
        return cls(
            id=p.id,
            name=p.name,
            currency=p.currency,
            funds=[FundOut.of(f) for f in p.funds],
            created_at=p.created_at,
        )


class BalanceOut(BaseModel):
    fund: str
    unit: str
    balance: int
    held: int
    available: int

    @classmethod
    def of(cls, b: Balance) -> BalanceOut:
        return cls(fund=b.fund, unit=b.unit, balance=b.balance, held=b.held, available=b.available)


class BalancesOut(BaseModel):
    account: str
    balances: list[BalanceOut]


class AccountOut(BaseModel):
    account: str
    program: str
    created_at: TimeOut
    balances: list[BalanceOut]
    attributes: dict[str, Any]

    @classmethod
    def of(cls, a: Account, balances: list[Balance]) -> AccountOut:
        return cls(
            account=a.id,
            program=a.program,
            created_at=a.created_at,
            balances=[BalanceOut.of(b) for b in balances],
            attributes=dict(a.client_attributes),
        )


class EntryOut(BaseModel):
    account: str
    fund: str
    unit: str
    seq: int
    amount: int
    balance: int
    txn_id: str
    type: str
    created_at: TimeOut
    order_id: str | None = None
    description: str | None = None
    metadata: dict[str, str]

    @classmethod
    def of(cls, e: Entry) -> EntryOut:
        return cls(
            account=e.account,
            fund=e.fund,
            unit=e.unit,
            seq=e.seq,
            amount=e.amount,
            balance=e.balance,
            txn_id=e.txn_id,
            type=e.type,
            created_at=e.created_at,
            order_id=e.order_id,
            description=e.description,
            metadata=dict(e.metadata),
        )


class EntryPageOut(BaseModel):
    entries: list[EntryOut]
    cursor: str | None = Field(description="pass as ?cursor= for the next page; null at the end")


class LegOut(BaseModel):
    account: str
    fund: str
    unit: str
    amount: int
    balance: int | None = Field(None, description="resulting balance (customer accounts only)")
    seq: int | None = None

    @classmethod
    def of(cls, leg: PostedLeg) -> LegOut:
        return cls(
            account=leg.account,
            fund=leg.fund,
            unit=leg.unit,
            amount=leg.amount,
            balance=leg.balance,
            seq=leg.seq,
        )


class TransactionOut(BaseModel):
    id: str
    program: str
    type: str
    legs: list[LegOut]
    created_at: TimeOut
    order_id: str | None = None
    description: str | None = None
    metadata: dict[str, str]
    details: dict[str, Any]

    @classmethod
    def of(cls, t: Transaction) -> TransactionOut:
        return cls(
            id=t.id,
            program=t.program,
            type=t.type,
            legs=[LegOut.of(leg) for leg in t.legs],
            created_at=t.created_at,
            order_id=t.order_id,
            description=t.description,
            metadata=dict(t.metadata),
            details=dict(t.details),
        )


class TransactionPageOut(BaseModel):
    transactions: list[TransactionOut]
    cursor: str | None = None


class TransactionListOut(BaseModel):
    transactions: list[TransactionOut]


class SystemBalanceOut(BaseModel):
    """A system account's balance per fund (negative: what it issued)."""

    account: str
    balances: dict[str, int]


# --- requests ----------------------------------------------------------------


class OpenAccountIn(_In):
    account: Id
    attributes: (
        Annotated[
            dict[
                Annotated[str, Field(min_length=1, max_length=MAX_ATTRIBUTE_NAME)],
                Annotated[str, Field(max_length=MAX_ATTRIBUTE_VALUE)],
            ],
            Field(max_length=MAX_ATTRIBUTES),
        ]
        | None
    ) = None


class _Single(_In):
    account: Id
    fund: FundName
    description: Description | None = None
    metadata: Metadata | None = None


class CreditIn(_Single):
    """Money or points from outside the program into the account."""

    type: Literal["credit"]
    amount: Amount
    order_id: Id | None = None


class DebitIn(_Single):
    """Money or points out of the account, to outside the program."""

    type: Literal["debit"]
    amount: Amount
    order_id: Id | None = None


class AdjustIn(_Single):
    """A signed correction against the ``@adjustment`` system account."""

    type: Literal["adjust"]
    amount: SignedAmount


class LegIn(_In):
    account: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_ID_LENGTH,
            pattern=LEG_ACCOUNT_PATTERN,
            description="a customer account, or a system account such as @external",
        ),
    ]
    fund: FundName
    amount: SignedAmount


class RawIn(_In):
    """Balanced legs (they must sum to zero per unit), e.g. against system accounts."""

    type: Literal["raw"]
    legs: Annotated[list[LegIn], Field(min_length=1, max_length=MAX_LEGS)]
    order_id: Id | None = None
    description: Description | None = None
    metadata: Metadata | None = None


TransactionIn = Annotated[CreditIn | DebitIn | AdjustIn | RawIn, Field(discriminator="type")]


class TransferIn(_In):
    source: Id
    destination: Id
    fund: FundName
    amount: Amount
    description: Description | None = None
    metadata: Metadata | None = None


class ThresholdIn(_In):
    threshold: Annotated[int, Field(strict=True, ge=0, le=MAX_AMOUNT)] | None = Field(
        description="minor units: LowBalance when the available amount drops below it; null: never"
    )
