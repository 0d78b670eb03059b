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


#: the range of an order's time (an earn's ``at``), one rule for the Python
#: API, the CLI and HTTP: from 1970 up to, not including, 9000
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def check_time_range(value: datetime, what: str) -> datetime:
    """``value`` (aware) if it falls in :data:`EARLIEST` - :data:`LATEST`."""
    if not EARLIEST <= value < LATEST:
        raise ValidationError(f"{what} must be between 1970 and 9000")
    return value


def check_optional_time(value: object, what: str) -> datetime | None:
    """:func:`check_time`, or ``None``."""
    return None if value is None else check_time(value, what)
