"""Billing records: validation, exact commission, time buckets and report windows.

Pure rules, no I/O. Times inside are UTC; bucket and window bounds are epoch
seconds so they compare and step exactly.

Commission is ``amount * rate`` computed exactly (the rate is a decimal string
turned into a :class:`~fractions.Fraction`, never a float) and rounded half to
even to whole minor units, once per record. A partner's total commission is
the sum of its records' rounded commissions, so a total always equals the sum
of the line items printed next to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from tallybook.domain.ids import check_id
from tallybook.domain.money import check_signed_amount
from tallybook.errors import ValidationError

#: default time bucket of billing records: a quarter hour
DEFAULT_BUCKET_SECONDS = 15 * 60
MIN_BUCKET_SECONDS = 60
MAX_BUCKET_SECONDS = 24 * 3600
#: default wait after a window ends before it is reported (late records)
DEFAULT_GRACE_SECONDS = 5 * 60
MAX_GRACE_SECONDS = 7 * 24 * 3600
#: records dated further ahead than this are refused (a clock or unit error)
MAX_FUTURE = timedelta(days=1)
#: at most this many decimal places in a commission rate (1e-8 = 0.000001 %)
MAX_RATE_PLACES = 8

_CURRENCY = re.compile(r"[A-Z][A-Z0-9]{2,7}")
#: a report interval, as every edge takes it (CLI, HTTP, Python, the reports job):
#: a whole number and ``m``, ``h`` or ``d`` in either case, nothing around it
INTERVAL_PATTERN = r"^[1-9][0-9]{0,4}[mhdMHD]$"
_INTERVAL = re.compile(INTERVAL_PATTERN)
_WINDOW_TIME = "%Y%m%dT%H%M%SZ"
_ISO = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True, slots=True)
class RecordDraft:
    """A validated billing record before it is assigned a bucket."""

    id: str
    partner: str
    order_id: str
    amount: int
    currency: str
    rate: str
    time: datetime

    @property
    def commission(self) -> int:
        return commission(self.amount, rate_fraction(self.rate))

    def body(self) -> dict[str, Any]:
        """What the idempotency fingerprint covers: every field the caller chose."""
        return {
            "partner": self.partner,
            "order_id": self.order_id,
            "amount": self.amount,
            "currency": self.currency,
            "rate": self.rate,
            "time": iso(self.time),
        }


@dataclass(frozen=True, slots=True)
class BillingRecord:
    """A stored billing record. ``bucket`` is the bucket it was filed under:
    the bucket of ``time``, or a later open one when it arrived after its own
    window was reported (``late``)."""

    program: str
    id: str
    partner: str
    order_id: str
    amount: int
    currency: str
    rate: str
    commission: int
    time: datetime
    bucket: datetime
    ingested_at: datetime
    late: bool = False
    replay: bool = False


@dataclass(frozen=True, slots=True)
class BillingConfig:
    """Per-program billing settings, kept in the table's billing state row.

    ``bucket_seconds`` is fixed once the state exists (records are filed under
    it); ``grace_seconds`` may change at any time.
    """

    bucket_seconds: int = DEFAULT_BUCKET_SECONDS
    grace_seconds: int = DEFAULT_GRACE_SECONDS


# --- validation --------------------------------------------------------------


def check_currency(value: object) -> str:
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        raise ValidationError(
            f"currency {str(value)[:20]!r} must be 3-8 uppercase letters or digits, "
            "starting with a letter (e.g. USD)"
        )
    return value


def canonical_rate(value: object) -> str:
    """A commission rate from 0 to 1 as a canonical decimal string ("0.125").

    Accepts a decimal string, a :class:`~decimal.Decimal` or the integers 0
    and 1; floats are refused because they cannot hold most rates exactly.
    """
    if isinstance(value, (bool, float)):
        raise ValidationError("rate must be a decimal string such as '0.05', never a float")
    if isinstance(value, int):
        value = Decimal(value)
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or "_" in text:
            # Decimal reads other scripts' digits (Arabic-Indic, fullwidth) and "0.0_5" as 0.05
            raise ValidationError(f"rate {text[:20]!r} is not a decimal number of ASCII digits")
        try:
            value = Decimal(text)
        except InvalidOperation as exc:
            raise ValidationError(f"rate {text[:20]!r} is not a decimal number") from exc
    if not isinstance(value, Decimal) or not value.is_finite():
        raise ValidationError("rate must be a decimal string such as '0.05'")
    if not Decimal(0) <= value <= Decimal(1):
        raise ValidationError(f"rate must be between 0 and 1 (got {value})")
    normal = value.normalize()
    exponent = normal.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > MAX_RATE_PLACES:
        raise ValidationError(f"rate has more than {MAX_RATE_PLACES} decimal places")
    text = format(normal, "f")
    return "0" if text in ("0", "-0") else text


def rate_fraction(rate: str) -> Fraction:
    return Fraction(Decimal(rate))


def commission(amount: int, rate: Fraction) -> int:
    """``amount * rate`` rounded half to even to whole minor units (exact)."""
    return round(Fraction(amount) * rate)


def check_time(value: object, what: str = "time") -> datetime:
    if isinstance(value, str):
        value = parse_time(value, what)
    if not isinstance(value, datetime):
        raise ValidationError(f"{what} must be an ISO 8601 timestamp with a time zone")
    if value.tzinfo is None:
        raise ValidationError(f"{what} needs a time zone (e.g. 2026-01-01T12:00:00Z)")
    return _utc(value, what)


def parse_time(value: str, what: str = "time") -> datetime:
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValidationError(f"{what} {value[:40]!r} is not an ISO 8601 timestamp") from exc
    if parsed.tzinfo is None:
        raise ValidationError(f"{what} needs a time zone (e.g. 2026-01-01T12:00:00Z)")
    return _utc(parsed, what)


def _utc(value: datetime, what: str) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:  # year 1 or 9999 moved past the calendar's ends
        raise ValidationError(f"{what} is out of range in UTC") from exc


def new_record(
    record_id: object,
    *,
    partner: object,
    order_id: object,
    amount: object,
    currency: object,
    rate: object,
    time: object,
) -> RecordDraft:
    """Validate one billing record; amounts are signed (a negative one is a refund)."""
    return RecordDraft(
        id=check_id(record_id, "record id"),
        partner=check_id(partner, "partner"),
        order_id=check_id(order_id, "order id"),
        amount=check_signed_amount(amount),
        currency=check_currency(currency),
        rate=canonical_rate(rate),
        time=check_time(time),
    )


RECORD_FIELDS = ("id", "partner", "order_id", "amount", "currency", "rate", "time")


def draft_from_mapping(data: Mapping[str, Any]) -> RecordDraft:
    """A record from a JSON object (an NDJSON line, an HTTP body)."""
    if not isinstance(data, Mapping):
        raise ValidationError("a billing record must be a JSON object")
    unknown = sorted(set(data) - set(RECORD_FIELDS) - {"record_id"})
    if unknown:
        raise ValidationError(f"unknown field(s) in billing record: {', '.join(unknown)}")
    if "id" in data and "record_id" in data:
        # the line items' name for it, taken too: which one counts would be a guess
        raise ValidationError("a billing record gives its id once: id or record_id, not both")
    return new_record(
        data.get("id", data.get("record_id")),
        partner=data.get("partner"),
        order_id=data.get("order_id"),
        amount=data.get("amount"),
        currency=data.get("currency"),
        rate=data.get("rate"),
        time=data.get("time"),
    )


# --- buckets and windows -------------------------------------------------------


def check_bucket_seconds(seconds: int) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise ValidationError("bucket size must be a whole number of seconds")
    if not MIN_BUCKET_SECONDS <= seconds <= MAX_BUCKET_SECONDS or seconds % 60:
        raise ValidationError("bucket size must be whole minutes, from 1 minute to 1 day")
    if 86400 % seconds:
        raise ValidationError("bucket size must divide a day evenly (1, 5, 15, 60 minutes...)")
    return seconds


def check_grace_seconds(seconds: int) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise ValidationError("grace must be a whole number of seconds")
    if not 0 <= seconds <= MAX_GRACE_SECONDS:
        raise ValidationError("grace must be from 0 seconds to 7 days")
    return seconds


def epoch(t: datetime) -> int:
    """Whole epoch seconds (floor) of an aware datetime."""
    return int(t.astimezone(UTC).timestamp() // 1)


def from_epoch(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def bucket_start(seconds: int, size: int) -> int:
    return seconds - seconds % size


def parse_interval(text: str) -> int:
    """``15m``, ``1h``, ``1d`` ... (:data:`INTERVAL_PATTERN`) as seconds."""
    if not isinstance(text, str) or _INTERVAL.fullmatch(text) is None:
        raise ValidationError(
            f"interval {str(text)[:20]!r} must be a whole number and m, h or d with nothing "
            "around it: 15m, 1h or 1d"
        )
    seconds = int(text[:-1]) * {"m": 60, "h": 3600, "d": 86400}[text[-1].lower()]
    if seconds > 31 * 86400:
        raise ValidationError("interval must be at most 31 days")
    return seconds


def check_interval(interval: int, bucket: int) -> int:
    if interval % bucket:
        raise ValidationError(
            f"interval ({interval // 60} min) must be a multiple of the bucket size "
            f"({bucket // 60} min)"
        )
    return interval


def next_window(start: int, interval: int, now: int, grace: int) -> tuple[int, int] | None:
    """The window after ``start``: it ends on the next multiple of ``interval``
    (UTC-aligned, so daily windows end at midnight) and is due only once it
    is older than the grace window."""
    end = (start // interval + 1) * interval
    return (start, end) if end + grace <= now else None


def window_name(start: int, end: int) -> str:
    """``20260101T000000Z_20260101T001500Z``: safe in paths, URLs and S3 keys."""
    return f"{from_epoch(start).strftime(_WINDOW_TIME)}_{from_epoch(end).strftime(_WINDOW_TIME)}"


def parse_window(name: str) -> tuple[int, int]:
    try:
        left, right = name.strip().split("_")
        start = datetime.strptime(left, _WINDOW_TIME).replace(tzinfo=UTC)
        end = datetime.strptime(right, _WINDOW_TIME).replace(tzinfo=UTC)
    except ValueError as exc:
        raise ValidationError(
            f"window {name[:60]!r} must look like 20260101T000000Z_20260101T010000Z"
        ) from exc
    if end <= start:
        raise ValidationError("a window must end after it starts")
    return epoch(start), epoch(end)


def iso(t: datetime) -> str:
    """``2026-01-01T12:00:00.000000Z``; the year always has 4 digits (strftime
    writes year 999 as ``999``, which :func:`parse_iso` could not read back)."""
    u = t.astimezone(UTC)
    return f"{u.year:04d}{u.strftime(_ISO[2:])}"


def parse_iso(s: str) -> datetime:
    dash = s.find("-")
    if 0 < dash < 4:  # a year written unpadded before iso padded it
        s = "0" * (4 - dash) + s
    return datetime.strptime(s, _ISO).replace(tzinfo=UTC)
