"""Pure billing rules: exact commission, rates, windows, deterministic rendering."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.billing import (
    BillingRecord,
    canonical_rate,
    commission,
    next_window,
    parse_interval,
    parse_window,
    rate_fraction,
    window_name,
)
from tallybook.domain.reports import partner_totals, render_billing
from tallybook.errors import ValidationError

rates = st.decimals(min_value=0, max_value=1, places=6, allow_nan=False, allow_infinity=False)
amounts = st.integers(min_value=-(10**15), max_value=10**15).filter(bool)


@given(amounts, rates)
def test_commission_is_exact_half_even(amount: int, rate: Decimal) -> None:
    expected = (Decimal(amount) * rate).quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
    assert commission(amount, rate_fraction(canonical_rate(str(rate)))) == int(expected)


def test_half_even_ties() -> None:
    assert commission(25, Fraction(1, 10)) == 2  # 2.5 -> 2
    assert commission(35, Fraction(1, 10)) == 4  # 3.5 -> 4
    assert commission(-25, Fraction(1, 10)) == -2
    assert commission(1005, rate_fraction("0.05")) == 50  # 50.25


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [("0.050", "0.05"), ("1", "1"), ("0", "0"), (" 0.125 ", "0.125"), (Decimal("0.10"), "0.1")],
)
def test_canonical_rate(raw: object, canonical: str) -> None:
    assert canonical_rate(raw) == canonical


@pytest.mark.parametrize("bad", [0.05, "1.5", "-0.1", "abc", "0.000000001", True, None, "NaN"])
def test_bad_rates_are_refused(bad: object) -> None:
    with pytest.raises(ValidationError):
        canonical_rate(bad)


@pytest.mark.parametrize("bad", ["\u0660.\u0660\u0665", "\uff10.\uff10\uff15", "0.0_5", "1_0"])
def test_rates_of_other_digits_or_underscores_are_refused(bad: str) -> None:
    """Was: Decimal read Arabic-Indic or fullwidth digits and ``_`` as a plain
    0.05, where every other number tallybook reads is ASCII digits."""
    with pytest.raises(ValidationError, match="ASCII digits"):
        canonical_rate(bad)


def test_intervals_and_windows() -> None:
    assert parse_interval("15m") == 900
    assert parse_interval("1h") == 3600
    assert parse_interval("1d") == 86400
    for bad in ("0m", "15s", "h", "40d"):
        with pytest.raises(ValidationError):
            parse_interval(bad)
    t0 = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    assert next_window(t0, 900, t0 + 900 + 299, 300) is None
    assert next_window(t0, 900, t0 + 900 + 300, 300) == (t0, t0 + 900)
    # an unaligned start ends on the interval's next boundary
    assert next_window(t0 + 900, 3600, t0 + 7200, 0) == (t0 + 900, t0 + 3600)
    name = window_name(t0, t0 + 900)
    assert name == "20260101T000000Z_20260101T001500Z"
    assert parse_window(name) == (t0, t0 + 900)
    with pytest.raises(ValidationError):
        parse_window("20260101T001500Z_20260101T000000Z")


def _rec(rid: str, partner: str, amount: int, rate: str) -> BillingRecord:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    return BillingRecord(
        "shop",
        rid,
        partner,
        "o",
        amount,
        "USD",
        rate,
        commission(amount, rate_fraction(rate)),
        t,
        t,
        t,
    )


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), amounts, rates), max_size=30))
def test_totals_equal_the_sum_of_line_items(rows: list[tuple[str, int, Decimal]]) -> None:
    records = [_rec(f"r{i}", p, a, canonical_rate(str(r))) for i, (p, a, r) in enumerate(rows)]
    totals = partner_totals(records)
    assert sum(t.records for t in totals) == len(records)
    for t in totals:
        mine = [r for r in records if r.partner == t.partner]
        assert t.amount == sum(r.amount for r in mine)
        assert t.commission == sum(r.commission for r in mine)


def test_rendering_is_independent_of_input_order() -> None:
    records = [_rec("r1", "b", 100, "0.1"), _rec("r2", "a", 333, "0.015"), _rec("r3", "a", 7, "1")]
    first = render_billing("shop", 0, 900, records)
    assert render_billing("shop", 0, 900, list(reversed(records))) == first
    assert first["billing_totals.csv"].decode().splitlines() == [
        "partner,currency,records,amount,commission",
        "a,USD,2,340,12",
        "b,USD,1,100,10",
    ]


def test_a_currency_starting_with_a_digit_is_refused_saying_why() -> None:
    """Was: "123" was refused as not "3-8 uppercase letters or digits", which it is
    (docs/billing.md said the same): a currency starts with a letter."""
    from tallybook.domain.billing import check_currency

    assert check_currency("X12") == "X12"
    with pytest.raises(ValidationError, match="starting with a letter"):
        check_currency("123")
