"""Times given to the Python API: ``datetime`` values with a time zone.

The HTTP API and the CLI read a time without a zone as UTC before calling the
services; a naive ``datetime`` reaching a service is refused rather than read
in the machine's local zone (``astimezone`` would) or compared with aware ones
(a ``TypeError``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from tallybook.errors import ValidationError


def check_time(value: object, what: str) -> datetime:
    """``value`` as an aware ``datetime``; anything else is a ``ValidationError``."""
    if not isinstance(value, datetime):
        raise ValidationError(f"{what} must be a datetime (got {type(value).__name__})")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{what} needs a time zone (for example 2026-05-01T00:00:00Z)")
    try:  # 0001-01-01T00:00:00+01:00 has no UTC datetime: refused, not an OverflowError later
        value.astimezone(UTC)
    except OverflowError as exc:
        raise ValidationError(f"{what} is out of range") from exc
    return value


def check_optional_time(value: object, what: str) -> datetime | None:
    """:func:`check_time`, or ``None``."""
    return None if value is None else check_time(value, what)
