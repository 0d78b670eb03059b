"""Which outbound events a transaction stands for, and which accounts they concern.

Pure rules, shared by the two ends that must agree on them: the posting engine
numbers the changes of exactly the accounts a transaction's events concern
(each such account's ``account_seq``, without gaps), and the fan-out derives
the events (:mod:`tallybook.webhooks.events`). A transaction that stands for no
event takes no number, so a receiver of every type sees each account's numbers
1, 2, 3, ...
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from tallybook.domain.ids import is_system_account

TRANSACTION_POSTED: Final = "transaction.posted"
HOLD_AUTHORIZED: Final = "hold.authorized"
HOLD_CAPTURED: Final = "hold.captured"
HOLD_VOIDED: Final = "hold.voided"
HOLD_EXPIRED: Final = "hold.expired"
GRANT_EXPIRED: Final = "grant.expired"
POINTS_EXPIRED: Final = "points.expired"
TIER_CHANGED: Final = "tier.changed"
NOTIFICATION_RAISED: Final = "notification.raised"
NOTIFICATION_DISMISSED: Final = "notification.dismissed"
REPORT_FILED: Final = "report.filed"

EVENT_TYPES: Final = (
    TRANSACTION_POSTED,
    HOLD_AUTHORIZED,
    HOLD_CAPTURED,
    HOLD_VOIDED,
    HOLD_EXPIRED,
    GRANT_EXPIRED,
    POINTS_EXPIRED,
    TIER_CHANGED,
    NOTIFICATION_RAISED,
    NOTIFICATION_DISMISSED,
    REPORT_FILED,
)

_HOLD_TYPES: Final = {
    "authorize": HOLD_AUTHORIZED,
    "capture": HOLD_CAPTURED,
    "void": HOLD_VOIDED,
    # a held credit reaching its release date: the expiry job released the hold
    "release": HOLD_EXPIRED,
}


def event_id(pk: str, sk: str, type_: str) -> str:
    """An event's id: a hash of its source item's key and its type, so deriving it
    again (a stream record read twice, a row updated after delivery) yields the
    same id, and the posting engine knows it before the fan-out derives it."""
    digest = hashlib.sha256(f"{pk}\x00{sk}\x00{type_}".encode()).hexdigest()
    return f"evt_{digest[:32]}"


def transaction_event_types(txn_type: str, has_legs: bool, details: Mapping[str, Any]) -> list[str]:
    """The event types a transaction record stands for, in the order they are sent:
    ``transaction.posted`` when it has legs, then the one its type names, then
    ``tier.changed`` when its details say the tier changed."""
    out = [TRANSACTION_POSTED] if has_legs else []
    specific = _HOLD_TYPES.get(txn_type)
    if txn_type == "expire":
        if details.get("hold_id") is not None:
            specific = HOLD_EXPIRED
        elif "grants" in details:
            specific = GRANT_EXPIRED
        else:
            specific = POINTS_EXPIRED
    if specific is not None and (has_legs or specific != POINTS_EXPIRED):
        out.append(specific)
    if details.get("tier_changed"):
        out.append(TIER_CHANGED)
    return out


def event_accounts(
    leg_accounts: Iterable[str], details: Mapping[str, Any], owner: str | None
) -> tuple[str, ...]:
    """The customer accounts a transaction's events concern, in leg order, then the
    account its details name, then its owner."""
    named = [a for a in leg_accounts if not is_system_account(a)]
    for who in (details.get("account"), owner):
        if isinstance(who, str) and not is_system_account(who):
            named.append(who)
    return tuple(dict.fromkeys(named))
