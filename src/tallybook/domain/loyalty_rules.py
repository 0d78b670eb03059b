"""Loyalty rules as frozen values: earning, tiers, qualification, downgrades,
campaigns and expiry (no I/O).

:meth:`LoyaltyConfig.to_settings` gives back a canonical mapping without floats
(multipliers as decimal strings, times as ISO strings) that every storage
engine accepts; :mod:`tallybook.domain.loyalty_parse` builds these values from
a mapping and names the field at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

ROUNDINGS = ("down", "up", "half_up", "half_even")
WINDOWS = ("lifetime", "rolling")
BASES = ("earned", "balance")
DOWNGRADE_RULES = ("never", "immediate", "after_hold")
MAX_TIERS = 20
MAX_CAMPAIGNS = 50
MAX_MULTIPLIER = Fraction(1000)
#: digits a multiplier may have after the decimal point (trailing zeros aside)
MAX_PLACES = 40
#: digits an integer of the rules may have (a stored number has at most 38)
MAX_DIGITS = 38


@dataclass(frozen=True, slots=True)
class EarnRule:
    """``points_per_unit`` points for each ``unit_size`` minor units of ``currency``."""

    points_per_unit: Fraction = Fraction(1)
    unit_size: int = 100
    rounding: str = "down"
    currency: str | None = None


@dataclass(frozen=True, slots=True)
class Tier:
    name: str
    threshold: int
    multiplier: Fraction = Fraction(1)


@dataclass(frozen=True, slots=True)
class Qualification:
    """Which points count towards a tier: earned ones (all time or the last
    ``months`` calendar months, the current one included) or the balance."""

    window: str = "lifetime"
    months: int = 12
    basis: str = "earned"


@dataclass(frozen=True, slots=True)
class Downgrade:
    """``never``; ``immediate`` (as soon as points fall short); or ``after_hold``:
    a member keeps a tier ``hold_months`` after last qualifying for it, then drops
    at most ``max_steps`` tiers at a time (0: straight to the tier earned)."""

    rule: str = "after_hold"
    hold_months: int = 12
    max_steps: int = 0


@dataclass(frozen=True, slots=True)
class Campaign:
    """A bonus for orders placed in ``[starts, ends)``: a multiplier and/or fixed points."""

    id: str
    starts: datetime
    ends: datetime
    multiplier: Fraction = Fraction(1)
    bonus: int = 0
    tiers: tuple[str, ...] = ()
    min_amount: int = 0

    def applies(self, at: datetime, amount: int, tier: str) -> bool:
        return (
            self.starts <= at < self.ends
            and amount >= self.min_amount
            and (not self.tiers or tier in self.tiers)
        )


@dataclass(frozen=True, slots=True)
class Expiry:
    """How long earned points live (``days`` or ``months``; neither: for ever)."""

    days: int | None = None
    months: int | None = None
    #: how far ahead the expiry job warns with PointsExpiring events (0: never)
    warn_days: int = 30


@dataclass(frozen=True, slots=True)
class LoyaltyConfig:
    earn: EarnRule = field(default_factory=EarnRule)
    tiers: tuple[Tier, ...] = (Tier("base", 0),)
    qualification: Qualification = field(default_factory=Qualification)
    downgrade: Downgrade = field(default_factory=Downgrade)
    campaigns: tuple[Campaign, ...] = ()
    expiry: Expiry = field(default_factory=Expiry)
    fund: str = "points"

    @property
    def base_tier(self) -> Tier:
        return self.tiers[0]

    def tier(self, name: str | None) -> Tier:
        for t in self.tiers:
            if t.name == name:
                return t
        return self.base_tier

    def rank(self, name: str | None) -> int:
        """A tier's position (0 = base); an unknown tier ranks as the base tier."""
        return next((i for i, t in enumerate(self.tiers) if t.name == name), 0)

    def tier_for(self, qualifying: int) -> Tier:
        """The highest tier whose threshold ``qualifying`` points reach."""
        best = self.base_tier
        for t in self.tiers:
            if qualifying >= t.threshold:
                best = t
        return best

    def to_settings(self) -> dict[str, Any]:
        """The canonical mapping stored in program settings (no floats)."""
        e, q, d, x = self.earn, self.qualification, self.downgrade, self.expiry
        expiry: dict[str, Any] = {"warn_days": x.warn_days}
        if x.days is not None:
            expiry["days"] = x.days
        if x.months is not None:
            expiry["months"] = x.months
        earn: dict[str, Any] = {
            "points_per_unit": decimal_text(e.points_per_unit),
            "unit_size": e.unit_size,
            "rounding": e.rounding,
        }
        if e.currency is not None:
            earn["currency"] = e.currency
        return {
            "fund": self.fund,
            "earn": earn,
            "tiers": [
                {
                    "name": t.name,
                    "threshold": t.threshold,
                    "multiplier": decimal_text(t.multiplier),
                }
                for t in self.tiers
            ],
            "qualification": {"window": q.window, "months": q.months, "basis": q.basis},
            "downgrade": {"rule": d.rule, "hold_months": d.hold_months, "max_steps": d.max_steps},
            "campaigns": [
                {
                    "id": c.id,
                    "starts": _iso(c.starts),
                    "ends": _iso(c.ends),
                    "multiplier": decimal_text(c.multiplier),
                    "bonus": c.bonus,
                    "tiers": list(c.tiers),
                    "min_amount": c.min_amount,
                }
                for c in self.campaigns
            ],
            "expiry": expiry,
        }


def decimal_text(f: Fraction) -> str:
    """A fraction read from decimal text (or a product of such) as that decimal,
    exactly, whatever its number of digits (``Fraction(3, 2)``: ``"1.5"``)."""
    if f.denominator == 1:
        return str(f.numerator)
    twos = fives = 0
    rest = f.denominator
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:  # no finite decimal: never read from decimal text
        text = format(Decimal(f.numerator) / Decimal(f.denominator), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    places = max(twos, fives)
    scaled = abs(f.numerator) * 10**places // f.denominator
    whole, fraction = divmod(scaled, 10**places)
    sign = "-" if f < 0 else ""
    return f"{sign}{whole}.{fraction:0{places}d}".rstrip("0")


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")
