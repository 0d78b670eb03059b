"""Amounts as agents read and type them (pure): the currency's minor-unit exponent,
points whole, parsing exact or refused."""

from __future__ import annotations

import re

import pytest

from tallybook.admin.money import MINUS, example, exponent, format_amount, parse_amount
from tallybook.errors import ValidationError


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (1_400, "USD", "$14.00"),
        (5, "USD", "$0.05"),
        (123_456_789, "USD", "$1,234,567.89"),
        (-350, "EUR", MINUS + "€3.50"),
        (1_400, "JPY", "¥1,400"),
        (1_001, "KWD", "1.001 KWD"),
        (99, "CHF", "0.99 CHF"),
        (1_250, "points", "1,250"),
        (0, "USD", "$0.00"),
    ],
)
def test_format(value: int, unit: str, shown: str) -> None:
    assert format_amount(value, unit) == shown


def test_signed_format_marks_credits_and_debits() -> None:
    assert format_amount(1_250, "USD", signed=True) == "+$12.50"
    assert format_amount(-200, "USD", signed=True) == MINUS + "$2.00"
    assert format_amount(25, "points", signed=True) == "+25"


def test_exponents_follow_iso_4217() -> None:
    assert [exponent(u) for u in ("USD", "JPY", "KWD", "CLF", "points")] == [2, 0, 3, 4, 0]


@pytest.mark.parametrize(
    ("text", "unit", "minor"),
    [
        ("14", "USD", 1_400),
        ("14.5", "USD", 1_450),
        ("$1,400.00", "USD", 140_000),
        (" 0.05 ", "USD", 5),
        ("1400", "JPY", 1_400),
        ("0.001", "KWD", 1),
        ("500", "points", 500),
        ("$10,000,000,000,000.00", "USD", 10**15),  # the largest a posting carries
    ],
)
def test_parse(text: str, unit: str, minor: int) -> None:
    assert parse_amount(text, unit) == minor


@pytest.mark.parametrize(
    ("text", "unit", "message"),
    [
        ("14.555", "USD", "more precision than USD allows (2 decimal places)"),
        ("1.5", "points", "more precision than points allows (no decimal places)"),
        ("1.5", "JPY", "no decimal places"),
        ("-5", "USD", "positive number of USD"),
        ("0", "USD", "more than zero"),
        ("0.00", "USD", "more than zero"),
        ("abc", "points", "whole number of points"),
        ("1e3", "USD", "positive number of USD"),
        ("", "USD", "positive number of USD"),
        ("\u0661\u0662", "USD", "positive number of USD"),  # Arabic-Indic digits
        ("\uff11\uff12", "points", "whole number of points"),  # full-width digits
        # 17+ digits were "must be a positive number of USD"; 16 got the ledger's
        # "exceeds the maximum of 1000000000000000 minor units"
        ("12345678901234567", "USD", "too large: at most $10,000,000,000,000.00"),
        ("$10,000,000,000,000.01", "USD", "too large: at most $10,000,000,000,000.00"),
        ("1000000000000001", "points", "too large: at most 1,000,000,000,000,000"),
        ("1000000000000000000", "JPY", "too large: at most ¥1,000,000,000,000,000"),
    ],
)
def test_parse_refuses_rather_than_rounds(text: str, unit: str, message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        parse_amount(text, unit)


@pytest.mark.parametrize(
    ("unit", "typed", "minor"),
    [("USD", "14.50", 1450), ("JPY", "14", 14), ("KWD", "14.500", 14_500), ("points", "14", 14)],
)
def test_the_example_amount_is_one_the_currency_takes(unit: str, typed: str, minor: int) -> None:
    """The adjust form's hint and placeholder: an amount typed as the currency is."""
    assert example(unit) == typed
    assert parse_amount(typed, unit) == minor
