"""Table-driven tests of the pure loyalty rules: config validation, earning, tiers."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.loyalty import LoyaltyConfig, parse_config, quote, round_points
from tallybook.domain.tiers import (
    MemberState,
    add_months,
    decide_tier,
    qualifying_points,
    record_earn,
)
from tallybook.errors import ConfigError
from tallybook.services.loyalty.service import load_toml

EXAMPLE = Path(__file__).parents[2] / "examples" / "loyalty.toml"
T0 = datetime(2026, 1, 15, tzinfo=UTC)

TIERS = [
    {"name": "base", "threshold": 0},
    {"name": "silver", "threshold": 100, "multiplier": 1.5},
    {"name": "gold", "threshold": 500, "multiplier": "2"},
]


def cfg(**overrides: Any) -> LoyaltyConfig:
    return parse_config({"tiers": TIERS, **overrides})


def test_example_file_loads_and_round_trips() -> None:
    config = load_toml(EXAMPLE)
    assert [t.name for t in config.tiers] == ["member", "silver", "gold"]
    assert config.tiers[1].multiplier == Fraction(5, 4)
    again = parse_config(config.to_settings())
    assert again == config
    assert "1.25" in str(config.to_settings())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"earn": {"rounding": "sideways"}}, "earn.rounding must be one of"),
        ({"earn": {"points_per_unit": 0}}, "earn.points_per_unit must be a positive number"),
        ({"earn": {"points_per_unit": "abc"}}, "earn.points_per_unit must be a number"),
        ({"earn": {"unit_size": 0}}, "earn.unit_size must be at least 1"),
        ({"earn": {"unit_size": 1.5}}, "earn.unit_size must be an integer"),
        ({"earn": {"rate": 1}}, "earn: unknown key 'rate'"),
        ({"tiers": []}, "tiers must be a non-empty list"),
        ({"tiers": [{"name": "a", "threshold": 5}]}, "first (base) tier must have threshold 0"),
        (
            {"tiers": [{"name": "a", "threshold": 0}, {"name": "b", "threshold": 0}]},
            "tiers[1].threshold: thresholds must increase",
        ),
        (
            {"tiers": [{"name": "a", "threshold": 0}, {"name": "a", "threshold": 9}]},
            "tier 'a' is defined twice",
        ),
        ({"tiers": [{"name": "bad name", "threshold": 0}]}, "tiers[0].name"),
        ({"qualification": {"window": "weekly"}}, "qualification.window must be one of"),
        ({"qualification": {"months": 0}}, "qualification.months must be at least 1"),
        ({"downgrade": {"rule": "sometimes"}}, "downgrade.rule must be one of"),
        ({"expiry": {"days": 10, "months": 1}}, "either days or months"),
        ({"expiry": {"days": -1}}, "expiry.days must be at least 1"),
        (
            {"campaigns": [{"id": "c", "starts": "2026-02-01", "ends": "2026-01-01", "bonus": 1}]},
            "campaigns[0]: ends must be after starts",
        ),
        (
            {"campaigns": [{"id": "c", "starts": "2026-01-01", "ends": "2026-02-01"}]},
            "needs a multiplier other than 1 or a bonus",
        ),
        (
            {"campaigns": [{"id": "c", "starts": "x", "ends": "2026-02-01", "bonus": 1}]},
            "campaigns[0].starts must be an ISO date",
        ),
        (
            {
                "campaigns": [
                    {
                        "id": "c",
                        "starts": "2026-01-01",
                        "ends": "2026-02-01",
                        "bonus": 1,
                        "tiers": ["platinum"],
                    }
                ]
            },
            "unknown tier 'platinum'",
        ),
        ({"fund": "Points!"}, "fund:"),
        ({"extra": 1}, "unknown key 'extra'"),
    ],
)
def test_invalid_configs_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="test.toml")
    assert message in err.value.message
    assert err.value.message.startswith("test.toml: ")


def test_bad_toml_file_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[earn\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_toml(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_toml(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("value", "rounding", "expected"),
    [
        (Fraction(5, 2), "down", 2),
        (Fraction(5, 2), "up", 3),
        (Fraction(5, 2), "half_up", 3),
        (Fraction(5, 2), "half_even", 2),
        (Fraction(7, 2), "half_even", 4),
        (Fraction(249, 100), "half_up", 2),
        (Fraction(3), "up", 3),
        (Fraction(0), "up", 0),
    ],
)
def test_rounding(value: Fraction, rounding: str, expected: int) -> None:
    assert round_points(value, rounding) == expected


CAMPAIGNS = [
    {"id": "double", "starts": "2026-03-01", "ends": "2026-04-01", "multiplier": 2},
    {
        "id": "gold-bonus",
        "starts": "2026-01-01",
        "ends": "2027-01-01",
        "bonus": 50,
        "tiers": ["gold"],
        "min_amount": 5000,
    },
]


@pytest.mark.parametrize(
    ("earn", "amount", "tier", "at", "points", "campaigns"),
    [
        ({}, 1999, "base", T0, 19, ()),
        ({"rounding": "up"}, 1901, "base", T0, 20, ()),
        ({"points_per_unit": 10}, 1999, "base", T0, 199, ()),
        ({"points_per_unit": "0.5", "rounding": "half_up"}, 300, "base", T0, 2, ()),
        ({"unit_size": 1}, 7, "base", T0, 7, ()),
        ({}, 1000, "silver", T0, 15, ()),
        ({}, 1000, "gold", T0, 20, ()),
        ({}, 1000, "base", datetime(2026, 3, 31, 23, 59, tzinfo=UTC), 20, ("double",)),
        ({}, 1000, "base", datetime(2026, 4, 1, tzinfo=UTC), 10, ()),
        ({}, 1000, "silver", datetime(2026, 3, 5, tzinfo=UTC), 30, ("double",)),
        ({}, 6000, "gold", T0, 170, ("gold-bonus",)),
        ({}, 4999, "gold", T0, 99, ()),
        ({}, 6000, "gold", datetime(2026, 3, 5, tzinfo=UTC), 290, ("double", "gold-bonus")),
        ({}, 6000, "unknown-tier", T0, 60, ()),
    ],
)
def test_earning_rule(
    earn: dict[str, Any],
    amount: int,
    tier: str,
    at: datetime,
    points: int,
    campaigns: tuple[str, ...],
) -> None:
    q = quote(cfg(earn=earn, campaigns=CAMPAIGNS), amount, tier=tier, at=at)
    assert (q.points, q.campaigns) == (points, campaigns)


@given(st.integers(1, 10**12), st.sampled_from(["down", "up", "half_up", "half_even"]))
def test_points_are_within_one_of_the_exact_value(amount: int, rounding: str) -> None:
    config = cfg(earn={"points_per_unit": "1.37", "rounding": rounding})
    q = quote(config, amount, tier="silver", at=T0)
    exact = Fraction(amount) * Fraction(137, 100) / 100 * Fraction(3, 2)
    assert abs(q.points - exact) <= 1
    assert isinstance(q.points, int)


def _state(tier: str | None, qualified_at: datetime | None = T0) -> MemberState:
    return MemberState(tier=tier, qualified_at=qualified_at)


@pytest.mark.parametrize(
    ("downgrade", "current", "qualifying", "months_later", "expected"),
    [
        ({"rule": "immediate"}, None, 0, 0, "base"),
        ({"rule": "immediate"}, None, 600, 0, "gold"),
        ({"rule": "immediate"}, "base", 100, 0, "silver"),
        ({"rule": "never"}, "gold", 0, 60, "gold"),
        ({"rule": "immediate"}, "gold", 150, 0, "silver"),
        ({"rule": "immediate"}, "gold", 0, 0, "base"),
        ({"rule": "after_hold", "hold_months": 12}, "gold", 0, 11, "gold"),
        ({"rule": "after_hold", "hold_months": 12}, "gold", 0, 12, "base"),
        ({"rule": "after_hold", "hold_months": 12, "max_steps": 1}, "gold", 0, 12, "silver"),
        ({"rule": "immediate", "max_steps": 1}, "gold", 150, 0, "silver"),
        ({"rule": "after_hold", "hold_months": 0}, "silver", 99, 0, "base"),
        ({"rule": "after_hold", "hold_months": 3}, "silver", 600, 1, "gold"),
    ],
)
def test_tier_decisions(
    downgrade: dict[str, Any],
    current: str | None,
    qualifying: int,
    months_later: int,
    expected: str,
) -> None:
    config = cfg(downgrade=downgrade)
    at = add_months(T0, months_later)
    decision = decide_tier(config, _state(current), qualifying, at)
    assert decision.tier == expected
    assert decision.changed == (expected != current)


def test_requalifying_restarts_the_hold() -> None:
    config = cfg(downgrade={"rule": "after_hold", "hold_months": 12})
    d = decide_tier(config, _state("silver"), 150, add_months(T0, 6))
    assert (d.tier, d.qualified_at, d.changed) == ("silver", add_months(T0, 6), False)


def test_rolling_window_counts_only_recent_months() -> None:
    config = cfg(qualification={"window": "rolling", "months": 3})
    state = MemberState()
    for month, points in [(1, 100), (2, 200), (3, 300), (4, 400)]:
        state = record_earn(config, state, points, datetime(2026, month, 10, tzinfo=UTC))
    assert set(state.months) == {"2026-02", "2026-03", "2026-04"}
    assert qualifying_points(config, state, datetime(2026, 4, 30, tzinfo=UTC), 0) == 900
    assert qualifying_points(config, state, datetime(2026, 6, 1, tzinfo=UTC), 0) == 400
    assert qualifying_points(config, state, datetime(2026, 8, 1, tzinfo=UTC), 0) == 0
    assert state.lifetime == 1000


def test_lifetime_and_balance_bases() -> None:
    state = record_earn(cfg(), MemberState(), 70, T0)
    assert qualifying_points(cfg(), state, add_months(T0, 100), 5) == 70
    balance_cfg = cfg(qualification={"basis": "balance"})
    assert qualifying_points(balance_cfg, state, T0, 5) == 5


@pytest.mark.parametrize(
    ("start", "months", "expected"),
    [
        (datetime(2026, 1, 31, tzinfo=UTC), 1, datetime(2026, 2, 28, tzinfo=UTC)),
        (datetime(2026, 11, 15, tzinfo=UTC), 3, datetime(2027, 2, 15, tzinfo=UTC)),
        (datetime(2026, 3, 31, tzinfo=UTC), -1, datetime(2026, 2, 28, tzinfo=UTC)),
        (datetime(2024, 2, 29, tzinfo=UTC), 12, datetime(2025, 2, 28, tzinfo=UTC)),
    ],
)
def test_add_months(start: datetime, months: int, expected: datetime) -> None:
    assert add_months(start, months) == expected


def test_multipliers_keep_their_decimal_text_as_docs_loyalty_md_says(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "loyalty.md").read_text()
    assert "keeps 15 significant digits: give\na longer one as a string" in doc
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[tiers]]\nname = "base"\nthreshold = 0\nmultiplier = 1.5\n'
        '[[tiers]]\nname = "gold"\nthreshold = 10\nmultiplier = "1.2345678901234567891"\n'
        '[[tiers]]\nname = "top"\nthreshold = 20\nmultiplier = 1.234567890123456\n'
    )
    tiers = load_toml(rules).to_settings()["tiers"]
    assert [t["multiplier"] for t in tiers] == ["1.5", "1.2345678901234567891", "1.234567890123456"]
