"""The ledger's values: programs, funds, accounts, legs, entries and transactions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

#: system accounts receive the other side of customer postings
ISSUANCE = "@issuance"
REDEMPTION = "@redemption"
EXPIRY = "@expiry"
EXTERNAL = "@external"
ADJUSTMENT = "@adjustment"
SYSTEM_ACCOUNTS = (ISSUANCE, REDEMPTION, EXPIRY, EXTERNAL, ADJUSTMENT)


class TxnType(StrEnum):
    EARN = "earn"
    REDEEM = "redeem"
    CREDIT = "credit"
    DEBIT = "debit"
    ADJUST = "adjust"
    TRANSFER = "transfer"
    EXPIRE = "expire"
    AUTHORIZE = "authorize"
    CAPTURE = "capture"
    VOID = "void"
    RELEASE = "release"
    GRANT = "grant"
    CHARGE = "charge"


@dataclass(frozen=True, slots=True)
class FundSpec:
    """A fund every account of a program holds: its unit and its rules."""

    name: str
    unit: str
    allow_overdraft: bool = False
    low_balance_threshold: int | None = None


def default_funds(currency: str = "USD") -> tuple[FundSpec, ...]:
    return (
        FundSpec("points", "points"),
        FundSpec("cash", currency),
        FundSpec("store_credit", currency),
        FundSpec("bonus", currency),
    )


@dataclass(frozen=True, slots=True)
class Program:
    """A rewards, loyalty or wallet program; every key is namespaced by its id."""

    id: str
    name: str
    currency: str
    funds: tuple[FundSpec, ...]
    created_at: datetime
    settings: dict[str, Any] = field(default_factory=dict)
    #: version of the storage layout the program's data is written in
    #: (see tallybook.store.records.codec.LAYOUT)
    layout: int = 1

    def fund(self, name: str) -> FundSpec | None:
        for f in self.funds:  # a loop, not next() over a generator: a posting asks often
            if f.name == name:
                return f
        return None


@dataclass(frozen=True, slots=True)
class FundState:
    """One fund of one account as stored in the account's head item."""

    balance: int = 0
    held: int = 0
    seq: int = 0
    last_us: int = 0

    @property
    def available(self) -> int:
        return self.balance - self.held


@dataclass(frozen=True, slots=True)
class Account:
    program: str
    id: str
    created_at: datetime
    version: int
    funds: dict[str, FundState]
    #: internal state the services keep on the head (wallet marks, loyalty member state)
    attributes: dict[str, Any] = field(default_factory=dict)
    #: what the client gave when opening the account, kept apart from internal state
    client_attributes: dict[str, str] = field(default_factory=dict)
    #: (system account, fund) -> what this account's postings moved against it;
    #: a system account's balance is the sum over the program's accounts
    system: dict[tuple[str, str], int] = field(default_factory=dict)
    #: how many of the account's changes stood for outbound events (gap-free
    #: ``account_seq``, see domain/event_types.py); the last one's first event id
    #: and when it was made (µs)
    changes: int = 0
    last_change: str | None = None
    last_change_us: int = 0

    def fund(self, name: str) -> FundState:
        state = self.funds.get(name)
        return FundState() if state is None else state  # built only when missing


@dataclass(frozen=True, slots=True)
class Balance:
    fund: str
    unit: str
    balance: int
    held: int
    available: int


@dataclass(frozen=True, slots=True)
class Leg:
    """One side of a posting: ``amount`` (signed, minor units) into ``account``'s ``fund``."""

    account: str
    fund: str
    amount: int


@dataclass(frozen=True, slots=True)
class PostedLeg:
    """A leg as applied: customer legs carry the resulting balance and sequence."""

    account: str
    fund: str
    unit: str
    amount: int
    balance: int | None = None
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of a fund's append-only history."""

    program: str
    account: str
    fund: str
    unit: str
    seq: int
    amount: int
    balance: int
    txn_id: str
    type: str
    created_at: datetime
    order_id: str | None = None
    description: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Transaction:
    """The record of one applied transaction (also the idempotency record)."""

    program: str
    id: str
    type: str
    legs: tuple[PostedLeg, ...]
    created_at: datetime
    order_id: str | None = None
    description: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    replay: bool = False
