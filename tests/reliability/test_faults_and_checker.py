"""The fault wrapper does what it says, and the checker finds injected corruption."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from tallybook.errors import StoreUnavailable, Throttled, TransactionConflict
from tallybook.ledger import Ledger
from tallybook.reliability.api import Ambiguous, Op, PythonApi
from tallybook.reliability.checker import check_program
from tallybook.reliability.faults import Crash, CrashMode, FaultPlan, FaultyStore
from tallybook.reliability.workload import TOKENS, Workload, setup
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.port import ItemStore, Key, SortCondition

ITEM = {"pk": "FAULT#1", "sk": "X", "n": 1}
KEY = Key("FAULT#1", "X")


def test_error_after_applies_the_write_error_before_does_not(store: ItemStore) -> None:
    after = FaultyStore(store, FaultPlan(error_after=1.0))
    with pytest.raises(StoreUnavailable):
        after.put(ITEM)
    assert store.get(KEY) == ITEM
    store.delete(KEY)
    before = FaultyStore(store, FaultPlan(error_before=1.0))
    with pytest.raises(StoreUnavailable):
        before.put(ITEM)
    conflict = FaultyStore(store, FaultPlan(conflict=1.0))
    with pytest.raises(TransactionConflict):
        conflict.put(ITEM)
    assert store.get(KEY) is None
    assert (after.counts["error_after"], before.counts["error_before"]) == (1, 1)
    assert conflict.counts["conflict"] == 1


def _get_put_put(store: ItemStore, other: dict[str, Any]) -> None:
    store.get(KEY)
    store.put(ITEM)
    store.put(other)


def test_a_crash_counts_every_call_before_and_writes_only_after_or_without_reads(
    store: ItemStore,
) -> None:
    """Over a get, a put and a put, ``crash_at(2)`` dies before the second call (the
    first put); ``"after"`` and ``reads=False`` count writes only, so they reach the
    second put."""
    other = {**ITEM, "sk": "Y"}
    cases: list[tuple[CrashMode, bool, bool]] = [
        ("before", True, False),  # dies before the first put: nothing written
        ("before", False, True),  # dies before the second put: the first applied
        ("after", True, True),  # dies after the second put: both applied
    ]
    for mode, reads, first_applied in cases:
        faulty = FaultyStore(store)
        faulty.crash_at(2, mode, reads=reads)
        with pytest.raises(Crash):
            _get_put_put(faulty, other)
        assert (store.get(KEY) is not None) is first_applied, (mode, reads)
        assert (store.get(Key("FAULT#1", "Y")) is not None) is (mode == "after"), (mode, reads)
        store.delete(KEY)
        store.delete(Key("FAULT#1", "Y"))


def test_throttling_comes_in_bursts_and_disarming_stops_faults(store: ItemStore) -> None:
    faulty = FaultyStore(store, FaultPlan(throttle=1.0, throttle_burst=2, seed=3))
    for _ in range(2):
        with pytest.raises(Throttled):
            faulty.get(KEY)
    faulty.armed = False
    assert faulty.get(KEY) is None
    faulty.put(ITEM)
    assert faulty.counts["throttle"] == 2
    assert store.get(KEY) == ITEM


def test_a_lost_response_is_retried_into_a_replay(store: ItemStore) -> None:
    """The client's rule: ambiguous -> same key again; the second answer is a replay."""
    raw = Ledger(store)
    setup(raw, Workload("p", accounts=2))
    faulty = FaultyStore(store, FaultPlan(error_after=1.0))
    api = PythonApi(Ledger(faulty), "p")
    op = Op("transfer", "t-1", "acct-000", other="acct-001", fund=TOKENS, amount=7)
    with pytest.raises(Ambiguous):
        api.call(op)
    faulty.armed = False
    assert api.call(op) is True
    history = raw.accounts.history("p", "acct-001", TOKENS, limit=10).entries
    assert [e.amount for e in history] == [7, 1000]
    assert check_program(raw, "p", acked=["t-1"]).violations == []


def _head(store: ItemStore, account: str) -> dict[str, Any]:
    item = store.get(keys.account_head("p", account))
    assert item is not None
    return cast(dict[str, Any], item)


def test_checker_finds_each_kind_of_corruption(store: ItemStore) -> None:
    ledger = Ledger(store)
    setup(ledger, Workload("p", accounts=3))
    api = PythonApi(ledger, "p")
    api.call(Op("transfer", "t-1", "acct-000", other="acct-001", fund=TOKENS, amount=5))
    api.call(Op("hold", "h-1", "acct-002", amount=10))
    api.call(Op("notify", None, "acct-002", other="Promo", amount=1, ref="n-1"))
    assert check_program(ledger, "p", acked=["t-1", "h-1"]).violations == []

    # invariant 2: the head withholds more than the active holds
    head = _head(store, "acct-002")
    head["funds"]["cash"]["held"] += 3
    store.put(head)
    # invariant 4: half of a transfer (the destination's entry) is missing
    entry = next(
        ledger.store.query_all(
            keys.account_partition("p", "acct-001"),
            SortCondition.begins_with(keys.entry_prefix(TOKENS)),
            forward=False,
        )
    )
    store.delete(Key(cast(str, entry["pk"]), cast(str, entry["sk"])))
    # invariant 6: a second notification of one type marked active
    row = next(
        store.query_all(
            keys.account_partition("p", "acct-002"),
            SortCondition.begins_with(keys.NOTIFICATION_HISTORY_PREFIX),
        )
    )
    store.put({**row, "sk": cast(str, row["sk"]) + "x", "id": "forged"})

    found = check_program(ledger, "p", acked=["t-1", "lost-1"], rejected=["h-1"]).violations
    text = "\n".join(found)
    assert "invariant 2: acct-002/cash: head withholds" in text
    assert "invariant 4: transaction t-1 leg ('acct-001', 'tokens', 2)" in text
    assert "invariant 6: acct-002 has 2 active Promo notifications" in text
    assert "invariant 3: acknowledged transaction lost-1 has no record" in text
    assert "invariant 3: rejected transaction h-1 has a record" in text


def test_checker_counts_an_expired_notification_as_no_longer_active(store: ItemStore) -> None:
    """A newcomer does not mark an expired notification of its type dismissed (its
    history row stays 'active' past its expires_at): only one is active."""
    clock = ManualClock(datetime.now(UTC))
    ledger = Ledger(store, clock=clock)
    ledger.programs.create("p")
    ledger.accounts.open("p", "a")
    ledger.notifications.add(
        "p", "a", "Promo", {"n": 1}, expires_at=clock.now() + timedelta(minutes=1)
    )
    clock.advance(timedelta(minutes=2))
    newcomer = ledger.notifications.add("p", "a", "Promo", {"n": 2})
    assert [n.id for n in ledger.notifications.list("p", "a")] == [newcomer.id]
    assert check_program(ledger, "p").violations == []
