"""Identifier rules: ids, fund names, units, system accounts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.ids import (
    MAX_ID_LENGTH,
    check_fund,
    check_id,
    check_unit,
    is_system_account,
)
from tallybook.errors import ValidationError

ID_ALPHABET = "abcXYZ019._:-"


@pytest.mark.parametrize(
    "value", ["a", "A1", "order-2024.11:7_x", "0", "x" * MAX_ID_LENGTH, "user:42"]
)
def test_check_id_accepts_ascii_ids(value: str) -> None:
    assert check_id(value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "is required"),
        (None, "is required"),
        (42, "is required"),
        ("x" * (MAX_ID_LENGTH + 1), "longer than 128"),
        ("a/b", "may hold only"),
        ("a b", "may hold only"),
        ("-leading", "must start with a letter or digit"),
        (".hidden", "must start with a letter or digit"),
        ("@issuance", "may hold only"),
        ("caf\u00e9", "may hold only"),
        ("a#b", "may hold only"),
        ("line\n", "may hold only"),
    ],
)
def test_check_id_refuses_empty_oversized_and_odd_characters(value: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        check_id(value, "transaction id")


def test_check_id_names_what_it_checks() -> None:
    with pytest.raises(ValidationError, match=r"^order id is required"):
        check_id("", "order id")


@given(st.text(alphabet=ID_ALPHABET, min_size=1, max_size=200))
def test_check_id_accepts_iff_length_and_first_character_fit(value: str) -> None:
    ok = len(value) <= MAX_ID_LENGTH and value[0].isalnum()
    if ok:
        assert check_id(value) == value
    else:
        with pytest.raises(ValidationError):
            check_id(value)


@given(st.text(min_size=1, max_size=40))
def test_an_accepted_id_never_holds_key_separators(value: str) -> None:
    """Ids are embedded in keys (``ACCT#{p}#{a}``): '#' or '/' would break them."""
    try:
        check_id(value)
    except ValidationError:
        return
    assert "#" not in value
    assert "/" not in value
    assert value.isascii()


@pytest.mark.parametrize("value", ["points", "cash", "store_credit", "b2", "x" * 32])
def test_check_fund_accepts_lowercase_names(value: str) -> None:
    assert check_fund(value) == value


@pytest.mark.parametrize("value", ["", "Points", "2points", "_x", "a-b", "x" * 33, None, 3])
def test_check_fund_refuses_other_names(value: object) -> None:
    with pytest.raises(ValidationError, match="fund"):
        check_fund(value)


@pytest.mark.parametrize("value", ["USD", "points", "EUR_cents", "x" * 16])
def test_check_unit_accepts_short_names(value: str) -> None:
    assert check_unit(value) == value


@pytest.mark.parametrize("value", ["", "1USD", "U$D", "x" * 17, None])
def test_check_unit_refuses_other_names(value: object) -> None:
    with pytest.raises(ValidationError, match="unit"):
        check_unit(value)


def test_system_accounts_are_those_starting_with_at() -> None:
    assert is_system_account("@issuance")
    assert is_system_account("@external")
    assert not is_system_account("alice")
    assert not is_system_account("a@b")
