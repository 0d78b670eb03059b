"""Fan-out writes several events per transaction; events fanned out already (a
stream record read again, an item changed twice) are skipped, the rest written."""

from __future__ import annotations

from tallybook.ledger import Ledger
from tallybook.store import keys
from tallybook.store.records.webhook_changes import position
from tallybook.webhooks.events import Event
from tallybook.webhooks.fanout import fan_out_new
from tallybook.webhooks.subscriptions import SubscriptionStore


def _events(n: int) -> list[tuple[Event, str]]:
    return [
        (
            Event(f"evt_{i:04d}", "transaction.posted", "shop", ("a",), "t", {"txn_id": f"t{i}"}),
            position(1000 + i, 0),
        )
        for i in range(n)
    ]


def test_batches_skip_what_was_fanned_out_and_write_the_rest(ledger: Ledger) -> None:
    ledger.webhooks.create("shop", "https://example.com/a", sub_id="a")
    ledger.webhooks.create("shop", "https://example.com/b", sub_id="b")
    subs = {"shop": SubscriptionStore(ledger.store, ledger.clock).list("shop")}
    events = _events(45)  # 5 actions each: more than one transaction
    assert fan_out_new(ledger.store, events[10:20], subs) == 10
    again = [*events, events[0], events[15]]  # read again, and twice in one batch
    assert fan_out_new(ledger.store, again, subs) == 35
    for sub in ("a", "b"):
        queue = ledger.store.query_all(keys.webhook_queue("shop", sub))
        assert [q["event_id"] for q in queue] == [e.id for e, _ in events]
    assert fan_out_new(ledger.store, events, subs) == 0
