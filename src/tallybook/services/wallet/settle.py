"""Settling a hold: the plan of a capture (full or partial), void, expiry or release.

Each settlement flips the hold row from ``active`` on condition it still is,
in the same transaction as its postings, so the first of a racing capture,
void or expiry wins and the others see the new status.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import cast

from tallybook.domain.model import EXPIRY, REDEMPTION, Leg, TxnType
from tallybook.domain.wallet import (
    BONUS,
    CaptureSplit,
    GrantTake,
    Hold,
    HoldKind,
    HoldStatus,
    split_capture,
)
from tallybook.errors import InvalidState, ValidationError
from tallybook.services.ledger.postings import Plan, Snapshot
from tallybook.services.wallet.marks import wallet_marks, with_takes
from tallybook.services.wallet.records import availability_after, present_funds
from tallybook.store.port import Action, Value
from tallybook.store.records.codec import iso
from tallybook.store.records.wallet import (
    account_grants,
    finish_hold,
    return_to_grant,
    takes_value,
)

#: what each settlement makes of a hold, for messages
DONE = {"capture": "captured", "void": "voided", "expire": "expired", "release": "released"}


class HoldNotActive(InvalidState):
    """Raised inside a planner: the hold was settled already."""

    def __init__(self, hold: Hold, message: str) -> None:
        super().__init__(message)
        self.hold = hold


class HoldOverdue(InvalidState):
    """Raised inside a planner: the hold passed its deadline and must expire first."""

    def __init__(self, hold: Hold) -> None:
        super().__init__(f"hold {hold.id} expired at {iso(hold.deadline)}")
        self.hold = hold


def expired_message(hold: Hold) -> str:
    return (
        f"hold {hold.id} expired at {iso(hold.deadline)} and its funds were released; "
        "it can no longer be captured"
    )


def settle_plan(
    snap: Snapshot,
    program: str,
    hold: Hold,
    op: str,
    amount: int | None,
    *,
    renewed_due: datetime | None = None,
) -> Plan:
    """The transaction that settles ``hold`` by ``op`` (capture, void, expire, release);
    ``renewed_due``: the earliest deadline of the owner's other active holds, if read."""
    if hold.status is not HoldStatus.ACTIVE:
        raise HoldNotActive(hold, f"hold {hold.id} is {hold.status}; it cannot be {DONE[op]}")
    expected = HoldKind.CREDIT if op == "release" else HoldKind.DEBIT
    if hold.kind is not expected:
        raise InvalidState(f"hold {hold.id} is a {hold.kind} hold; it cannot be {DONE[op]}")
    if op in ("expire", "release"):
        if not hold.overdue(snap.now):
            raise InvalidState(f"hold {hold.id} is not due before {iso(hold.deadline)}")
    elif hold.overdue(snap.now):
        raise HoldOverdue(hold)
    if amount is not None and amount > hold.amount:
        raise ValidationError(f"cannot capture {amount}: hold {hold.id} holds {hold.amount}")
    capture = (hold.amount if amount is None else amount) if op == "capture" else 0
    split = split_capture(hold.amounts, hold.grants, capture)
    status = {
        "capture": HoldStatus.CAPTURED,
        "void": HoldStatus.VOIDED,
        "expire": HoldStatus.EXPIRED,
        "release": HoldStatus.RELEASED,
    }[op]
    return plan_split(snap, program, hold, split, status, renewed_due=renewed_due)


def plan_split(
    snap: Snapshot,
    program: str,
    hold: Hold,
    split: CaptureSplit,
    status: HoldStatus,
    *,
    renewed_due: datetime | None = None,
) -> Plan:
    """Spend the captured part, release the rest (released bonus back to its grant,
    or to ``@expiry`` if the grant expired meanwhile)."""
    account = hold.account
    acct = snap.account(account)
    funds = present_funds(f.name for f in snap.program.funds)
    grants = account_grants(snap.store, program, acct, snap.now)
    actions: list[Action] = [finish_hold(program, hold, status, snap.now, split.captured)]
    to_expiry = 0
    returned: list[GrantTake] = []
    # the grants still unexpired, by this clock and by the expiry job's (read_grants)
    unexpired = {g.id for g in grants}
    for take in split.released_grants:
        if take.grant_id not in unexpired:
            to_expiry += take.amount
        else:
            returned.append(take)
            actions.append(return_to_grant(program, account, take))
    back_to_grants = sum(t.amount for t in returned)
    balance_delta: dict[str, int] = defaultdict(int)
    legs: list[Leg] = []
    if hold.kind is HoldKind.DEBIT:
        for fund, x in split.captured.items():
            balance_delta[fund] -= x
            legs.append(Leg(REDEMPTION, fund, x))
        if to_expiry:
            balance_delta[BONUS] -= to_expiry
            legs.append(Leg(EXPIRY, BONUS, to_expiry))
        legs += [Leg(account, f, x) for f, x in balance_delta.items()]
    held_delta = {f: -x for f, x in hold.amounts.items()}
    type_ = {
        HoldStatus.CAPTURED: TxnType.CAPTURE,
        HoldStatus.VOIDED: TxnType.VOID,
        HoldStatus.EXPIRED: TxnType.EXPIRE,
        HoldStatus.RELEASED: TxnType.RELEASE,
    }[status]
    marks = wallet_marks(
        acct,
        with_takes(grants, returned, +1),
        snap.now,
        balance_delta=balance_delta,
        held_delta=held_delta,
        renewed_due=renewed_due,
    )
    return Plan(
        type=type_,
        legs=legs,
        held={(account, f): x for f, x in held_delta.items()},
        attrs={account: marks},
        actions=actions,
        owner=account,
        details={
            "account": account,
            "hold_id": hold.id,
            "held": cast(Value, held_delta),
            "captured": cast(Value, split.captured),
            "released": cast(Value, split.released),
            "grants": takes_value(split.captured_grants, -1),
            "expired_bonus": to_expiry,
            "availability": availability_after(
                acct,
                funds,
                grants,
                snap.now,
                balance_delta=balance_delta,
                held_delta=held_delta,
                bonus_delta=back_to_grants,
            ),
        },
    )
