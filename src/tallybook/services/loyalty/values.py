"""What the loyalty service returns, and how it derives ids and reads its rules.

An earn's transaction id is ``order:{order_id}`` (:func:`order_txn_id`), so
earning an order twice replays the first result and an order lookup is one get.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import cast

from tallybook.domain.ids import check_id
from tallybook.domain.loyalty import LoyaltyConfig, parse_config
from tallybook.domain.model import Program, Transaction
from tallybook.domain.tiers import NEVER
from tallybook.errors import ConfigError, ValidationError
from tallybook.store.records.codec import LAYOUT, iso
from tallybook.store.records.loyalty import TierChange as TierChange
from tallybook.store.records.loyalty import parse_expiry

ORDER_PREFIX = "order:"
MAX_ORDER_ID = 128 - len(ORDER_PREFIX)


def order_txn_id(order_id: str) -> str:
    """The transaction id of an order's earn (the idempotency key)."""
    if not isinstance(order_id, str) or not order_id:  # check_id would say 128
        raise ValidationError(f"order id is required (1-{MAX_ORDER_ID} characters)")
    if len(order_id) > MAX_ORDER_ID:
        raise ValidationError(f"order id is longer than {MAX_ORDER_ID} characters")
    return ORDER_PREFIX + check_id(order_id, "order id")


def scoped_txn_id(prefix: str, account: str, suffix: str) -> str:
    """``prefix:account:suffix``, hashing the account when the id would be too long."""
    txn = f"{prefix}:{account}:{suffix}"
    if len(txn) <= 128:
        return txn
    return f"{prefix}:{hashlib.sha256(account.encode()).hexdigest()[:32]}:{suffix}"


def lot_time(expires: str | None) -> str | None:
    """A lot's expiry as the product writes times (``2026-01-31T12:00:00.000000Z``),
    from its stored form (``...+00:00``, which sorts as text); ``never`` stays."""
    if expires is None or expires == NEVER:
        return expires
    return iso(cast(datetime, parse_expiry(expires)))


@dataclass(frozen=True, slots=True)
class EarnResult:
    order_id: str
    account: str
    points: int
    tier: str
    previous_tier: str | None
    lot_expires: str | None
    campaigns: tuple[str, ...]
    transaction: Transaction

    @property
    def replay(self) -> bool:
        return self.transaction.replay

    @staticmethod
    def of(txn: Transaction) -> EarnResult:
        d = txn.details
        return EarnResult(
            order_id=cast(str, txn.order_id),
            account=d["account"],
            points=d["points"],
            tier=d["tier"],
            previous_tier=d.get("previous_tier"),
            lot_expires=lot_time(d.get("lot_expires")),
            campaigns=tuple(d.get("campaigns") or ()),
            transaction=txn,
        )


@dataclass(frozen=True, slots=True)
class RedeemResult:
    account: str
    reward_id: str
    points: int
    balance: int
    tier: str
    previous_tier: str | None
    transaction: Transaction

    @property
    def replay(self) -> bool:
        return self.transaction.replay

    @staticmethod
    def of(txn: Transaction) -> RedeemResult:
        d = txn.details
        return RedeemResult(
            account=d["account"],
            reward_id=d["reward_id"],
            points=d["points"],
            balance=d["balance"],
            tier=d["tier"],
            previous_tier=d.get("previous_tier"),
            transaction=txn,
        )


@dataclass(frozen=True, slots=True)
class MemberStatus:
    account: str
    tier: str
    qualifying_points: int
    balance: int
    available: int
    lifetime_points: int
    qualified_at: datetime | None
    next_tier: str | None
    points_to_next_tier: int | None


@dataclass(frozen=True, slots=True)
class TierChangePage:
    changes: list[TierChange]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class MemberStanding:
    """A member of a tier and the points that put them there."""

    account: str
    points: int
    qualifying_points: int


@dataclass(frozen=True, slots=True)
class MemberPage:
    accounts: list[str]
    cursor: str | None
    #: each member of ``accounts`` with their points and qualifying points
    members: list[MemberStanding] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OrderLookup:
    order_id: str
    account: str
    points: int
    transaction: Transaction


def config_of(program: Program) -> LoyaltyConfig:
    raw = program.settings.get("loyalty")
    if raw is None:
        raise ConfigError(
            f"program {program.id} has no loyalty configuration; load one with "
            "'tallybook loyalty config load FILE.toml'"
        )
    if program.layout < LAYOUT:
        raise ConfigError(
            f"program {program.id} keeps its loyalty data in storage layout {program.layout} "
            f"(tallybook 0.1); this version reads layout {LAYOUT} and does not convert it: "
            "keep serving this program with tallybook 0.1 (see docs/table-design.md, "
            "'Layout versions')"
        )
    return parse_config(raw, source=f"program {program.id} loyalty settings", stored=True)


def load_toml(path: str | Path) -> LoyaltyConfig:
    """Read and validate a loyalty configuration file."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8-sig"))  # a leading BOM too
    except FileNotFoundError as exc:
        raise ConfigError(f"{p}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: invalid TOML: {exc}") from exc
    except ValueError as exc:  # an integer of more than 4300 digits (int's own limit)
        raise ConfigError(f"{p}: a number in it is too long: {exc}") from exc
    return parse_config(data, source=str(p))
