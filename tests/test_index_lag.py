"""Every reader that uses an index, over :class:`LaggingStore` (indexes behind the table).

DynamoDB's GSIs are eventually consistent; SQLite and DynamoDB Local are not,
so these tests make the lag happen. Each reader is either correct under lag
(it reads by key or from the table, or checks what the index names against
the table) or misses only what it may, as its docstring and
docs/table-design.md ("Index lag") say.
"""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from billing.helpers import aligned_start
from tallybook.ledger import Ledger
from tallybook.reliability.checker import check_program
from tallybook.services.clock import ManualClock
from tallybook.store.lagging import LaggingStore
from tallybook.store.port import ItemStore

LOYALTY = Path(__file__).resolve().parents[1] / "examples" / "loyalty.toml"


@pytest.fixture
def lagging(store: ItemStore) -> LaggingStore:
    return LaggingStore(store)


@pytest.fixture
def lagged(lagging: LaggingStore, clock: ManualClock) -> Ledger:
    led = Ledger(lagging, clock=clock)
    led.programs.create("shop")
    with LOYALTY.open("rb") as fh:
        led.loyalty.configure("shop", tomllib.load(fh))
    led.accounts.open("shop", "alice")
    return led


def test_order_lookup_reads_the_earn_by_key(lagged: Ledger, lagging: LaggingStore) -> None:
    lagged.loyalty.earn("shop", "alice", "o-1", 12_000)
    assert lagging.pending  # the order index has not caught up
    assert lagged.loyalty.order("shop", "o-1").account == "alice"
    assert [t.id for t in lagged.transactions.for_order("shop", "o-1")] == ["order:o-1"]


def test_tier_members_come_from_the_table(lagged: Ledger, lagging: LaggingStore) -> None:
    lagged.loyalty.earn("shop", "alice", "o-1", 200_000)  # enough for a higher tier
    tier = lagged.loyalty.status("shop", "alice").tier
    assert lagging.pending
    assert lagged.loyalty.members("shop", tier).accounts == ["alice"]


def test_due_holds_missed_under_lag_are_expired_once_it_catches_up(
    lagged: Ledger, lagging: LaggingStore, clock: ManualClock
) -> None:
    lagged.wallet.credit("shop", "alice", "cash", 1_000, txn_id="c-1")
    lagged.wallet.authorize("shop", "alice", 400, hold_id="h-1", expires_in=60)
    lagged.wallet.authorize("shop", "alice", 300, hold_id="h-2", expires_in=60)
    lagging.flush()
    lagged.wallet.void("shop", "h-2")  # its due row is gone from the table, not the index yet
    lagged.wallet.authorize("shop", "alice", 200, hold_id="h-3", expires_in=60)
    clock.advance(timedelta(minutes=5))
    lagged.wallet.expire_holds("shop")  # sees h-1 and the stale h-2, not h-3 yet
    assert str(lagged.wallet.hold("shop", "h-2").status) == "voided"
    lagging.flush()
    lagged.wallet.expire_holds("shop")
    assert {str(lagged.wallet.hold("shop", h).status) for h in ("h-1", "h-3")} == {"expired"}
    assert lagged.wallet.check("shop", "alice") == []
    assert lagged.check.program("shop").ok


@pytest.mark.slow  # the expiry job walks 800 days of the index
def test_lots_by_expiry_day_under_lag(
    lagged: Ledger, lagging: LaggingStore, clock: ManualClock
) -> None:
    lagged.loyalty.earn("shop", "alice", "o-1", 10_000)
    lagging.flush()
    clock.advance(timedelta(days=800))
    lagged.loyalty.expire("shop")
    expired = lagged.accounts.get("shop", "alice")
    lagged.loyalty.expire("shop")  # the expired lot's index entry still shows: nothing twice
    assert lagged.accounts.get("shop", "alice") == expired
    assert lagged.check.program("shop").ok


def test_rewards_report_rerun_after_the_index_caught_up(
    lagged: Ledger, lagging: LaggingStore, clock: ManualClock, tmp_path: Path
) -> None:
    from tallybook.services.billing.sinks import DirectorySink

    t0 = aligned_start(clock)
    lagged.billing.configure("shop", grace_minutes=1, start=t0)
    clock.advance(timedelta(minutes=3))
    lagged.loyalty.earn("shop", "alice", "o-1", 10_000, metadata={"partner": "acme"})
    clock.advance(timedelta(hours=2))
    lagging.flush()
    first = lagged.billing.reports.run("shop", sink=DirectorySink(tmp_path / "a"), interval="1h")
    rewards = [r for r in first if r.kind == "rewards"]
    assert rewards
    assert sum(r.rows for r in rewards) >= 1


def test_the_checker_finds_records_without_the_owner_index(
    lagged: Ledger, lagging: LaggingStore
) -> None:
    lagged.wallet.credit("shop", "alice", "cash", 1_000, txn_id="c-1")
    lagged.wallet.authorize("shop", "alice", 400, hold_id="h-1")
    lagged.wallet.authorize("shop", "alice", 100, hold_id="h-2")
    lagged.wallet.void("shop", "h-2")
    assert lagging.pending
    under_lag = check_program(lagged, "shop")
    lagging.flush()
    caught_up = check_program(lagged, "shop")
    assert under_lag.violations == caught_up.violations == []
    assert under_lag.counts["records"] == caught_up.counts["records"] >= 4


def test_an_owner_s_transactions_list_postings_at_once_and_holds_after_the_lag(
    lagged: Ledger, lagging: LaggingStore, clock: ManualClock
) -> None:
    """docs/wallet.md: the list merges the owner's history entries (its own partition,
    strongly consistent) with the owner index, which only lists records that leave no
    entry (an authorisation, a void) and may show them a moment late."""
    lagged.wallet.credit("shop", "alice", "cash", 1_000, txn_id="c-1")
    clock.advance(timedelta(seconds=1))
    lagged.wallet.authorize("shop", "alice", 400, hold_id="h-1")
    clock.advance(timedelta(seconds=1))
    lagged.wallet.capture("shop", "h-1", 100)
    clock.advance(timedelta(seconds=1))
    lagged.transactions.credit("shop", "alice", "points", 5, txn_id="p-1")
    assert lagging.pending
    listed = [t.id for t in lagged.wallet.transactions("shop", "alice").transactions]
    assert listed == ["p-1", "h-1:capture", "c-1"]
    lagging.flush()
    listed = [t.id for t in lagged.wallet.transactions("shop", "alice").transactions]
    assert listed == ["p-1", "h-1:capture", "h-1", "c-1"]
