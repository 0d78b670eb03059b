"""Amounts as support agents read and type them: ``$14.00``, not ``1,400``.

The ledger keeps integers in minor units. A fund whose unit is an ISO 4217
currency code (three capital letters, e.g. the program's currency) is shown in
major units with that currency's minor-unit exponent (2 for USD, 0 for JPY, 3
for KWD); any other unit (points) is a whole number. Parsing is the exact
inverse: ``"14.5"`` USD is 1450 minor units, ``"14.555"`` USD is refused.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from tallybook.domain.money import MAX_AMOUNT
from tallybook.errors import ValidationError

#: ISO 4217 currencies whose minor unit is not 2 digits (all others: 2)
_EXPONENTS = {
    **dict.fromkeys(
        ("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI"), 0
    ),
    **dict.fromkeys(("VND", "VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
    **dict.fromkeys(("CLF", "UYW"), 4),
}
#: symbols shown before the amount; other currencies show their code after it
_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹", "KRW": "₩"}
_CODE = re.compile(r"[A-Z]{3}")
#: ASCII digits only: `\d` takes any script's digits, which `Decimal` reads too
_INPUT = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
MINUS = "\N{MINUS SIGN}"


def is_currency(unit: str) -> bool:
    """True for an ISO 4217-shaped code (``USD``); ``points`` and the like are not."""
    return bool(_CODE.fullmatch(unit))


def exponent(unit: str) -> int:
    """Digits after the decimal point: the currency's minor-unit exponent, 0 for points."""
    return _EXPONENTS.get(unit, 2) if is_currency(unit) else 0


def format_amount(value: int, unit: str, *, signed: bool = False) -> str:
    """``value`` minor units of ``unit`` for a person: ``$14.00``, ``1,250``; negative
    amounts start with U+2212 MINUS SIGN, which reads better than a hyphen."""
    digits = exponent(unit)
    whole, frac = divmod(abs(value), 10**digits)
    number = f"{whole:,}" + (f".{frac:0{digits}d}" if digits else "")
    if is_currency(unit):
        symbol = _SYMBOLS.get(unit)
        number = f"{symbol}{number}" if symbol else f"{number} {unit}"
    if value < 0:
        return MINUS + number
    return "+" + number if signed and value > 0 else number


def example(unit: str) -> str:
    """An amount as an agent would type it in ``unit``: ``14.50`` USD, ``14`` JPY,
    ``14.500`` KWD, ``14`` points (the form's hint and placeholder)."""
    digits = exponent(unit)
    return "14." + "5".ljust(digits, "0") if digits else "14"


def parse_amount(text: str, unit: str, what: str = "the amount") -> int:
    """What an agent typed (``14``, ``14.5``, ``$1,400.00``) as a positive number of minor
    units of ``unit``; more decimals than the currency has, or points with decimals,
    are refused rather than rounded, and more than a posting carries is too large."""
    digits = exponent(unit)
    cleaned = text.strip().replace(",", "").replace(" ", "")
    cleaned = cleaned.removeprefix(_SYMBOLS.get(unit, "\0")).removesuffix(unit)
    if not _INPUT.fullmatch(cleaned):
        kind = (
            f"a positive number of {unit}, like {example(unit)}"
            if digits
            else f"a whole number of {unit}"
        )
        raise ValidationError(f"{what} must be {kind}")
    try:
        number = Decimal(cleaned)
    except InvalidOperation:
        raise ValidationError(f"{what} must be a number") from None
    minor = number.scaleb(digits)
    if minor != minor.to_integral_value():
        places = f"{digits} decimal places" if digits else "no decimal places"
        raise ValidationError(f"{what} has more precision than {unit} allows ({places})")
    if minor <= 0:
        raise ValidationError(f"{what} must be more than zero")
    if minor > MAX_AMOUNT:  # the ledger's own refusal names minor units
        raise ValidationError(f"{what} is too large: at most {format_amount(MAX_AMOUNT, unit)}")
    return int(minor)
