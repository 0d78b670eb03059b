"""``after_hold``: a member keeps a tier ``hold_months`` after they *last
qualified* for it (docs/loyalty.md, "Tiers"), not after the last event that
happened to look at their standing.

Regression: the hold ran from the earn that put the member in the tier, so a
gold member who held 500 points for five months and then redeemed them was
dropped at once instead of three months later; and with a rolling window a
member was dropped before the hold ran out from the month their points left
the window.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tallybook.domain.loyalty import parse_config
from tallybook.domain.tiers import MemberState, last_qualified, record_earn
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore

pytestmark = pytest.mark.unit

TIERS = [{"name": "base", "threshold": 0}, {"name": "gold", "threshold": 100}]


def _ledger(store: ItemStore, rules: dict[str, Any]) -> tuple[Ledger, ManualClock]:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    led = Ledger(store, clock=clock)
    led.programs.create("shop")
    led.loyalty.configure("shop", {"tiers": TIERS, **rules})
    led.accounts.open("shop", "alice")
    return led, clock


def test_balance_basis_hold_runs_from_the_redeem_that_ended_qualifying(store: ItemStore) -> None:
    led, clock = _ledger(
        store,
        {
            "qualification": {"basis": "balance"},
            "downgrade": {"rule": "after_hold", "hold_months": 3},
        },
    )
    assert led.loyalty.earn("shop", "alice", "o1", 50_000).tier == "gold"  # 500 points
    clock.set(datetime(2026, 6, 1, tzinfo=UTC))  # still 500 points: qualified all along
    assert led.loyalty.redeem("shop", "alice", 450, "tv", txn_id="r1").tier == "gold"
    clock.set(datetime(2026, 8, 31, tzinfo=UTC))
    assert led.loyalty.review_tiers("shop").downgraded == 0
    assert led.loyalty.status("shop", "alice").tier == "gold"
    clock.set(datetime(2026, 9, 1, tzinfo=UTC))  # three months after the redeem
    assert led.loyalty.review_tiers("shop").downgraded == 1
    assert led.loyalty.status("shop", "alice").tier == "base"


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
@pytest.mark.parametrize("expire_by", ["status", "job", "downgrade job"])
def test_balance_basis_hold_runs_from_the_date_points_expired_not_when_expiry_ran(
    store: ItemStore, expire_by: str
) -> None:
    """Points past their date never count, whether the expiry ran or not: a member
    whose gold points expired on January 11 last qualified then, so a one-month
    hold is over on February 11 however late the expiry (status or a job) came."""
    led, clock = _ledger(
        store,
        {
            "qualification": {"basis": "balance"},
            "downgrade": {"rule": "after_hold", "hold_months": 1},
            "expiry": {"days": 10},
        },
    )
    assert led.loyalty.earn("shop", "alice", "o1", 50_000).tier == "gold"  # 500 points
    clock.set(datetime(2026, 2, 10, tzinfo=UTC))  # expired on Jan 11: held until Feb 11
    if expire_by == "job":
        assert led.loyalty.expire("shop").points == 500
    elif expire_by == "downgrade job":
        assert led.loyalty.review_tiers("shop").downgraded == 0
    status = led.loyalty.status("shop", "alice")
    assert (status.balance, status.tier) == (0, "gold")
    clock.set(datetime(2026, 3, 1, tzinfo=UTC))
    assert led.loyalty.status("shop", "alice").tier == "base"
    assert led.loyalty.review_tiers("shop").downgraded == 1
    assert [m.account for m in led.loyalty.members("shop", "base").members] == ["alice"]


def test_rolling_hold_runs_from_the_month_the_points_left_the_window(store: ItemStore) -> None:
    led, clock = _ledger(
        store,
        {
            "qualification": {"window": "rolling", "months": 1},
            "downgrade": {"rule": "after_hold", "hold_months": 2},
        },
    )
    clock.set(datetime(2026, 1, 10, tzinfo=UTC))
    assert led.loyalty.earn("shop", "alice", "o1", 50_000).tier == "gold"
    # January's points count until February begins: gold is held until April 1
    clock.set(datetime(2026, 3, 20, tzinfo=UTC))
    assert led.loyalty.earn("shop", "alice", "o2", 100).tier == "gold"
    assert led.loyalty.review_tiers("shop").downgraded == 0
    clock.set(datetime(2026, 4, 1, tzinfo=UTC))
    assert led.loyalty.review_tiers("shop").downgraded == 1


def test_last_qualified_rolling() -> None:
    config = parse_config({"tiers": TIERS, "qualification": {"window": "rolling", "months": 2}})
    state = record_earn(config, MemberState(), 150, datetime(2026, 1, 10, tzinfo=UTC))
    state = MemberState(
        tier="gold", qualified_at=datetime(2026, 1, 10, tzinfo=UTC), months=state.months
    )
    # January counts through February (a two-month window)
    assert last_qualified(config, state, 0, datetime(2026, 2, 20, tzinfo=UTC)) == datetime(
        2026, 2, 20, tzinfo=UTC
    )
    assert last_qualified(config, state, 0, datetime(2026, 5, 5, tzinfo=UTC)) == datetime(
        2026, 3, 1, tzinfo=UTC
    )


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_a_plain_credit_does_not_count_points_past_their_date_towards_a_tier(
    store: ItemStore,
) -> None:
    """250 points that expired on January 11 (no expiry has run) and a plain credit
    of 60 on February 1: 60 points count, not 310, so the credit moves no one to
    platinum, and gold is held from January 11 for a month, no longer."""
    led, clock = _ledger(
        store,
        {
            "tiers": [*TIERS, {"name": "platinum", "threshold": 300}],
            "qualification": {"basis": "balance"},
            "downgrade": {"rule": "after_hold", "hold_months": 1},
            "expiry": {"days": 10},
        },
    )
    assert led.loyalty.earn("shop", "alice", "o1", 25_000).tier == "gold"  # 250 points
    clock.set(datetime(2026, 2, 1, tzinfo=UTC))
    txn = led.transactions.credit("shop", "alice", "points", 60, txn_id="c1")
    assert txn.details.get("tier_changed") is not True
    assert [c.tier for c in led.loyalty.tier_history("shop", "alice").changes] == ["gold"]
    status = led.loyalty.status("shop", "alice")
    assert (status.balance, status.tier) == (60, "gold")
    clock.set(datetime(2026, 2, 12, tzinfo=UTC))
    assert led.loyalty.review_tiers("shop").downgraded == 1
    assert led.loyalty.status("shop", "alice").tier == "base"
