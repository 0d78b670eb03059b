"""Storage layout 2 for loyalty: lots ride on their earns' entries, tier
membership is a row per member, and data of the older layout is refused with a
clear message instead of being misread."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tallybook.errors import ConfigError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.records.codec import LAYOUT

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

RULES: dict[str, Any] = {
    "tiers": [{"name": "base", "threshold": 0}, {"name": "silver", "threshold": 100}],
    "expiry": {"days": 10, "warn_days": 3},
}


def _as_layout_1(ledger: Ledger, program: str) -> None:
    """Rewrite the program item as tallybook 0.1 wrote it (no layout attribute)."""
    item = ledger.store.get(keys.program(program))
    assert item is not None
    assert item["layout"] == LAYOUT
    del item["layout"]
    ledger.store.put(item)
    assert ledger.programs.get(program, fresh=True).layout == 1


def test_an_earn_writes_three_items_and_no_lot_of_its_own(ledger: Ledger) -> None:
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "alice")
    ledger.loyalty.earn("shop", "alice", "o-1", 20_000)  # 200 points: silver
    partition = keys.account_partition("shop", "alice")
    sort_keys = [str(i["sk"]) for i in ledger.store.query_all(partition)]
    assert not [sk for sk in sort_keys if sk.startswith("L#")]
    [entry] = [i for i in ledger.store.query_all(partition) if str(i["sk"]).startswith("E#")]
    assert (entry["cum_end"], entry["lot_amount"]) == (200, 200)
    head = ledger.store.get(keys.account_head("shop", "alice"))
    assert head is not None
    assert "gsi1pk" not in head  # no index entry rewritten per posting
    assert ledger.loyalty.members("shop", "silver").accounts == ["alice"]


def test_lots_are_read_from_live_from_and_expire_without_deletes(
    ledger: Ledger, clock: ManualClock
) -> None:
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "alice")
    for i in range(3):
        ledger.loyalty.earn("shop", "alice", f"o-{i}", 1_000)  # 10 points each
        clock.advance(timedelta(days=1))
    ledger.loyalty.redeem("shop", "alice", 15, "mug", txn_id="r-1")
    assert [lot.points for lot in ledger.loyalty.expiring("shop", "alice", days=30)] == [5, 10]
    clock.advance(timedelta(days=8))  # the first two lots are past their date
    report = ledger.loyalty.expire("shop")
    assert (report.points, report.lots, report.transactions) == (5, 1, 1)
    assert [lot.points for lot in ledger.loyalty.expiring("shop", "alice", days=30)] == [10]
    assert ledger.loyalty.status("shop", "alice").balance == 10
    assert ledger.loyalty.expire("shop").transactions == 0  # nothing left to expire
    clock.advance(timedelta(days=5))
    assert ledger.loyalty.expire("shop").points == 10
    assert ledger.loyalty.expiring("shop", "alice", days=30) == []
    # a member whose lots are all used up starts a new run of lots
    ledger.loyalty.earn("shop", "alice", "o-9", 700)
    assert [lot.points for lot in ledger.loyalty.expiring("shop", "alice", days=30)] == [7]
    assert ledger.check.program("shop").ok


def test_loyalty_data_of_layout_1_is_refused_with_what_to_do(ledger: Ledger) -> None:
    ledger.loyalty.configure("shop", RULES)
    ledger.accounts.open("shop", "alice")
    _as_layout_1(ledger, "shop")
    with pytest.raises(ConfigError, match=r"storage layout 1 .*Layout versions"):
        ledger.loyalty.earn("shop", "alice", "o-1", 1_000)
    with pytest.raises(ConfigError, match="storage layout 1"):
        ledger.loyalty.configure("shop", RULES)
    # the ledger itself reads and writes layout 1 as before
    ledger.transactions.credit("shop", "alice", "cash", 5, txn_id="c-1")


def test_a_layout_1_program_without_loyalty_starts_it_in_the_current_layout(
    ledger: Ledger,
) -> None:
    _as_layout_1(ledger, "shop")
    ledger.loyalty.configure("shop", RULES)
    assert ledger.programs.get("shop", fresh=True).layout == LAYOUT
    ledger.accounts.open("shop", "bob")
    assert ledger.loyalty.earn("shop", "bob", "o-1", 1_000).points == 10
