"""Amounts are integers in minor units: validation of positive and signed amounts."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.money import MAX_AMOUNT, check_amount, check_signed_amount
from tallybook.errors import ValidationError


@pytest.mark.parametrize("value", [1, 7, MAX_AMOUNT])
def test_check_amount_accepts_positive_integers_up_to_the_maximum(value: int) -> None:
    assert check_amount(value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "must be positive"),
        (-1, "must be positive"),
        (MAX_AMOUNT + 1, "exceeds the maximum"),
        (1.0, "must be an integer"),
        (1.5, "must be an integer"),
        (Decimal(1), "must be an integer"),
        ("10", "must be an integer"),
        (None, "must be an integer"),
        (True, "must be an integer"),
        (False, "must be an integer"),
    ],
)
def test_check_amount_refuses_everything_else(value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        check_amount(value)


def test_check_amount_names_the_field() -> None:
    with pytest.raises(ValidationError, match=r"^price must be positive"):
        check_amount(0, "price")


@pytest.mark.parametrize("value", [1, -1, MAX_AMOUNT, -MAX_AMOUNT])
def test_check_signed_amount_accepts_non_zero_integers(value: int) -> None:
    assert check_signed_amount(value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "must not be zero"),
        (MAX_AMOUNT + 1, "exceeds the maximum"),
        (-MAX_AMOUNT - 1, "exceeds the maximum"),
        (-2.5, "must be an integer"),
        (True, "must be an integer"),
        ("-3", "must be an integer"),
    ],
)
def test_check_signed_amount_refuses_zero_floats_and_oversized(value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        check_signed_amount(value)


@given(st.integers())
def test_check_amount_accepts_exactly_the_range_1_to_max(value: int) -> None:
    if 1 <= value <= MAX_AMOUNT:
        assert check_amount(value) == value
    else:
        with pytest.raises(ValidationError):
            check_amount(value)


@given(st.integers())
def test_check_signed_amount_is_symmetric(value: int) -> None:
    valid = value != 0 and abs(value) <= MAX_AMOUNT
    for v in (value, -value):
        if valid:
            assert check_signed_amount(v) == v
        else:
            with pytest.raises(ValidationError):
                check_signed_amount(v)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_floats_are_never_amounts_even_when_whole(value: float) -> None:
    with pytest.raises(ValidationError, match="integer"):
        check_amount(value)
    with pytest.raises(ValidationError, match="integer"):
        check_signed_amount(value)
