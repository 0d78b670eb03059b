"""Parsing and validating a loyalty configuration (the data of a TOML file, a
JSON body, or the ``loyalty`` key of a program's settings) into
:class:`LoyaltyConfig`. Pure: reading the file is
:func:`tallybook.services.loyalty.values.load_toml`'s job.

Every error is a :class:`~tallybook.errors.ConfigError` naming the source and
the exact field at fault (``loyalty.toml: tiers[1].threshold: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, cast

from tallybook.domain.ids import check_fund, check_id, check_unit
from tallybook.domain.loyalty_rules import (
    BASES,
    DOWNGRADE_RULES,
    MAX_CAMPAIGNS,
    MAX_DIGITS,
    MAX_MULTIPLIER,
    MAX_PLACES,
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
)
from tallybook.errors import ConfigError, TallybookError


def parse_config(
    data: Any, *, source: str = "loyalty config", stored: bool = False
) -> LoyaltyConfig:
    """Validate a configuration mapping; errors name ``source`` and the field.

    ``stored``: rules a program already holds, read back. A multiplier past 40
    decimal places (refused since rules of such were stored) is read as stored:
    the program stays usable."""
    try:
        return _Parser(stored=stored).config(data)
    except TallybookError as exc:
        raise ConfigError(f"{source}: {exc.message}") from exc


class _Parser:
    def __init__(self, *, stored: bool = False) -> None:
        self.stored = stored

    def config(self, data: Any) -> LoyaltyConfig:
        d = self.table(
            data,
            "configuration",
            {"fund", "earn", "tiers", "qualification", "downgrade", "campaigns", "expiry"},
        )
        fund = self.fund(d.get("fund", "points"))
        tiers = self.tiers(d.get("tiers"))
        names = {t.name for t in tiers}
        campaigns = self.campaigns(d.get("campaigns", []), names)
        return LoyaltyConfig(
            earn=self.earn(d.get("earn", {})),
            tiers=tiers,
            qualification=self.qualification(d.get("qualification", {})),
            downgrade=self.downgrade(d.get("downgrade", {})),
            campaigns=campaigns,
            expiry=self.expiry(d.get("expiry", {})),
            fund=fund,
        )

    @staticmethod
    def table(value: Any, where: str, allowed: set[str]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where} must be a table/object")
        unknown = sorted(set(value) - allowed)
        if unknown:
            expected = ", ".join(sorted(allowed))
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (expected one of {expected})")
        return value

    @staticmethod
    def fund(value: Any) -> str:
        try:
            return check_fund(value)
        except TallybookError as exc:
            raise ConfigError(f"fund: {exc.message}") from exc

    def earn(self, value: Any) -> EarnRule:
        d = self.table(value, "earn", {"points_per_unit", "unit_size", "rounding", "currency"})
        currency = d.get("currency")
        if currency is not None:
            try:
                check_unit(currency)
            except TallybookError as exc:
                raise ConfigError(f"earn.currency: {exc.message}") from exc
        return EarnRule(
            points_per_unit=number(
                d.get("points_per_unit", 1), "earn.points_per_unit", stored=self.stored
            ),
            unit_size=integer(d.get("unit_size", 100), "earn.unit_size", low=1),
            rounding=choice(d.get("rounding", "down"), "earn.rounding", ROUNDINGS),
            currency=currency,
        )

    def tiers(self, value: Any) -> tuple[Tier, ...]:
        if value is None:
            return (Tier("base", 0),)
        if not isinstance(value, Sequence) or isinstance(value, str) or not value:
            raise ConfigError("tiers must be a non-empty list of tables")
        if len(value) > MAX_TIERS:
            raise ConfigError(f"tiers: at most {MAX_TIERS} tiers")
        out: list[Tier] = []
        for i, raw in enumerate(value):
            where = f"tiers[{i}]"
            d = self.table(raw, where, {"name", "threshold", "multiplier"})
            name = ident(d.get("name"), f"{where}.name")
            threshold = integer(d.get("threshold"), f"{where}.threshold", low=0)
            mult = number(d.get("multiplier", 1), f"{where}.multiplier", stored=self.stored)
            if any(t.name == name for t in out):
                raise ConfigError(f"{where}.name: tier {name!r} is defined twice")
            if out and threshold <= out[-1].threshold:
                raise ConfigError(
                    f"{where}.threshold: thresholds must increase "
                    f"({threshold} after {out[-1].threshold})"
                )
            out.append(Tier(name, threshold, mult))
        if out[0].threshold != 0:
            raise ConfigError("tiers[0].threshold: the first (base) tier must have threshold 0")
        return tuple(out)

    def qualification(self, value: Any) -> Qualification:
        d = self.table(value, "qualification", {"window", "months", "basis"})
        return Qualification(
            window=choice(d.get("window", "lifetime"), "qualification.window", WINDOWS),
            months=integer(d.get("months", 12), "qualification.months", low=1, high=120),
            basis=choice(d.get("basis", "earned"), "qualification.basis", BASES),
        )

    def downgrade(self, value: Any) -> Downgrade:
        d = self.table(value, "downgrade", {"rule", "hold_months", "max_steps"})
        return Downgrade(
            rule=choice(d.get("rule", "after_hold"), "downgrade.rule", DOWNGRADE_RULES),
            hold_months=integer(d.get("hold_months", 12), "downgrade.hold_months", low=0, high=120),
            max_steps=integer(d.get("max_steps", 0), "downgrade.max_steps", low=0, high=MAX_TIERS),
        )

    def expiry(self, value: Any) -> Expiry:
        d = self.table(value, "expiry", {"days", "months", "warn_days"})
        if "days" in d and "months" in d:
            raise ConfigError("expiry: give either days or months, not both")
        days = d.get("days")
        months = d.get("months")
        return Expiry(
            days=None if days is None else integer(days, "expiry.days", low=1, high=36_500),
            months=None if months is None else integer(months, "expiry.months", low=1, high=1200),
            warn_days=integer(d.get("warn_days", 30), "expiry.warn_days", low=0, high=366),
        )

    def campaigns(self, value: Any, tiers: set[str]) -> tuple[Campaign, ...]:
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise ConfigError("campaigns must be a list of tables")
        if len(value) > MAX_CAMPAIGNS:
            raise ConfigError(f"campaigns: at most {MAX_CAMPAIGNS} campaigns")
        out: list[Campaign] = []
        keys = {"id", "starts", "ends", "multiplier", "bonus", "tiers", "min_amount"}
        for i, raw in enumerate(value):
            where = f"campaigns[{i}]"
            d = self.table(raw, where, keys)
            cid = ident(d.get("id"), f"{where}.id")
            if any(c.id == cid for c in out):
                raise ConfigError(f"{where}.id: campaign {cid!r} is defined twice")
            starts = instant(d.get("starts"), f"{where}.starts")
            ends = instant(d.get("ends"), f"{where}.ends")
            if ends <= starts:
                raise ConfigError(f"{where}: ends must be after starts")
            only = d.get("tiers", [])
            if not isinstance(only, Sequence) or isinstance(only, str):
                raise ConfigError(f"{where}.tiers must be a list of tier names")
            for t in only:
                if not isinstance(t, str):  # a list or table is no name (nor hashable)
                    raise ConfigError(f"{where}.tiers must be a list of tier names")
                if t not in tiers:
                    raise ConfigError(f"{where}.tiers: unknown tier {t!r}")
            campaign = Campaign(
                id=cid,
                starts=starts,
                ends=ends,
                multiplier=number(
                    d.get("multiplier", 1), f"{where}.multiplier", stored=self.stored
                ),
                bonus=integer(d.get("bonus", 0), f"{where}.bonus", low=0, high=10**12),
                tiers=tuple(only),
                min_amount=integer(d.get("min_amount", 0), f"{where}.min_amount", low=0),
            )
            if campaign.multiplier == 1 and campaign.bonus == 0:
                raise ConfigError(f"{where}: a campaign needs a multiplier other than 1 or a bonus")
            out.append(campaign)
        return tuple(out)


def ident(value: Any, where: str) -> str:
    try:
        return check_id(value, where)
    except TallybookError as exc:
        raise ConfigError(exc.message) from exc


def integer(value: Any, where: str, *, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer (got {value!r})")
    if abs(value) >= 10**MAX_DIGITS:  # as stored; and printing 4301 digits is a ValueError
        raise ConfigError(f"{where} must have at most {MAX_DIGITS} digits")
    if low is not None and value < low:
        raise ConfigError(f"{where} must be at least {low} (got {value})")
    if high is not None and value > high:
        raise ConfigError(f"{where} must be at most {high} (got {value})")
    return value


def number(value: Any, where: str, *, stored: bool = False) -> Fraction:
    """A positive exact number from an int, a float (by its decimal text) or a string."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{where} must be a number (got {value!r})")
    if isinstance(value, int) and value > MAX_MULTIPLIER:  # before its text: 10**5000 has none
        raise ConfigError(f"{where} must be at most {MAX_MULTIPLIER}")
    try:
        dec = Decimal(str(value).strip())
    except InvalidOperation as exc:
        raise ConfigError(f"{where} must be a number (got {value!r})") from exc
    if not dec.is_finite() or dec <= 0:
        raise ConfigError(f"{where} must be a positive number (got {value!r})")
    # both checked on the decimal: its exact fraction of "1e-100000000" takes minutes
    if dec > int(MAX_MULTIPLIER):
        raise ConfigError(f"{where} must be at most {MAX_MULTIPLIER}")
    _, digits, exponent = dec.as_tuple()
    zeros = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    if not stored and cast(int, exponent) + zeros < -MAX_PLACES:
        raise ConfigError(
            f"{where} must have at most {MAX_PLACES} digits after the decimal point "
            f"(got {str(value)[:40]!r})"
        )
    return Fraction(dec)


def choice(value: Any, where: str, options: tuple[str, ...]) -> str:
    if value not in options:
        raise ConfigError(f"{where} must be one of {', '.join(options)} (got {value!r})")
    return str(value)


def instant(value: Any, where: str) -> datetime:
    """A TOML date or datetime, or an ISO string; naive times are UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ConfigError(f"{where} must be an ISO date or time (got {value!r})") from exc
    if isinstance(value, datetime):
        try:  # 0001-01-01T00:00:00+01:00 has no UTC time
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        except OverflowError as exc:
            raise ConfigError(f"{where} is out of range (got {value.isoformat()!r})") from exc
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise ConfigError(f"{where} must be a date or a date-time (got {value!r})")
