"""Transaction events stay in every account's order on a stream of several shards.

DynamoDB keeps one item's records in order within its shard, and nothing
across shards; the transaction records of one account are different items.
These tests take the records a real workload (transfers across accounts,
holds, debits refused) left: on DynamoDB Local the table's real stream
records, elsewhere the change log the worker reads. They deal each record to
one of 2-4 fake shards by its item, as DynamoDB does by key, keep each shard's
own order and read the shards interleaved in a seeded random order, a page at
a time, into the fan-out. Then the real worker delivers to a real receiver.
"""

from __future__ import annotations

import random
import time
import zlib
from collections import Counter
from dataclasses import replace
from typing import Any, cast

import pytest

from tallybook.domain.webhooks import (
    ACCOUNT_LANE,
    FUND_LANE,
    HOLD_LANE,
    Event,
    Lane,
    Subscription,
)
from tallybook.ledger import Ledger
from tallybook.reliability.faults import Crash, FaultyStore
from tallybook.store import keys
from tallybook.store.port import Delete, ItemStore
from tallybook.store.records.webhook_changes import pending_changes, position
from tallybook.store.records.webhook_events import read_events
from tallybook.store.records.webhook_order import marker_key, read_marks, read_parked
from tallybook.webhooks.fanout import change_events, fan_out_new, sweep_parked
from tallybook.webhooks.order import HORIZON_US, lanes_of, sweep, take_in, units_of
from tallybook.webhooks.stream import events_of, stream_reader
from tallybook.webhooks.subscriptions import SubscriptionStore
from tallybook.webhooks.worker import DeliveryWorker

from .receiver import Receiver, running_receiver
from .test_delivery import FAST, assert_per_account_order, first_receipts
from .workload import key_of, run, stream_pages

ENGINES = ["memory", "sqlite", "dynamodb"]
Record = tuple[str, list[tuple[Event, str]]]


def records_of(ledger: Ledger) -> list[Record]:
    """The workload's records in log order, each as (its item's key, its events)."""
    reader = stream_reader(ledger.store)
    if reader is None:
        changes = pending_changes(ledger.store, "shop", limit=100_000)
        out: list[Record] = []
        for c in changes:
            pairs = change_events(c)
            if c.image is not None and pairs:
                out.append((f"{c.image['pk']}/{c.image['sk']}", pairs))
        return out
    out = []
    for page in stream_pages(ledger, limit=1000):
        for record in page:
            pairs = events_of([record])
            if pairs:
                k = record["dynamodb"]["Keys"]
                out.append((f"{k['pk']['S']}/{k['sk']['S']}", pairs))
    return out


def shuffled_pages(records: list[Record], shards: int, seed: int) -> list[list[tuple[Event, str]]]:
    """Deal records to ``shards`` by item key (each shard keeps its order), number
    each shard's records from its own random start (a shard's sequence numbers say
    nothing of another's), then read the shards interleaved at random, 1-6
    records a page."""
    rng = random.Random(seed)
    dealt: list[list[Record]] = [[] for _ in range(shards)]
    for record in records:
        dealt[zlib.crc32(record[0].encode()) % shards].append(record)
    for shard in dealt:
        start = rng.randrange(10**6) * 1000
        for n, (_, pairs) in enumerate(shard):
            pairs[:] = [(e, position(start + n, int(pos.split(".")[1]))) for e, pos in pairs]
    pages = []
    while any(dealt):
        shard = rng.choice([d for d in dealt if d])
        take = rng.randint(1, 6)
        page = [pair for _, pairs in shard[:take] for pair in pairs]
        del shard[:take]
        pages.append(page)
    return pages


def subs_of(ledger: Ledger) -> dict[str, list[Subscription]]:
    return {"shop": SubscriptionStore(ledger.store, ledger.clock).list("shop")}


def deliver_all(ledger: Ledger, receiver: Receiver, want: int) -> None:
    """Send the queues (the events are in already) until everything arrived."""
    worker = DeliveryWorker(ledger.store, ledger.clock, ledger.programs, policy=FAST)
    subs = subs_of(ledger)
    for _ in range(200):
        stats = worker.deliver_due(subs)
        if len(receiver.ids()) >= want and not (stats.waiting or stats.failed):
            return
    raise AssertionError(f"only {len(receiver.ids())} of {want} events arrived")


def assert_holds_in_order(bodies: list[dict[str, Any]]) -> None:
    """A hold's placing arrives before its capture or void."""
    placed: set[str] = set()
    for body in bodies:
        if body["type"] == "hold.authorized":
            placed.add(body["data"]["hold_id"])
        elif body["type"] in ("hold.captured", "hold.voided"):
            assert body["data"]["hold_id"] in placed, f"{body['type']} before its authorize"


def reordered(store: ItemStore, sub_id: str) -> int:
    """Deliveries whose position was moved after their predecessor's."""
    rows = store.query_all(keys.webhook_deliveries("shop", sub_id))
    return sum(1 for r in rows if "~" in str(r["sk"]))


def ready_parked(store: ItemStore) -> int:
    """Parked units whose every lane has its predecessor taken in (waiting only for
    the release a killed worker did not do)."""
    ready = 0
    for parked in read_parked(store, "shop"):
        lanes = lanes_of(parked.events)
        marks = read_marks(store, lanes)
        if all(lane in marks and marks[lane].seq == seq - 1 for lane, seq in lanes.items()):
            ready += 1
    return ready


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("shards", "seed"), [(2, 1), (3, 2), (4, 3)])
def test_shuffled_shards_keep_every_account_in_order(
    ledger: Ledger, engine: str, shards: int, seed: int
) -> None:
    with running_receiver() as receiver:
        sub = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = sub.secret
        expected = run(ledger, 120, seed=seed)
        records = records_of(ledger)
        subs = subs_of(ledger)
        parked = 0
        for page in shuffled_pages(records, shards, seed):
            fan_out_new(ledger.store, page, subs)
            parked = max(parked, len(read_parked(ledger.store, "shop")))
        assert read_parked(ledger.store, "shop") == []
        deliver_all(ledger, receiver, len(expected.events))
        bodies = first_receipts(receiver)
    assert receiver.rejected_signatures == 0
    assert Counter(key_of(b) for b in bodies) == expected.events
    assert_per_account_order(bodies)
    assert_holds_in_order(bodies)
    # the shuffle did put successors first: they were parked, then moved after
    assert parked > 0
    assert reordered(ledger.store, sub.subscription.id) > 0


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_a_worker_killed_between_parking_and_releasing_loses_nothing(
    ledger: Ledger, engine: str
) -> None:
    with running_receiver() as receiver:
        sub = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = sub.secret
        expected = run(ledger, 100, seed=5)
        pages = shuffled_pages(records_of(ledger), 3, 5)
        subs = subs_of(ledger)
        faulty = FaultyStore(ledger.store)
        rng = random.Random(5)
        crashes = in_window = 0
        for page in pages:
            faulty.crash_at(rng.randint(1, 8), rng.choice(["before", "after"]))
            try:
                fan_out_new(faulty, page, subs)
            except Crash:
                crashes += 1
                in_window += ready_parked(ledger.store) > 0
                faulty.disarm()
                # the stream's checkpoint did not move: the page is read again
                fan_out_new(faulty, page, subs)
            faulty.disarm()
        sweep_parked(ledger.store, subs)
        assert read_parked(ledger.store, "shop") == []
        deliver_all(ledger, receiver, len(expected.events))
        bodies = first_receipts(receiver)
    assert crashes >= 5
    assert in_window >= 1
    assert Counter(key_of(b) for b in bodies) == expected.events
    assert len(bodies) == sum(expected.events.values())
    assert_per_account_order(bodies)
    assert_holds_in_order(bodies)


def _unnumbered(pairs: list[tuple[Event, str]]) -> list[tuple[Event, str]]:
    """Events as a version that did not number accounts derived them."""
    drop = ("account_seq", "account_previous")
    return [
        (replace(e, data={k: v for k, v in e.data.items() if k not in drop}), pos)
        for e, pos in pairs
    ]


def _first_numbered(pairs: list[tuple[Event, str]], account: str) -> list[tuple[Event, str]]:
    """Events of an account's first numbered change after an upgrade: ``account_seq``
    1, though the account has older, unnumbered records."""
    return [
        (replace(e, data={**_unnumbered([(e, pos)])[0][0].data, "account_seq": {account: 1}}), pos)
        for e, pos in pairs
    ]


def _events_of(ledger: Ledger, txn_id: str, shard_position: int | None = None) -> list[Any]:
    """The events of one transaction, optionally as read from a shard whose numbers
    are lower (``shard_position``)."""
    out = [
        (e, pos if shard_position is None else position(shard_position, i))
        for _, ps in records_of(ledger)
        for i, (e, pos) in enumerate(ps)
        if e.data.get("txn_id") == txn_id
    ]
    assert out, txn_id
    return out


def _position_of(ledger: Ledger, event: Event) -> str:
    return str((ledger.store.get(keys.event("shop", event.id)) or {})["position"])


def test_an_account_lane_without_a_marker_starts_after_its_previous_change(
    ledger: Ledger,
) -> None:
    """A marker gone (the account idle past its retention): the next change is read
    back from its ``account_previous``, not held back, and sorts after it even when
    its own position (another shard's) does not."""
    subs = subs_of(ledger)
    ledger.accounts.open("shop", "old")
    for i in range(3):
        ledger.transactions.credit("shop", "old", "cash", 100, txn_id=f"old{i}")
    fan_out_new(ledger.store, [p for _, ps in records_of(ledger) for p in ps], subs)
    lane = Lane("shop", ACCOUNT_LANE, "old")
    assert read_marks(ledger.store, [lane])[lane].seq == 3
    _forget_marker(ledger.store, lane)
    ledger.transactions.credit("shop", "old", "points", 5, txn_id="new")
    newer = _events_of(ledger, "new", shard_position=1)
    old2 = _events_of(ledger, "old2")[0][0]
    assert cast(Any, newer[0][0].data["account_previous"])["old"]["id"] == old2.id
    assert fan_out_new(ledger.store, newer, subs) == 1
    assert read_marks(ledger.store, [lane])[lane].seq == 4
    assert _position_of(ledger, newer[0][0]) > _position_of(ledger, old2)


def test_a_lane_without_a_marker_starts_after_what_an_older_version_fanned_out(
    ledger: Ledger,
) -> None:
    """Events fanned out before markers and account numbers existed: the account's
    first numbered change is not held back, and sorts after its fund's predecessor
    even when its own position (another shard's) does not."""
    subs = subs_of(ledger)
    ledger.accounts.open("shop", "old")
    for i in range(3):
        ledger.transactions.credit("shop", "old", "cash", 100, txn_id=f"old{i}")
    fan_out_new(ledger.store, _unnumbered([p for _, ps in records_of(ledger) for p in ps]), subs)
    lane = Lane("shop", FUND_LANE, "old", "cash")
    assert read_marks(ledger.store, [lane])[lane].seq == 3
    _forget_marker(ledger.store, lane)
    ledger.transactions.credit("shop", "old", "cash", 100, txn_id="new")
    newer = _first_numbered(_events_of(ledger, "new", shard_position=1), "old")
    assert fan_out_new(ledger.store, newer, subs) == 1
    assert read_marks(ledger.store, [lane])[lane].seq == 4
    account = Lane("shop", ACCOUNT_LANE, "old")
    assert read_marks(ledger.store, [account])[account].seq == 1
    old2 = _events_of(ledger, "old2")[0][0]
    assert _position_of(ledger, newer[0][0]) > _position_of(ledger, old2)


def test_an_accounts_first_numbered_change_waits_for_an_older_record(ledger: Ledger) -> None:
    """Across an upgrade: the first numbered change of an account read before the
    last unnumbered record of its fund and hold is parked until that one is in."""
    subs = subs_of(ledger)
    ledger.accounts.open("shop", "up")
    ledger.wallet.credit("shop", "up", "cash", 500, txn_id="w1")
    ledger.wallet.authorize("shop", "up", 200, hold_id="h1")
    ledger.wallet.capture("shop", "h1", 150)
    older = _unnumbered(_events_of(ledger, "w1") + _events_of(ledger, "h1"))
    capture = _first_numbered(_events_of(ledger, "h1:capture", shard_position=1), "up")
    lanes = lanes_of(capture)
    assert Lane("shop", HOLD_LANE, "h1") in lanes
    assert Lane("shop", ACCOUNT_LANE, "up") in lanes
    assert fan_out_new(ledger.store, capture, subs) == 0
    assert len(read_parked(ledger.store, "shop")) == 1
    assert fan_out_new(ledger.store, older, subs) == len(older) + len(capture)
    assert read_parked(ledger.store, "shop") == []
    last = max(_position_of(ledger, e) for e, _ in older)
    assert all(_position_of(ledger, e) > last for e, _ in capture)


def test_a_unit_a_page_read_again_parked_twice_is_taken_in_once_and_unparked(
    ledger: Ledger,
) -> None:
    """A transfer read alone is parked on its first lane. The worker takes in that
    lane's predecessor and is killed before releasing; the page read again parks
    the transfer on its other lane, beside its first row. Once both lanes are
    ready, one sweep takes it in once and leaves no row parked."""
    subs = subs_of(ledger)
    for account in ("a", "b"):
        ledger.accounts.open("shop", account)
        ledger.transactions.credit("shop", account, "cash", 100, txn_id=f"c-{account}")
    ledger.transactions.transfer("shop", "a", "b", "cash", 40, txn_id="t")
    transfer = _events_of(ledger, "t", shard_position=1)
    assert fan_out_new(ledger.store, transfer, subs) == 0
    [first] = read_parked(ledger.store, "shop")
    waits_on = next(lane for lane in lanes_of(transfer) if first.key.startswith(f"A#{lane.id}#"))
    credits = {lane.id: _events_of(ledger, f"c-{lane.id}") for lane in lanes_of(transfer)}
    take_in(ledger.store, subs, time.time_ns() // 1000, units_of(credits.pop(waits_on.id)))
    assert fan_out_new(ledger.store, transfer, subs) == 0
    assert len(read_parked(ledger.store, "shop")) == 2
    [other] = credits.values()
    take_in(ledger.store, subs, time.time_ns() // 1000, units_of(other))
    assert sweep_parked(ledger.store, subs) == 1
    assert read_parked(ledger.store, "shop") == []
    assert read_events(ledger.store, "shop", [transfer[0][0].id])


def _forget_marker(store: ItemStore, lane: Lane) -> None:
    """As a version without markers left it."""
    store.transact_write([Delete(marker_key(lane))])


def test_a_unit_waits_for_its_predecessor_until_the_stream_cannot_hold_it(
    ledger: Ledger,
) -> None:
    """A successor read alone is parked; it is taken in once its predecessor's
    record can no longer be on the stream (parked 25 hours), the lane moved past."""
    subs = subs_of(ledger)
    ledger.accounts.open("shop", "x")
    ledger.transactions.credit("shop", "x", "cash", 100, txn_id="first")
    ledger.transactions.credit("shop", "x", "cash", 100, txn_id="second")
    second = [p for _, ps in records_of(ledger) for p in ps if p[0].data["txn_id"] == "second"]
    assert fan_out_new(ledger.store, second, subs) == 0
    assert len(read_parked(ledger.store, "shop")) == 1
    now_us = time.time_ns() // 1000
    assert sweep(ledger.store, subs, now_us + HORIZON_US - 10**6, ["shop"]) == 0
    assert sweep(ledger.store, subs, now_us + HORIZON_US + 10**6, ["shop"]) == 1
    assert read_parked(ledger.store, "shop") == []
    lane = Lane("shop", ACCOUNT_LANE, "x")
    assert read_marks(ledger.store, [lane])[lane].seq == 2


def test_every_position_a_unit_can_get_is_one_resend_takes() -> None:
    """Positions from :func:`after` (a unit sorted after its lanes' last one) match
    the pattern the HTTP API and the admin page take for a delivery."""
    import re

    from tallybook.domain.webhooks import POSITION_PATTERN
    from tallybook.webhooks.order import after

    first, second, third = position(10**30, 8), position(10**29, 16), position(10**28, 0)
    moved = after(first, second)
    again = after(moved, third)
    assert first < moved < again
    for pos in (first, moved, again, after(None, third)):
        assert re.fullmatch(POSITION_PATTERN, pos), pos
