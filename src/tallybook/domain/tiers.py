"""A member's loyalty state, tier decisions and lot arithmetic (pure, no I/O).

The state lives in the account head (``attrs["loyalty"]``) so every earn,
redeem and expiry reads and writes it with the head, in O(1) requests:

- ``months``: points earned per calendar month, only the months a rolling
  window can still count (at most ``months + 1`` of them);
- ``lifetime``: points earned for ever;
- ``lots_earned`` / ``lots_used``: cumulative counters over the account's lots;
- ``next_expiry``: no lot with points left expires before it, so an earn or
  redeem can tell from the head alone that no lot is past its date.

Lots are consumed oldest first, so what has been consumed is always a prefix
of the lots in earning order: lot *i* covers the cumulative range
``(cum_end - amount, cum_end]`` and its remaining amount is
``clamp(cum_end - lots_used, 0, amount)``. A redemption therefore moves one
counter instead of rewriting every lot it touches, however many that is.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from tallybook.domain.loyalty import LoyaltyConfig


@dataclass(frozen=True, slots=True)
class MemberState:
    tier: str | None = None
    #: when the member last qualified for their tier (or a higher one)
    qualified_at: datetime | None = None
    lifetime: int = 0
    months: Mapping[str, int] = field(default_factory=dict)
    lots_earned: int = 0
    lots_used: int = 0
    #: expiry of the newest lot ("never" once a lot never expires); later lots
    #: never expire before it, so lots in earning order are in expiry order
    last_expiry: str | None = None
    #: microseconds at or before the history entry of the oldest lot with points
    #: left: lots are read from there on (a lower bound; older lots are used up)
    live_from: int = 0
    #: no lot with points left expires before this (``"never"``: none expires); a
    #: lower bound, None when not known (then a lot may be past its date)
    next_expiry: str | None = None

    def to_value(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "qualified_at": _iso(self.qualified_at) if self.qualified_at else None,
            "lifetime": self.lifetime,
            "months": dict(self.months),
            "lots_earned": self.lots_earned,
            "lots_used": self.lots_used,
            "last_expiry": self.last_expiry,
            "live_from": self.live_from,
            "next_expiry": self.next_expiry,
        }

    @staticmethod
    def from_value(value: Any) -> MemberState:
        if not isinstance(value, Mapping):
            return MemberState()
        q = value.get("qualified_at")
        months = value.get("months") or {}
        return MemberState(
            tier=value.get("tier"),
            qualified_at=datetime.fromisoformat(q) if isinstance(q, str) else None,
            lifetime=int(value.get("lifetime") or 0),
            months={str(k): int(v) for k, v in months.items()},
            lots_earned=int(value.get("lots_earned") or 0),
            lots_used=int(value.get("lots_used") or 0),
            last_expiry=value.get("last_expiry"),
            live_from=int(value.get("live_from") or 0),
            next_expiry=value.get("next_expiry"),
        )


def month_key(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m")


def add_months(t: datetime, months: int) -> datetime:
    """``t`` moved by whole calendar months, the day clamped to the month's length."""
    index = t.year * 12 + (t.month - 1) + months
    year, month = divmod(index, 12)
    day = min(t.day, calendar.monthrange(year, month + 1)[1])
    return t.replace(year=year, month=month + 1, day=day)


def window_months(config: LoyaltyConfig, at: datetime) -> set[str]:
    """The calendar months a rolling window counts at ``at`` (the current one included)."""
    start = at.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    n = config.qualification.months
    return {month_key(add_months(start, -i)) for i in range(n)}


def record_earn(
    config: LoyaltyConfig, state: MemberState, points: int, at: datetime
) -> MemberState:
    """The state after earning ``points`` at ``at``; months outside the window are dropped."""
    months = dict(state.months)
    if config.qualification.window == "rolling":
        key = month_key(at)
        months[key] = months.get(key, 0) + points
        keep = window_months(config, at)
        months = {k: v for k, v in months.items() if k in keep}
    else:
        months = {}
    return replace(state, lifetime=state.lifetime + points, months=months)


def qualifying_points(config: LoyaltyConfig, state: MemberState, at: datetime, balance: int) -> int:
    q = config.qualification
    if q.basis == "balance":
        return max(balance, 0)
    if q.window == "lifetime":
        return state.lifetime
    keep = window_months(config, at)
    return sum(v for k, v in state.months.items() if k in keep)


@dataclass(frozen=True, slots=True)
class TierDecision:
    tier: str
    qualified_at: datetime
    previous: str | None

    @property
    def changed(self) -> bool:
        return self.tier != self.previous


def last_qualified(
    config: LoyaltyConfig, state: MemberState, balance: int, at: datetime
) -> datetime | None:
    """The last moment up to ``at`` at which the member met their tier's threshold,
    judged by the standing that held until ``at`` (``state`` and the fund's
    ``balance`` before the event at ``at``); None when it cannot be told.

    The standing only changes with earns, redeems and expiries (which all
    decide the tier) and, for a rolling window, at month starts, when old
    months leave the window: a member still qualified just before ``at``
    qualified until ``at``; otherwise until the month start that dropped them.
    """
    if state.tier is None:
        return None
    threshold = config.tier(state.tier).threshold
    q = config.qualification
    if q.basis == "balance":
        return at if max(balance, 0) >= threshold else None
    if q.window == "lifetime":
        return at if state.lifetime >= threshold else None
    month = at.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if _window_sum(config, state, month) >= threshold:
        return at
    oldest = min(state.months, default=None)
    while oldest is not None and month_key(month) > oldest:
        if state.qualified_at is not None and month <= state.qualified_at:
            return None  # no later than what the state already knows
        previous = add_months(month, -1)
        if _window_sum(config, state, previous) >= threshold:
            return month  # qualified through the previous month, until this one began
        month = previous
    return None


def _window_sum(config: LoyaltyConfig, state: MemberState, at: datetime) -> int:
    keep = window_months(config, at)
    return sum(v for k, v in state.months.items() if k in keep)


def decide_tier(
    config: LoyaltyConfig,
    state: MemberState,
    qualifying: int,
    at: datetime,
    held: datetime | None = None,
) -> TierDecision:
    """Upgrade at once; downgrade only as the configured rule allows.

    ``held``: the last time the member met their tier's threshold before
    ``at`` (:func:`last_qualified`), when later than ``state.qualified_at``:
    the hold runs from the last moment they qualified, not from the last
    event that noticed it."""
    earned = config.tier_for(qualifying)
    current = state.tier if state.tier is not None else None
    cur_rank = config.rank(current)
    new_rank = config.rank(earned.name)
    if current is None or new_rank >= cur_rank:
        # newly enrolled, upgraded or re-qualified: the hold period starts again
        return TierDecision(earned.name, at, current)
    since = state.qualified_at or at
    if held is not None and held > since:
        since = held
    rule = config.downgrade
    keep = TierDecision(config.tier(current).name, since, current)
    if rule.rule == "never":
        return keep
    if rule.rule == "after_hold" and at < add_months(since, rule.hold_months):
        return keep
    target = new_rank
    if rule.max_steps:
        target = max(new_rank, cur_rank - rule.max_steps)
    # the member qualifies for the tier they land on from now on
    return TierDecision(config.tiers[target].name, at, current)


NEVER = "never"


def lot_expiry(config: LoyaltyConfig, state: MemberState, earned_at: datetime) -> str:
    """A new lot's expiry as an ISO time (or ``"never"``), never before the previous
    lot's while that one has points left (used up, it no longer holds the order)."""
    x = config.expiry
    if x.days is not None:
        expires = _iso(earned_at + timedelta(days=x.days))
    elif x.months is not None:
        expires = _iso(add_months(earned_at, x.months))
    else:
        expires = NEVER
    last = state.last_expiry
    if last is None or expires == NEVER or state.lots_used >= state.lots_earned:
        return expires
    if last == NEVER:
        return NEVER
    return max(last, expires)


def expiry_text(expires: datetime | None) -> str:
    """A lot's expiry as stored (``None``: never)."""
    return NEVER if expires is None else _iso(expires)


def lots_may_be_due(state: MemberState, now: datetime) -> bool:
    """False when the state proves that no lot with points left is past its date."""
    if state.lots_used >= state.lots_earned:
        return False
    if state.next_expiry is None:
        return True
    return state.next_expiry != NEVER and datetime.fromisoformat(state.next_expiry) <= now


def with_next_expiry(state: MemberState, found: str | None) -> MemberState:
    """``state`` knowing that no lot left expires before ``found`` (None: nothing learnt).

    ``found`` was read with fewer or as many lots used: lots are used oldest
    first, so it stays a lower bound."""
    if found is None or state.lots_used >= state.lots_earned:
        return state
    if state.next_expiry is not None and not _before(state.next_expiry, found):
        return state
    return replace(state, next_expiry=found)


def _before(a: str, b: str) -> bool:
    """Whether expiry ``a`` comes before expiry ``b`` (``"never"`` comes last)."""
    if a == NEVER:
        return False
    return b == NEVER or a < b


def lot_remaining(amount: int, cum_end: int, used: int) -> int:
    """What is left of a lot covering ``(cum_end - amount, cum_end]`` after ``used`` points."""
    return max(0, min(amount, cum_end - used))


def _iso(t: datetime) -> str:
    """Fixed-width UTC ISO text, so strings compare in time order."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
