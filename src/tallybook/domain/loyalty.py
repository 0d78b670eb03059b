"""Loyalty program configuration and the earning rule (pure, no I/O).

The rules are frozen values (:mod:`tallybook.domain.loyalty_rules`), built and
validated from a mapping or a TOML file by :mod:`tallybook.domain.loyalty_parse`
(both re-exported here). The earning rule itself is :func:`quote`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from math import floor

from tallybook.domain.loyalty_parse import (
    choice,
    ident,
    instant,
    integer,
    number,
    parse_config,
)
from tallybook.domain.loyalty_rules import (
    BASES,
    DOWNGRADE_RULES,
    MAX_CAMPAIGNS,
    MAX_MULTIPLIER,
    MAX_TIERS,
    ROUNDINGS,
    WINDOWS,
    Campaign,
    Downgrade,
    EarnRule,
    Expiry,
    LoyaltyConfig,
    Qualification,
    Tier,
    decimal_text,
)
from tallybook.errors import ConfigError

__all__ = [
    "BASES",
    "DOWNGRADE_RULES",
    "MAX_CAMPAIGNS",
    "MAX_MULTIPLIER",
    "MAX_TIERS",
    "ROUNDINGS",
    "WINDOWS",
    "Campaign",
    "Downgrade",
    "EarnRule",
    "Expiry",
    "LoyaltyConfig",
    "Qualification",
    "Quote",
    "Tier",
    "choice",
    "decimal_text",
    "ident",
    "instant",
    "integer",
    "number",
    "parse_config",
    "quote",
    "round_points",
]


@dataclass(frozen=True, slots=True)
class Quote:
    """How many points an order earns, and why."""

    points: int
    base: Fraction
    multiplier: Fraction
    bonus: int
    campaigns: tuple[str, ...]


def round_points(value: Fraction, rounding: str) -> int:
    """Round a non-negative exact value to whole points."""
    if rounding == "down":
        return floor(value)
    if rounding == "up":
        return -floor(-value)
    if rounding == "half_up":
        return floor(value + Fraction(1, 2))
    if rounding == "half_even":
        return round(value)
    raise ConfigError(f"unknown rounding {rounding!r}")


def quote(config: LoyaltyConfig, amount: int, *, tier: str | None, at: datetime) -> Quote:
    """Points for an order of ``amount`` minor units placed at ``at`` by a member of ``tier``.

    base = amount x points_per_unit / unit_size; the tier's multiplier and the
    multipliers of every campaign running at ``at`` multiply it; the result is
    rounded once, then fixed campaign bonuses are added.
    """
    member_tier = config.tier(tier)
    base = Fraction(amount) * config.earn.points_per_unit / config.earn.unit_size
    multiplier = member_tier.multiplier
    bonus = 0
    running: list[str] = []
    for c in config.campaigns:
        if c.applies(at, amount, member_tier.name):
            multiplier *= c.multiplier
            bonus += c.bonus
            running.append(c.id)
    points = round_points(base * multiplier, config.earn.rounding) + bonus
    return Quote(points, base, multiplier, bonus, tuple(running))
