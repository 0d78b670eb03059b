"""Wallet transaction records: the per-fund breakdown and the resulting availability.

Every wallet write stores, in its transaction record's ``details``, which funds
(and which bonus grants) it moved and what each wallet fund had available right
after it. :class:`WalletTransaction` is that record as the API returns it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from tallybook.domain.ids import is_system_account
from tallybook.domain.model import Account, Transaction
from tallybook.domain.wallet import BONUS, SPEND_ORDER, Grant, in_spend_order, unexpired_bonus
from tallybook.store.port import Value


@dataclass(frozen=True, slots=True)
class WalletTransaction:
    id: str
    type: str
    account: str | None
    #: fund -> signed change of the owner's balance
    funds: dict[str, int]
    #: fund -> available right after the transaction, and ``total``
    availability: dict[str, int]
    created_at: datetime
    hold_id: str | None = None
    #: fund -> signed change of the amount withheld
    held: dict[str, int] = field(default_factory=dict)
    grants: list[dict[str, Any]] = field(default_factory=list)
    charge: dict[str, Any] | None = None
    order_id: str | None = None
    description: str | None = None
    replay: bool = False


def wallet_transaction(txn: Transaction) -> WalletTransaction:
    """Any transaction as a wallet record (non-wallet ones have no availability)."""
    d = txn.details
    owner = cast(str | None, d.get("account"))
    if owner is None:
        owner = next((leg.account for leg in txn.legs if not is_system_account(leg.account)), None)
    funds = {leg.fund: leg.amount for leg in txn.legs if owner is not None and leg.account == owner}
    grants = [
        {"grant_id": g[0], "expires_at": g[1], "amount": g[2]}
        for g in cast(list[list[Any]], d.get("grants") or [])
    ]
    return WalletTransaction(
        id=txn.id,
        type=txn.type,
        account=owner,
        funds=funds,
        availability=in_spend_order(cast(dict[str, int], d.get("availability") or {})),
        created_at=txn.created_at,
        hold_id=cast(str | None, d.get("hold_id")),
        held=in_spend_order(cast(dict[str, int], d.get("held") or {})),
        grants=grants,
        charge=_charge(cast(dict[str, Any] | None, d.get("charge"))),
        order_id=txn.order_id,
        description=txn.description,
        replay=txn.replay,
    )


def _charge(charge: dict[str, Any] | None) -> dict[str, Any] | None:
    """``amount`` then ``reference``, as written (a DynamoDB map comes back in any order);
    the processor key the debit records beside them is the wallet's own, not shown."""
    return None if charge is None else {k: v for k, v in sorted(charge.items()) if k != "key"}


def availability_after(
    account: Account,
    wallet_funds: Iterable[str],
    grants: Iterable[Grant],
    now: datetime,
    *,
    balance_delta: Mapping[str, int] | None = None,
    held_delta: Mapping[str, int] | None = None,
    bonus_delta: int = 0,
) -> dict[str, Value]:
    """What each wallet fund has available once a plan applies.

    ``bonus_delta`` is the change of unexpired grants' availability (bonus
    availability counts unexpired grants only, not the fund's raw balance).
    """
    bd = balance_delta or {}
    hd = held_delta or {}
    out: dict[str, Value] = {}
    total = 0
    for fund in wallet_funds:
        if fund == BONUS:
            value = unexpired_bonus(grants, now) + bonus_delta
        else:
            value = account.fund(fund).available + bd.get(fund, 0) - hd.get(fund, 0)
        out[fund] = value
        total += value
    out["total"] = total
    return out


def present_funds(fund_names: Iterable[str]) -> list[str]:
    """The wallet funds a program has, in spend order."""
    names = set(fund_names)
    return [f for f in SPEND_ORDER if f in names]
