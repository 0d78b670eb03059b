"""Amounts are integers in minor units (cents, points); never floats."""

from __future__ import annotations

from tallybook.errors import ValidationError

#: the largest amount one posting may carry: 10^15 minor units
MAX_AMOUNT = 10**15


def check_amount(value: object, what: str = "amount") -> int:
    """A positive integer amount in minor units, at most :data:`MAX_AMOUNT`, as a
    plain ``int`` (an ``IntEnum`` or other ``int`` subclass is not kept)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"{what} must be an integer number of minor units (got {type(value).__name__})"
        )
    if value <= 0:  # a huge negative is not printed: str() fails past 4300 digits
        got = value if value >= -MAX_AMOUNT else f"below -{MAX_AMOUNT}"
        raise ValidationError(f"{what} must be positive (got {got})")
    if value > MAX_AMOUNT:
        raise ValidationError(f"{what} exceeds the maximum of {MAX_AMOUNT} minor units")
    return int(value)


def check_signed_amount(value: object, what: str = "amount") -> int:
    """A non-zero integer whose magnitude is at most :data:`MAX_AMOUNT`, as a plain ``int``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"{what} must be an integer number of minor units (got {type(value).__name__})"
        )
    if value == 0:
        raise ValidationError(f"{what} must not be zero")
    if abs(value) > MAX_AMOUNT:
        raise ValidationError(f"{what} exceeds the maximum of {MAX_AMOUNT} minor units")
    return int(value)
