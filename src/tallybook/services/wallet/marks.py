"""Marks in the account head that let a wallet balance read be one request.

The balance view needs two facts besides the head: whether a hold is past its
deadline (to expire it on the way), and how much bonus the *unexpired* grants
hold. Every wallet write already reads the owner's holds' effect (the head)
and unexpired grants, so it leaves two marks in the head
(:class:`~tallybook.domain.wallet.WalletMarks`, stored by
``store/records/wallet.py``), written with the head under its version condition:

- ``hold_due``: no active hold falls due before this time (a lower bound:
  settling a hold keeps it, which only makes a read query the holds once);
- ``grant_due``: until this time the unexpired grants hold exactly the bonus
  balance minus what holds reserve (``NEVER_DUE`` when no grant has
  anything left). Absent when that is not known, e.g. a grant expired with something
  left and the expiry job has not moved it yet; ``bonus_seq`` is the bonus
  fund's sequence number it was computed at, so a posting to the bonus fund
  outside the wallet (which leaves the marks alone) voids it.

A read trusts a mark only before its time and falls back to querying holds or
grants otherwise, so a stale or missing mark costs a request, never accuracy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime

from tallybook.domain.model import Account
from tallybook.domain.wallet import BONUS, NEVER_DUE, Grant, GrantTake, HoldStatus, WalletMarks
from tallybook.store.port import ItemStore, Value
from tallybook.store.records.wallet import marks_attrs, marks_of, read_holds


class HoldsDue(Exception):
    """A plan found one of the owner's holds past its deadline: the caller settles
    the owner's overdue holds and plans again (no refusal is kept)."""


def holds_may_be_due(acct: Account, now: datetime) -> bool:
    """False when the head proves no active hold is past its deadline."""
    if all(f.held == 0 for f in acct.funds.values()):
        return False
    due = marks_of(acct).hold_due
    return due is None or due <= now


def settled_hold_due(
    store: ItemStore,
    program: str,
    acct: Account,
    now: datetime,
    *,
    settling: str | None = None,
    refuse_due: bool = True,
) -> datetime | None:
    """The ``hold_due`` mark a wallet write leaves, when it must read the holds for it.

    None while the head's marks prove no hold is past its deadline (the mark
    stands). Otherwise the owner's holds are read: one past its deadline (other
    than ``settling``, the hold the write settles) raises :class:`HoldsDue` when
    ``refuse_due``, as a write plans on the funds as the balance view shows them,
    which settles such a hold first (its availability would otherwise still count
    what the hold no longer withholds); else the earliest deadline of the active
    holds other than ``settling`` is the renewed mark (``NEVER_DUE``: none)."""
    if not holds_may_be_due(acct, now):
        return None
    active = [
        h
        for h in read_holds(store, program, acct.id)
        if h.status is HoldStatus.ACTIVE and h.id != settling
    ]
    if refuse_due and any(h.overdue(now) for h in active):
        raise HoldsDue(acct.id)
    return min((h.deadline for h in active), default=NEVER_DUE)


def bonus_without_grants(acct: Account, now: datetime) -> int | None:
    """The unexpired grants' bonus from the head alone, or None when grants must be read."""
    bonus = acct.fund(BONUS)
    if bonus.seq == 0:
        return 0
    marks = marks_of(acct)
    if marks.grant_due is None or marks.bonus_seq != bonus.seq or marks.grant_due <= now:
        return None
    return bonus.available


def with_takes(grants: Iterable[Grant], takes: Iterable[GrantTake], sign: int) -> list[Grant]:
    """``grants`` after taking (sign -1) or returning (sign +1) ``takes``."""
    delta: dict[str, int] = {}
    for t in takes:
        delta[t.grant_id] = delta.get(t.grant_id, 0) + sign * t.amount
    return [replace(g, available=g.available + delta.get(g.id, 0)) for g in grants]


def wallet_marks(
    acct: Account,
    grants_after: Iterable[Grant],
    now: datetime,
    *,
    balance_delta: Mapping[str, int] | None = None,
    held_delta: Mapping[str, int] | None = None,
    new_deadline: datetime | None = None,
    renewed_due: datetime | None = None,
) -> dict[str, Value]:
    """The head's ``attrs`` update for a wallet plan: both marks after the plan.

    ``grants_after`` are the unexpired grants (as of ``now``) after the plan;
    ``new_deadline`` is the deadline of a hold the plan creates; ``renewed_due``
    the earliest deadline of the other active holds, when the plan read them
    (:func:`settled_hold_due`): it renews the head's mark.
    """
    bd = balance_delta or {}
    hd = held_delta or {}
    held_before = sum(f.held for f in acct.funds.values())
    held_after = held_before + sum(hd.values())
    previous = marks_of(acct).hold_due if held_before else None
    if renewed_due is not None:
        previous = renewed_due
    hold_due: datetime | None = None
    if held_after and new_deadline is not None:
        if not held_before:
            hold_due = new_deadline
        elif previous is not None:
            hold_due = min(previous, new_deadline)
    elif held_after:
        hold_due = previous
    bonus = acct.fund(BONUS)
    free_after = bonus.balance + bd.get(BONUS, 0) - bonus.held - hd.get(BONUS, 0)
    live = [g for g in grants_after if g.available > 0 and not g.expired(now)]
    marks = WalletMarks(hold_due=hold_due)
    if sum(g.available for g in live) == free_after:
        marks = replace(
            marks,
            grant_due=min(g.expires_at for g in live) if live else NEVER_DUE,
            bonus_seq=bonus.seq + (1 if bd.get(BONUS) else 0),
        )
    return marks_attrs(marks)
