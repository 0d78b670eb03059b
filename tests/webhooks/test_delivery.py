"""Webhooks end to end on both engines, against a real receiver on 127.0.0.1.

On SQLite the changes events come from are logged with them (the worker derives
the events); on DynamoDB (Local) the worker reads them from the table's stream,
so these tests exercise that path.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.records.webhook_changes import pending_changes, position
from tallybook.store.records.webhook_events import event_item
from tallybook.webhooks.delivery import RetryPolicy
from tallybook.webhooks.worker import DeliveryWorker

from .receiver import Receiver, running_receiver
from .workload import key_of, run

FAST = RetryPolicy(base_seconds=0.01, cap_seconds=0.05, timeout_seconds=5.0)
#: operations of the mixed workload: 1,000 on every engine, as the issue asks.
#: On DynamoDB Local every write is read back from its stream: 25-49 s on a fresh
#: instance here (70 s with the 2-core machine at load 8), with fan-out and
#: delivery records batched; TALLYBOOK_TEST_WEBHOOK_OPS lowers it for a quick run
DYNAMODB_OPS = int(os.environ.get("TALLYBOOK_TEST_WEBHOOK_OPS", "1000"))


def drain(worker: DeliveryWorker, receiver: Receiver, want: int, passes: int = 500) -> None:
    """Run passes until the receiver has ``want`` distinct ids and the queues are empty."""
    for _ in range(passes):
        stats = worker.run_once()
        if len(receiver.ids()) >= want and not (stats.waiting or stats.failed):
            return
    raise AssertionError(f"only {len(receiver.ids())} of {want} events arrived")


def first_receipts(receiver: Receiver) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for msg_id, body in receiver.accepted:
        if msg_id not in seen:
            seen.add(msg_id)
            out.append(body)
    return out


def assert_per_account_order(bodies: list[dict[str, Any]]) -> None:
    """Each account's changes arrive as numbered, 1, 2, 3, ... without a gap (the
    events of one change together), and each (account, fund)'s entry numbers in
    increasing order."""
    changes: dict[str, tuple[int, str]] = {}
    for body in bodies:
        txn = body["data"].get("txn_id")
        for account, n in (body["data"].get("account_seq") or {}).items():
            before, before_txn = changes.get(account, (0, ""))
            if n == before:
                assert txn == before_txn, f"{account}: change {n} is {before_txn} and {txn}"
            else:
                assert n == before + 1, f"{account}: change {n} after {before}"
            changes[account] = (n, txn)
    assert changes or not any(b["type"] == "transaction.posted" for b in bodies)
    last: dict[tuple[str, str], int] = defaultdict(int)
    for body in bodies:
        if body["type"] != "transaction.posted":
            continue
        for leg in body["data"]["legs"]:
            if "seq" not in leg:
                continue
            k = (leg["account"], leg["fund"])
            assert leg["seq"] > last[k], f"{k}: entry {leg['seq']} after {last[k]}"
            last[k] = leg["seq"]


@pytest.mark.slow
def test_a_mixed_workload_is_delivered_signed_once_per_event(ledger: Ledger, engine: str) -> None:
    ops = DYNAMODB_OPS if engine == "dynamodb" else 1000
    with running_receiver() as receiver:
        sub = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = sub.secret
        expected = run(ledger, ops)
        worker = ledger.webhooks.worker(policy=FAST)
        drain(worker, receiver, len(expected.events))
        bodies = first_receipts(receiver)
    assert receiver.rejected_signatures == 0
    got = Counter(key_of(b) for b in bodies)
    assert got == expected.events
    assert expected.replays > ops // 20  # replayed postings emitted nothing more
    assert_per_account_order(bodies)
    deliveries, _ = ledger.webhooks.deliveries("shop", sub.subscription.id, limit=200)
    assert {d.status for d in deliveries} == {"delivered"}
    assert all(d.last_code == 204 and d.log for d in deliveries)


@pytest.mark.slow
def test_a_failing_receiver_is_retried_in_order_per_account(ledger: Ledger) -> None:
    with running_receiver() as receiver:
        sub = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = sub.secret
        expected = run(ledger, 120, seed=3)
        receiver.fail_count = 40
        worker = ledger.webhooks.worker(policy=FAST)
        drain(worker, receiver, len(expected.events))
        bodies = first_receipts(receiver)
    assert receiver.failed_answers == 40
    assert Counter(key_of(b) for b in bodies) == expected.events
    assert_per_account_order(bodies)
    failed = [
        d
        for d in ledger.webhooks.deliveries("shop", sub.subscription.id, limit=200)[0]
        if d.attempts > 1
    ]
    assert failed
    assert all(d.log[-1]["code"] == 500 for d in failed)


def test_events_come_from_the_ledgers_record(ledger: Ledger, engine: str) -> None:
    """SQLite logs the change events come from with the posting (its events are
    derived by the worker); DynamoDB adds no write to it (the worker reads the
    stream); a replay writes nothing anywhere."""
    ledger.accounts.open("shop", "alice")
    before = ledger.store.metrics.stat("transact_write").requests
    txn = ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t1")
    assert ledger.store.metrics.stat("transact_write").requests == before + 1
    from tallybook.domain.event_types import TRANSACTION_POSTED, event_id

    eid = event_id(f"TXN#shop#{txn.id}", "TXN", TRANSACTION_POSTED)
    changes = pending_changes(ledger.store, "shop", limit=10)
    assert [c.key.pk for c in changes] == (["EVCHG#shop"] if engine != "dynamodb" else [])
    assert ledger.store.get(keys.event("shop", eid)) is None
    ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t1")
    assert len(pending_changes(ledger.store, "shop", limit=10)) == len(changes)
    ledger.webhooks.worker(policy=FAST).run_once()
    logged = ledger.store.get(keys.event("shop", eid))
    assert logged is not None
    assert logged["type"] == TRANSACTION_POSTED
    assert pending_changes(ledger.store, "shop", limit=10) == []


def test_events_an_older_version_left_pending_are_fanned_out(ledger: Ledger, engine: str) -> None:
    """Events written with their changes by a version before the change log (in
    the pending index) are still fanned out, once."""
    if engine == "dynamodb":
        pytest.skip("DynamoDB's events come from its stream")
    from tallybook.webhooks.events import derive

    with running_receiver() as receiver:
        receiver.secret = ledger.webhooks.create("shop", receiver.url, allow_http=True).secret
        ledger.accounts.open("shop", "alice")
        ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t1")
        ledger.webhooks.worker(policy=FAST).run_once()
        image = ledger.store.get(keys.transaction("shop", "t1"))
        assert image is not None
        old = replace(derive(image)[0], id="evt_" + "0" * 32)
        ledger.store.put(event_item(old, position(1, 0), 2**40, pending=True))
        worker = ledger.webhooks.worker(policy=FAST)
        worker.run_once()
        worker.run_once()
        assert [i for i, _ in receiver.accepted].count(old.id) == 1
        assert ledger.store.query(keys.events_pending("shop"), index="gsi1").items == []


def test_a_held_credit_is_posted_then_its_release_is_a_hold_expired_event(
    ledger: Ledger, clock: ManualClock
) -> None:
    with running_receiver() as receiver:
        receiver.secret = ledger.webhooks.create("shop", receiver.url, allow_http=True).secret
        ledger.accounts.open("shop", "seller")
        release_at = clock.now() + timedelta(days=1)
        ledger.wallet.credit_held("shop", "seller", "cash", 900, release_at=release_at, txn_id="s1")
        clock.advance(timedelta(days=2))
        assert ledger.wallet.expire_holds("shop").released_credits == [("seller", "s1")]
        ledger.wallet.expire_holds("shop")  # again: nothing more to release, no event
        drain(ledger.webhooks.worker(policy=FAST), receiver, 2)
        bodies = first_receipts(receiver)
    assert [(b["type"], b["data"]["txn_id"]) for b in bodies] == [
        ("transaction.posted", "s1"),
        ("hold.expired", "s1:release"),
    ]
    posted, released = (b["data"] for b in bodies)
    assert posted["details"]["hold_id"] == "s1"
    assert posted["details"]["held"] == {"cash": 900}
    assert released["txn_type"] == "release"
    assert released["hold_id"] == "s1"
    assert released["released"] == {"cash": 900}
    assert released["account"] == "seller"
    assert bodies[1]["accounts"] == ["seller"]


def test_events_are_delivered_on_a_ledger_clock_past_their_retention(
    ledger: Ledger, clock: ManualClock
) -> None:
    """The store reads TTLs on the ledger's clock: the event log's retention is
    counted on it too, so a clock more than 30 days ahead of the wall still sees
    (and delivers) the events it logs."""
    with running_receiver() as receiver:
        receiver.secret = ledger.webhooks.create("shop", receiver.url, allow_http=True).secret
        ledger.accounts.open("shop", "alice")
        clock.advance(timedelta(days=31))
        ledger.transactions.credit("shop", "alice", "cash", 100, txn_id="t1")
        drain(ledger.webhooks.worker(policy=FAST), receiver, 1)
        bodies = first_receipts(receiver)
    assert [(b["type"], b["data"]["txn_id"]) for b in bodies] == [("transaction.posted", "t1")]
