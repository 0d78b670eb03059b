"""Loyalty use cases on both engines: earn, redeem, tiers, expiry, order lookup."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from tallybook.errors import (
    ConfigError,
    IdempotencyConflict,
    InsufficientFunds,
    NotFound,
    ValidationError,
)
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.services.events import LedgerEvent
from tallybook.store import keys
from tallybook.webhooks.events import derive

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

RULES: dict[str, Any] = {
    "tiers": [
        {"name": "base", "threshold": 0},
        {"name": "silver", "threshold": 100, "multiplier": 2},
        {"name": "gold", "threshold": 300, "multiplier": 3},
    ],
    "expiry": {"days": 10, "warn_days": 3},
    "downgrade": {"rule": "after_hold", "hold_months": 1},
    "qualification": {"basis": "balance"},
}


@pytest.fixture
def loyal(ledger: Ledger) -> Ledger:
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "alice")
    return ledger


@pytest.fixture
def events(ledger: Ledger) -> list[LedgerEvent]:
    seen: list[LedgerEvent] = []
    ledger.events.subscribe(seen.append)
    return seen


def test_no_rules_is_a_clear_error(ledger: Ledger) -> None:
    ledger.accounts.open("shop", "alice")
    with pytest.raises(ConfigError, match="no loyalty configuration"):
        ledger.loyalty.earn("shop", "alice", "o1", 100)


def test_configure_validates_and_keeps_other_settings(ledger: Ledger) -> None:
    ledger.programs.update_settings("shop", {"notifications": {"x": 1}})
    with pytest.raises(ConfigError, match="has no fund 'miles'"):
        ledger.loyalty.configure("shop", {**RULES, "fund": "miles"})
    with pytest.raises(ConfigError, match="differs from the program's currency"):
        ledger.loyalty.configure("shop", {"earn": {"currency": "EUR"}})
    ledger.loyalty.configure("shop", RULES)
    settings = ledger.programs.get("shop", fresh=True).settings
    assert settings["notifications"] == {"x": 1}
    assert settings["loyalty"]["tiers"][1] == {
        "name": "silver",
        "threshold": 100,
        "multiplier": "2",
    }


def test_earn_is_idempotent_per_order(loyal: Ledger) -> None:
    first = loyal.loyalty.earn("shop", "alice", "o1", 5000)
    again = loyal.loyalty.earn("shop", "alice", "o1", 5000)
    assert (first.points, first.replay) == (50, False)
    assert (again.points, again.replay, again.transaction.id) == (50, True, "order:o1")
    assert loyal.accounts.balances("shop", "alice")[0].balance == 50
    with pytest.raises(IdempotencyConflict):
        loyal.loyalty.earn("shop", "alice", "o1", 9999)
    # a retry that drops the partner is another request, and the error says what may differ
    with pytest.raises(IdempotencyConflict, match="description or metadata"):
        loyal.loyalty.earn("shop", "alice", "o1", 5000, metadata={"partner": "acme"})
    with pytest.raises(ValidationError, match="not EUR"):
        loyal.loyalty.earn("shop", "alice", "o2", 100, currency="EUR")
    with pytest.raises(ValidationError):
        loyal.loyalty.earn("shop", "alice", "o2", -5)
    with pytest.raises(NotFound):
        loyal.loyalty.earn("shop", "nobody", "o3", 100)


@pytest.mark.parametrize(
    ("order_id", "message"),
    [("", r"order id is required \(1-122 characters\)"), ("o" * 130, "longer than 122")],
)
def test_order_ids_are_refused_naming_their_limit(
    loyal: Ledger, order_id: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        loyal.loyalty.earn("shop", "alice", order_id, 100)
    with pytest.raises(ValidationError, match=message):
        loyal.loyalty.order("shop", order_id)


def test_order_lookup(loyal: Ledger) -> None:
    loyal.loyalty.earn("shop", "alice", "o-7", 2000)
    found = loyal.loyalty.order("shop", "o-7")
    assert (found.account, found.points, found.transaction.id) == ("alice", 20, "order:o-7")
    assert [t.id for t in loyal.transactions.for_order("shop", "o-7")] == ["order:o-7"]
    with pytest.raises(NotFound, match="has not earned points"):
        loyal.loyalty.order("shop", "o-unknown")


def test_small_order_earns_zero_points_once(loyal: Ledger) -> None:
    r = loyal.loyalty.earn("shop", "alice", "tiny", 50)
    assert (r.points, r.lot_expires) == (0, None)
    assert loyal.loyalty.order("shop", "tiny").points == 0
    assert loyal.loyalty.earn("shop", "alice", "tiny", 50).replay


def test_redeem_and_insufficient_points(loyal: Ledger) -> None:
    loyal.loyalty.earn("shop", "alice", "o1", 5000)
    with pytest.raises(InsufficientFunds, match="alice has 50 available, reward mug needs 80"):
        loyal.loyalty.redeem("shop", "alice", 80, "mug", txn_id="r1")
    r = loyal.loyalty.redeem("shop", "alice", 30, "mug", txn_id="r2")
    assert (r.points, r.balance, r.replay) == (30, 20, False)
    assert loyal.loyalty.redeem("shop", "alice", 30, "mug", txn_id="r2").replay
    assert loyal.transactions.system_balance("shop", "@redemption") == {"points": 30}
    assert loyal.check.program("shop").ok


def test_a_redeem_records_the_reward_it_redeemed(loyal: Ledger) -> None:
    loyal.loyalty.earn("shop", "alice", "o1", 5000)
    with pytest.raises(ValidationError, match="metadata reward_id 'tv' is not the reward"):
        loyal.loyalty.redeem("shop", "alice", 10, "mug", txn_id="r1", metadata={"reward_id": "tv"})
    assert loyal.accounts.balances("shop", "alice")[0].balance == 50
    r = loyal.loyalty.redeem("shop", "alice", 10, "mug", txn_id="r1", metadata={"reward_id": "mug"})
    assert r.transaction.metadata == {"reward_id": "mug"}


def test_tiers_upgrade_at_once_with_history_index_and_event(
    loyal: Ledger, events: list[LedgerEvent]
) -> None:
    loyal.loyalty.earn("shop", "alice", "o1", 5000)  # 50 points: base
    up = loyal.loyalty.earn("shop", "alice", "o2", 5000)  # 50 -> 100: silver
    assert (up.tier, up.previous_tier, up.points) == ("silver", "base", 50)
    boosted = loyal.loyalty.earn("shop", "alice", "o3", 1000)  # silver earns x2
    assert boosted.points == 20
    assert loyal.loyalty.status("shop", "alice").tier == "silver"
    assert loyal.loyalty.members("shop", "silver").accounts == ["alice"]
    assert loyal.loyalty.members("shop", "base").accounts == []
    changes = loyal.loyalty.tier_history("shop", "alice").changes
    assert [(c.previous, c.tier, c.reason) for c in changes] == [
        ("base", "silver", "earn"),
        (None, "base", "earn"),
    ]
    tier_events = [e for e in events if e.type == "TierChanged"]
    assert [(e.payload["previous"], e.payload["tier"], e.source_id) for e in tier_events] == [
        ("base", "silver", "order:o2")
    ]
    # a replay raises no second notification: it may publish the same event again
    # (its source id makes that a no-op; it brings back one that a crash lost)
    loyal.loyalty.earn("shop", "alice", "o2", 5000)
    assert {e.source_id for e in events if e.type == "TierChanged"} == {"order:o2"}
    history = loyal.notifications.history("shop", "alice").notifications
    assert [n.type for n in history] == ["TierChanged"]
    with pytest.raises(NotFound, match="no tier 'platinum'"):
        loyal.loyalty.members("shop", "platinum")


def test_downgrade_waits_for_the_hold_then_the_job_applies_it(
    loyal: Ledger, clock: ManualClock, events: list[LedgerEvent]
) -> None:
    # points that never expire: the job, not an expiry, applies the downgrade
    loyal.loyalty.configure("shop", {**RULES, "expiry": {"warn_days": 3}})
    loyal.loyalty.earn("shop", "alice", "o1", 12000)  # 120 points: silver
    loyal.loyalty.redeem("shop", "alice", 100, "tv", txn_id="r1")  # balance 20
    assert loyal.loyalty.status("shop", "alice").tier == "silver"  # held for a month
    assert loyal.loyalty.review_tiers("shop").downgraded == 0
    clock.advance(timedelta(days=32))
    report = loyal.loyalty.review_tiers("shop")
    assert (report.members, report.downgraded) == (1, 1)
    assert loyal.loyalty.status("shop", "alice").tier == "base"
    assert loyal.loyalty.members("shop", "silver").accounts == []
    assert loyal.loyalty.members("shop", "base").accounts == ["alice"]
    assert loyal.loyalty.review_tiers("shop").downgraded == 0
    assert loyal.loyalty.tier_history("shop", "alice").changes[0].reason == "review"
    assert events[-1].type == "TierChanged"
    assert events[-1].payload["tier"] == "base"


def test_members_are_paged(loyal: Ledger) -> None:
    for i in range(5):
        loyal.accounts.open("shop", f"m{i}")
        loyal.loyalty.earn("shop", f"m{i}", f"order-{i}", 10000)
    seen: list[str] = []
    cursor = None
    while True:
        page = loyal.loyalty.members("shop", "silver", limit=2, cursor=cursor)
        assert len(page.accounts) <= 2
        seen += page.accounts
        cursor = page.cursor
        if cursor is None:
            break
    # membership rows are sharded 16 ways: every member once, shard by shard
    assert sorted(seen) == [f"m{i}" for i in range(5)]
    assert len(seen) == len(set(seen))


def test_redeem_consumes_oldest_lots_and_expiry_is_idempotent(
    loyal: Ledger, clock: ManualClock, events: list[LedgerEvent]
) -> None:
    loyal.loyalty.earn("shop", "alice", "o1", 3000)  # 30, expires day 10
    clock.advance(timedelta(days=4))
    loyal.loyalty.earn("shop", "alice", "o2", 4000)  # 40, expires day 14
    loyal.loyalty.redeem("shop", "alice", 20, "cup", txn_id="r1")
    lots = loyal.loyalty.expiring("shop", "alice", days=30)
    assert [lot.points for lot in lots] == [10, 40]
    assert [lot.order_id for lot in lots] == ["o1", "o2"]
    assert loyal.loyalty.expiring("shop", "alice", days=1) == []

    clock.advance(timedelta(days=4))  # day 8: o1's lot expires within 3 days
    report = loyal.loyalty.expire("shop")
    assert (report.points, report.warned) == (0, 1)
    warning = [e for e in events if e.type == "PointsExpiring"][-1]
    assert warning.payload["points"] == 10

    clock.advance(timedelta(days=3))  # day 11: o1's lot is past its date
    report = loyal.loyalty.expire("shop")
    assert (report.points, report.lots, report.accounts) == (10, 1, 1)
    assert loyal.accounts.balances("shop", "alice")[0].balance == 40
    again = loyal.loyalty.expire("shop")
    assert (again.points, again.lots) == (0, 0)
    assert loyal.transactions.system_balance("shop", "@expiry") == {"points": 10}
    assert [lot.points for lot in loyal.loyalty.expiring("shop", "alice", days=30)] == [40]

    clock.advance(timedelta(days=10))
    assert loyal.loyalty.expire("shop").points == 40
    assert loyal.accounts.balances("shop", "alice")[0].balance == 0
    assert loyal.loyalty.expiring("shop", "alice", days=30) == []
    assert loyal.check.program("shop").ok


def test_points_past_their_date_are_not_spent_before_the_expiry_job_runs(
    loyal: Ledger, clock: ManualClock
) -> None:
    """A redeem (or a status or expiring read) after a lot's date expires it first, as
    the job would: the points past their date are not spent, and the job later
    expires nothing twice."""
    loyal.loyalty.earn("shop", "alice", "o1", 3000)  # 30, expires day 10
    clock.advance(timedelta(days=4))
    loyal.loyalty.earn("shop", "alice", "o2", 4000)  # 40, expires day 14
    clock.advance(timedelta(days=7))  # day 11: o1's lot past its date, no job run
    with pytest.raises(InsufficientFunds, match="alice has 40 available, reward mug needs 50"):
        loyal.loyalty.redeem("shop", "alice", 50, "mug", txn_id="r1")
    r = loyal.loyalty.redeem("shop", "alice", 25, "mug", txn_id="r2")
    assert (r.points, r.balance) == (25, 15)
    assert loyal.transactions.system_balance("shop", "@expiry") == {"points": 30}
    assert [lot.points for lot in loyal.loyalty.expiring("shop", "alice", days=30)] == [15]
    assert loyal.loyalty.expire("shop").points == 0  # o1's lot is not expired twice

    clock.advance(timedelta(days=4))  # day 15: o2's lot past its date
    assert loyal.loyalty.status("shop", "alice").balance == 0
    assert loyal.loyalty.expiring("shop", "alice", days=30) == []
    assert loyal.loyalty.expire("shop").points == 0
    assert loyal.transactions.system_balance("shop", "@expiry") == {"points": 45}
    assert loyal.transactions.system_balance("shop", "@redemption") == {"points": 25}
    assert loyal.check.program("shop").ok


def test_earn_and_redeem_read_no_lot_unless_one_may_be_due(
    loyal: Ledger, clock: ManualClock
) -> None:
    """The head tells whether a lot may be past its date: only then do an earn or
    redeem read the member's lots (and expire them) before planning."""

    def requests(action: Callable[[], object]) -> dict[str, int]:
        loyal.programs.get("shop", fresh=True)  # the program is cached, as in a warm process
        loyal.store.metrics.reset()
        action()
        return {op: s.requests for op, s in loyal.store.metrics.snapshot().items()}

    loyal.loyalty.earn("shop", "alice", "o1", 3000)  # 30, expires day 10
    clock.advance(timedelta(days=4))
    loyal.loyalty.earn("shop", "alice", "o2", 4000)  # 40, expires day 14
    one = {"get": 1, "transact_write": 1}
    assert requests(lambda: loyal.loyalty.redeem("shop", "alice", 5, "mug", txn_id="r1")) == one
    assert requests(lambda: loyal.loyalty.earn("shop", "alice", "o3", 1000)) == one
    clock.advance(timedelta(days=7))  # day 11: o1's lot is past its date
    settled = requests(lambda: loyal.loyalty.redeem("shop", "alice", 5, "mug", txn_id="r2"))
    assert settled["transact_write"] == 2  # the lot's expiry, then the redeem
    assert loyal.transactions.system_balance("shop", "@expiry") == {"points": 25}
    assert requests(lambda: loyal.loyalty.redeem("shop", "alice", 5, "mug", txn_id="r3")) == one


def test_plain_postings_move_a_balance_based_tier(
    loyal: Ledger, clock: ManualClock, events: list[LedgerEvent]
) -> None:
    """Tiers on the balance: a plain credit upgrades at once (index, history, event)
    and a debit that takes the member below starts the after_hold from then."""
    loyal.loyalty.configure("shop", {**RULES, "expiry": {"warn_days": 3}})  # lots never expire
    loyal.accounts.open("shop", "bob")
    loyal.loyalty.earn("shop", "alice", "o1", 5000)  # 50 points: base
    loyal.loyalty.earn("shop", "bob", "o2", 1000)  # 10 points: base
    clock.advance(timedelta(minutes=1))
    credit = loyal.transactions.credit("shop", "alice", "points", 60, txn_id="c1")  # 110
    assert credit.details["tier_changes"] == {"alice": {"previous": "base", "tier": "silver"}}
    assert loyal.loyalty.status("shop", "alice").tier == "silver"
    assert loyal.loyalty.members("shop", "silver").accounts == ["alice"]
    assert loyal.loyalty.members("shop", "base").accounts == ["bob"]
    change = loyal.loyalty.tier_history("shop", "alice").changes[0]
    assert (change.previous, change.tier, change.reason, change.txn_id) == (
        "base",
        "silver",
        "credit",
        "c1",
    )
    assert [(e.account, e.payload["tier"]) for e in events if e.type == "TierChanged"] == [
        ("alice", "silver")
    ]
    image = loyal.store.get(keys.transaction("shop", "c1"))
    assert image is not None
    [tier_event] = [e for e in derive(image) if e.type == "tier.changed"]  # the webhook event
    assert (tier_event.data["tier"], tier_event.data["previous_tier"]) == ("silver", "base")
    assert tier_event.data["changes"] == {"alice": {"previous": "base", "tier": "silver"}}
    assert loyal.transactions.credit("shop", "alice", "points", 60, txn_id="c1").replay
    assert len([e for e in events if e.type == "TierChanged"]) == 1

    clock.advance(timedelta(days=20))
    loyal.transactions.transfer("shop", "alice", "bob", "points", 30, txn_id="t1")  # 80 / 40
    assert loyal.loyalty.status("shop", "alice").tier == "silver"  # held for a month
    clock.advance(timedelta(days=20))  # 40 days after the upgrade, 20 after the transfer
    assert loyal.loyalty.review_tiers("shop").downgraded == 0
    clock.advance(timedelta(days=15))
    assert loyal.loyalty.review_tiers("shop").downgraded == 1
    assert loyal.loyalty.status("shop", "alice").tier == "base"
    assert loyal.check.program("shop").ok


def test_a_plain_credit_counts_no_points_past_their_date_for_the_tier(
    loyal: Ledger, clock: ManualClock
) -> None:
    """Tiers on the balance: points past their date that the expiry job has not
    reached yet count for nothing when a plain credit moves the tier (no upgrade on
    them that the hold would then keep for a month), and a credit that does
    qualify on valid points alone still upgrades."""
    loyal.loyalty.earn("shop", "alice", "o1", 9000)  # 90 points, expiring in 10 days
    clock.advance(timedelta(days=11))
    credit = loyal.transactions.credit("shop", "alice", "points", 20, txn_id="c1")
    assert "tier_changes" not in credit.details
    assert loyal.loyalty.members("shop", "silver").accounts == []
    assert loyal.loyalty.expire("shop").points == 90
    assert loyal.loyalty.status("shop", "alice").tier == "base"

    credit = loyal.transactions.credit("shop", "alice", "points", 80, txn_id="c2")  # 100
    assert credit.details["tier_changes"] == {"alice": {"previous": "base", "tier": "silver"}}
    assert loyal.check.program("shop").ok


def test_an_order_placed_after_a_due_downgrade_earns_at_the_lower_tier(
    loyal: Ledger, clock: ManualClock
) -> None:
    """A member whose hold ran out is in the lower tier by the rule, whether the
    downgrade job ran or not: their next order earns at that tier's multiplier."""
    loyal.loyalty.configure(
        "shop",
        {
            **RULES,
            "qualification": {"window": "rolling", "months": 1},
            "expiry": {"warn_days": 3},
        },
    )
    loyal.loyalty.earn("shop", "alice", "o1", 10000)  # 100 points: silver
    assert loyal.loyalty.status("shop", "alice").tier == "silver"
    clock.advance(timedelta(days=70))  # out of the window, and the month's hold is over
    status = loyal.loyalty.status("shop", "alice")
    assert (status.tier, status.next_tier, status.points_to_next_tier) == ("base", "silver", 100)
    r = loyal.loyalty.earn("shop", "alice", "o2", 1000)
    assert (r.points, r.tier, r.previous_tier) == (10, "base", "silver")
    assert r.transaction.details["multiplier"] == "1"


def test_a_first_earn_is_at_the_base_tier_whatever_the_balance_before(loyal: Ledger) -> None:
    """Points credited before the first earn enrol no one: the first order earns at
    the base tier's multiplier, and that earn puts the member in their tier."""
    loyal.transactions.credit("shop", "alice", "points", 200, txn_id="c1")
    assert loyal.loyalty.status("shop", "alice").tier == "base"
    assert loyal.loyalty.members("shop", "silver").accounts == []
    r = loyal.loyalty.earn("shop", "alice", "o1", 1000)
    assert (r.points, r.tier, r.previous_tier) == (10, "silver", None)


def test_a_used_up_lot_does_not_hold_back_the_expiry_of_later_ones(
    loyal: Ledger, clock: ManualClock
) -> None:
    """Lots keep earning order as expiry order only while an earlier lot has points
    left: once it is used up, a rules change applies to the next lot in full."""
    loyal.loyalty.configure("shop", {**RULES, "expiry": {"warn_days": 3}})  # no expiry
    assert loyal.loyalty.earn("shop", "alice", "o1", 1000).lot_expires == "never"
    loyal.loyalty.earn("shop", "alice", "o2", 1000)  # 10 + 10 points, never expiring
    loyal.loyalty.configure("shop", {**RULES, "expiry": {"days": 10, "warn_days": 3}})
    # a lot with points left still holds the order: the next one never expires either
    assert loyal.loyalty.earn("shop", "alice", "o3", 1000).lot_expires == "never"
    loyal.loyalty.redeem("shop", "alice", 30, "mug", txn_id="r1")  # every lot used up
    r = loyal.loyalty.earn("shop", "alice", "o4", 1000)
    assert r.lot_expires == (clock.now() + timedelta(days=10)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    clock.advance(timedelta(days=11))
    assert loyal.loyalty.expire("shop").points == 10
    assert loyal.loyalty.status("shop", "alice").balance == 0
    assert loyal.check.program("shop").ok


def test_the_downgrade_job_counts_no_points_past_their_date(
    loyal: Ledger, clock: ManualClock
) -> None:
    """Tiers on the balance: the downgrade job, run before the expiry job, expires a
    member's points past their date instead of keeping them in a tier on them."""
    loyal.loyalty.configure("shop", {**RULES, "downgrade": {"rule": "immediate"}})
    loyal.loyalty.earn("shop", "alice", "o1", 10000)  # 100 points: silver, expire day 10
    clock.advance(timedelta(days=11))
    assert loyal.loyalty.review_tiers("shop").downgraded == 1
    assert loyal.loyalty.members("shop", "silver").accounts == []
    assert loyal.loyalty.members("shop", "base").accounts == ["alice"]
    assert loyal.transactions.system_balance("shop", "@expiry") == {"points": 100}
    assert loyal.loyalty.expire("shop").points == 0


def test_expiry_job_warns_about_points_due_later_today(
    loyal: Ledger, clock: ManualClock, events: list[LedgerEvent]
) -> None:
    """A run on the day a lot expires, before its instant, warns about it (it is due
    within warn_days); the days after today are not the only ones warned about."""
    clock.set((clock.now() + timedelta(days=1)).replace(hour=12, minute=0, second=0))
    loyal.loyalty.earn("shop", "alice", "o1", 3000)  # 30 points, expire in 10 days at 12:00
    clock.advance(timedelta(days=10) - timedelta(hours=1))
    report = loyal.loyalty.expire("shop")
    assert (report.points, report.warned) == (0, 1)
    warning = [e for e in events if e.type == "PointsExpiring"]
    assert [w.payload["points"] for w in warning] == [30]
    assert loyal.loyalty.expire("shop").warned == 1  # the same points: raised once
    assert [n.type for n in loyal.notifications.list("shop", "alice")] == ["PointsExpiring"]
    assert len(loyal.notifications.history("shop", "alice").notifications) == 1


def test_expiry_lowers_a_balance_based_tier_by_rule(loyal: Ledger, clock: ManualClock) -> None:
    loyal.loyalty.configure("shop", {**RULES, "downgrade": {"rule": "immediate"}})
    loyal.loyalty.earn("shop", "alice", "o1", 15000)
    assert loyal.loyalty.status("shop", "alice").tier == "silver"
    clock.advance(timedelta(days=11))
    loyal.loyalty.expire("shop")
    status = loyal.loyalty.status("shop", "alice")
    assert (status.tier, status.balance) == ("base", 0)
    assert loyal.loyalty.tier_history("shop", "alice").changes[0].reason == "expiry"


def test_expiry_reads_only_the_days_since_the_last_run(loyal: Ledger, clock: ManualClock) -> None:
    assert loyal.loyalty.expire("shop").days == 1  # today: the checkpoint is set at configure
    clock.advance(timedelta(days=3))
    steps: list[tuple[int, int]] = []
    assert loyal.loyalty.expire("shop", progress=lambda d, t: steps.append((d, t))).days == 4
    # the CLI's progress bar: one step per day read (4) and per warning day ahead
    warn_days = loyal.loyalty.config("shop").expiry.warn_days
    assert steps == [(i, 4 + warn_days) for i in range(1, 5 + warn_days)]
    assert loyal.loyalty.expire("shop").days == 1


def test_concurrent_earns_and_redeems_on_one_account(loyal: Ledger, engine: str) -> None:
    per_thread = 3 if engine == "dynamodb" else 6
    loyal.loyalty.earn("shop", "alice", "seed", 10000)

    def work(t: int) -> int:
        earned = 0
        for i in range(per_thread):
            earned += loyal.loyalty.earn("shop", "alice", f"o-{t}-{i}", 1000).points
            loyal.loyalty.redeem("shop", "alice", 5, "sticker", txn_id=f"r-{t}-{i}")
        return earned

    with ThreadPoolExecutor(4) as pool:
        earned = sum(pool.map(work, range(4)))
    expected = 100 + earned - 4 * per_thread * 5
    assert earned >= 4 * per_thread * 10
    assert loyal.accounts.balances("shop", "alice")[0].balance == expected
    live = loyal.loyalty.expiring("shop", "alice", days=30, limit=1000)
    assert sum(lot.points for lot in live) == expected
    assert loyal.check.program("shop").ok


def test_an_earn_beyond_the_largest_amount_names_the_points(ledger: Ledger) -> None:
    # an order of 10^15 (the largest amount) earning 10^18 points was refused
    # with "amount exceeds the maximum": the amount given was within it
    ledger.loyalty.configure("shop", {"earn": {"points_per_unit": 1000, "unit_size": 1}})
    ledger.accounts.open("shop", "alice")
    with pytest.raises(ValidationError, match=r"order o-1 would earn \d+ points, more than"):
        ledger.loyalty.earn("shop", "alice", "o-1", 10**15)
    assert ledger.accounts.get("shop", "alice").fund("points").balance == 0
    assert ledger.loyalty.earn("shop", "alice", "o-1", 10**12).points == 10**15


def test_expiring_points_never_exceed_what_the_member_has_left(
    loyal: Ledger, clock: ManualClock, events: list[LedgerEvent]
) -> None:
    """Points debited outside loyalty leave the lots as they were: the expiring
    query and the warning report what the job will expire, at most the balance."""
    loyal.loyalty.earn("shop", "alice", "o1", 3000)  # 30, expires day 10
    loyal.loyalty.earn("shop", "alice", "o2", 4000)  # 40, expires day 10
    loyal.transactions.debit("shop", "alice", "points", 50, txn_id="d1")
    page = loyal.loyalty.expiring_page("shop", "alice", days=30)
    assert ([lot.points for lot in page.lots], page.points) == ([20], 20)
    clock.advance(timedelta(days=8))  # within the 3-day warning
    assert loyal.loyalty.expire("shop").warned == 1
    warning = [e for e in events if e.type == "PointsExpiring"][-1]
    assert (warning.payload["points"], warning.payload["lots"]) == (20, 1)
    clock.advance(timedelta(days=3))
    assert loyal.loyalty.expire("shop").points == 20
    assert loyal.accounts.balances("shop", "alice")[0].balance == 0


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_the_warning_counts_every_lot_the_expiring_query_does(
    loyal: Ledger, clock: ManualClock, events: list[LedgerEvent]
) -> None:
    """The PointsExpiring warning read at most 100 lots where the expiring query
    (and the job) take every lot: with 120 lots due it warned of 100 of them."""
    for i in range(120):
        loyal.loyalty.earn("shop", "alice", f"o{i}", 100)  # 1 point each (2 at silver)
    clock.advance(timedelta(days=8))  # within the 3-day warning
    assert loyal.loyalty.expire("shop").warned == 1
    warning = [e for e in events if e.type == "PointsExpiring"][-1]
    page = loyal.loyalty.expiring_page("shop", "alice")
    assert page.points == 140  # 100 at 1, then 20 at silver's 2
    assert (warning.payload["points"], warning.payload["lots"]) == (140, 120)


@pytest.mark.parametrize("engine", ["sqlite", "dynamodb"])
def test_an_order_dated_more_than_a_day_ahead_is_refused(loyal: Ledger, clock: ManualClock) -> None:
    """An earn's ``at`` picks the campaigns: a date far ahead (a clock or unit error)
    earned the bonus of a campaign that had not started; it is now refused, as a
    billing record dated more than a day ahead is, and nothing is written."""
    start = clock.now() + timedelta(days=30)
    campaign = {
        "id": "later",
        "starts": start.isoformat(),
        "ends": (start + timedelta(days=5)).isoformat(),
        "bonus": 50,
    }
    loyal.loyalty.configure("shop", {**RULES, "campaigns": [campaign]})
    with pytest.raises(ValidationError, match="more than a day ahead"):
        loyal.loyalty.earn("shop", "alice", "o1", 1000, at=start + timedelta(days=1))
    with pytest.raises(NotFound):
        loyal.loyalty.order("shop", "o1")
    assert loyal.loyalty.status("shop", "alice").balance == 0
    soon = loyal.loyalty.earn("shop", "alice", "o2", 1000, at=clock.now() + timedelta(hours=23))
    assert soon.points == 10  # within a day: clock skew between hosts


def test_a_multiplier_is_kept_as_written_whatever_its_digits(ledger: Ledger) -> None:
    """Past 28 significant digits a multiplier was stored rounded (decimal arithmetic's
    default precision), so the rules read back and earned by another number."""
    long = "1.00000000000000000000000000000001"  # 33 significant digits
    tiers = [{"name": "base", "threshold": 0, "multiplier": long}]
    stored = ledger.loyalty.configure("shop", {"tiers": tiers, "earn": {"rounding": "up"}})
    assert stored.to_settings()["tiers"][0]["multiplier"] == long
    assert ledger.loyalty.config("shop").to_settings()["tiers"][0]["multiplier"] == long
    ledger.accounts.open("shop", "alice")
    # 100 points x 1.00000000000000000000000000000001, rounded up: 101 (rounded to 28
    # digits, the multiplier was 1 and the order earned 100)
    assert ledger.loyalty.earn("shop", "alice", "o1", 10000).points == 101


def test_an_earns_multiplier_reads_as_a_decimal_as_in_the_rules(ledger: Ledger) -> None:
    """An earn's `multiplier` detail was the fraction's text (`15/8`), not a decimal."""
    rules = {
        "tiers": [{"name": "base", "threshold": 0, "multiplier": "1.5"}],
        "campaigns": [
            {"id": "c", "starts": "2020-01-01", "ends": "2100-01-01", "multiplier": "1.25"}
        ],
    }
    ledger.loyalty.configure("shop", rules)
    ledger.accounts.open("shop", "alice")
    r = ledger.loyalty.earn("shop", "alice", "o1", 10000)
    assert (r.points, r.transaction.details["multiplier"]) == (187, "1.875")
    assert ledger.loyalty.order("shop", "o1").transaction.details["multiplier"] == "1.875"


@pytest.mark.parametrize("fund", ["bonus", "store_credit", "cash"])
def test_points_cannot_live_in_a_wallet_fund(ledger: Ledger, fund: str) -> None:
    """With `fund = "bonus"` every earn left a bonus balance no grant backs (`tallybook
    check`: invariant 2), which the wallet neither showed nor spent."""
    with pytest.raises(ConfigError, match=f"fund: {fund} is a wallet fund"):
        ledger.loyalty.configure("shop", {"fund": fund})
    with pytest.raises(NotFound):
        ledger.loyalty.config("shop")


def test_the_expiry_report_counts_the_accounts_it_expired(
    loyal: Ledger, clock: ManualClock
) -> None:
    """A re-run the same day (or a run after a read had expired the lots) read the
    account again and reported it: "expired 0 points in 0 lots of 1 accounts"."""
    loyal.accounts.open("shop", "bob")
    loyal.loyalty.earn("shop", "alice", "o1", 3000)
    loyal.loyalty.earn("shop", "bob", "o2", 4000)
    clock.advance(timedelta(days=10))  # both lots expire now, today
    assert loyal.loyalty.status("shop", "bob").balance == 0  # bob's lot expires first
    report = loyal.loyalty.expire("shop")
    assert (report.points, report.lots, report.accounts) == (30, 1, 1)
    again = loyal.loyalty.expire("shop")
    assert (again.points, again.lots, again.accounts) == (0, 0, 0)


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            {"tiers": [{"name": "b", "threshold": 0}, {"name": "s", "threshold": 10**5000}]},
            "tiers[1].threshold must have at most 38 digits",
        ),
        ({"earn": {"unit_size": 10**38}}, "earn.unit_size must have at most 38 digits"),
        (
            {"tiers": [{"name": "b", "threshold": 0, "multiplier": 10**5000}]},
            "tiers[0].multiplier must be at most 1000",
        ),
    ],
)
def test_a_huge_integer_in_the_rules_is_a_config_error(
    ledger: Ledger, rules: dict[str, Any], message: str
) -> None:
    """An integer of over 4300 digits raised a bare ValueError (no text for it)."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        ledger.loyalty.configure("shop", rules)


def test_rules_stored_before_the_places_limit_still_read(ledger: Ledger) -> None:
    """The limit of 40 places on a multiplier was applied to the rules a program
    already holds: a tier multiplier of 46 places (stored before the limit) made every
    earn, status and `config show` of the program a ConfigError."""
    tiny = "0.0000000000000000000000000000000000000000000015"  # 1.5e-45, as once stored
    ledger.loyalty.configure("shop", {})
    stored = ledger.programs.get("shop").settings["loyalty"]
    tiers = [
        {"name": "base", "threshold": 0, "multiplier": "1"},
        {"name": "far", "threshold": 10**30, "multiplier": tiny},
    ]
    ledger.programs.update_settings("shop", {"loyalty": {**stored, "tiers": tiers}})
    assert ledger.loyalty.config("shop").to_settings()["tiers"] == tiers
    ledger.accounts.open("shop", "alice")
    assert ledger.loyalty.earn("shop", "alice", "o1", 1000).points == 10
    with pytest.raises(ConfigError, match="at most 40 digits after the decimal point"):
        ledger.loyalty.configure("shop", {**stored, "tiers": tiers})  # new rules: refused
