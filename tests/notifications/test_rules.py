"""Pure rules: settings parsing, payload checks, threshold crossings, ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.notifications import (
    DEFAULT_TYPE_RULES,
    check_payload,
    created_us_of,
    make_id,
    parse_rules,
    rules_to_settings,
    threshold_crossing,
)
from tallybook.errors import ValidationError

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

amounts = st.integers(min_value=-(10**15), max_value=10**15)


@given(amounts, amounts, st.integers(min_value=0, max_value=10**15))
def test_threshold_crossing(before: int, after: int, threshold: int) -> None:
    crossing = threshold_crossing(before, after, threshold)
    if crossing is True:
        assert before >= threshold > after
    elif crossing is False:
        assert before < threshold <= after
    else:
        assert (before < threshold) == (after < threshold)


@given(st.integers(min_value=0, max_value=10**16 - 1))
def test_ids_carry_their_time(us: int) -> None:
    assert created_us_of(make_id(us, "0123456789")) == us


def test_defaults_and_overrides() -> None:
    rules = parse_rules(None)
    assert rules.retention_days == 90
    assert rules.rule("TopUp").dismisses == ("LowBalance",)
    assert rules.rule("TopUp").listed is False
    assert rules.rule("Anything").listed is True
    custom = parse_rules({"retention_days": 7, "types": {"TopUp": {"deliver": True}}})
    assert custom.rule("TopUp").dismisses == ("LowBalance",)  # default fields kept
    assert custom.rule("TopUp").deliver is True
    assert parse_rules(rules_to_settings(custom)) == custom
    assert set(DEFAULT_TYPE_RULES) <= set(custom.types)


@pytest.mark.parametrize(
    "raw",
    [
        [],
        {"retention_days": 0},
        {"retention_days": True},
        {"colour": "red"},
        {"types": {"X": {"listed": "yes"}}},
        {"types": {"X": {"dismisses": "Y"}}},
        {"types": {"X": {"expires_after_days": 0}}},
        {"types": {"X": {"wat": 1}}},
        {"types": {"bad type": {}}},
    ],
)
def test_bad_rules(raw: object) -> None:
    with pytest.raises(ValidationError):
        parse_rules(raw)


def test_payload_checks() -> None:
    assert check_payload(None) == {}
    assert check_payload({"a": [1, {"b": None}]}) == {"a": [1, {"b": None}]}
    for bad in ([1], {"a": 1.0}, {"a": {"b": [0.5]}}, {"a": 10**40}, {"a": "x" * 20_000}):
        with pytest.raises(ValidationError):
            check_payload(bad)
