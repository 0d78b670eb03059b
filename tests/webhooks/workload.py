"""A mixed workload and what its webhooks must say, worked out from the calls made."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tallybook.errors import InsufficientFunds
from tallybook.ledger import Ledger
from tallybook.webhooks.stream import stream_reader

ACCOUNTS = [f"a{i}" for i in range(8)]
NOTIFICATION_TYPES = ["Promo", "Survey", "Welcome"]


@dataclass
class Expected:
    """(event type, key) pairs the receiver must see: the key is the txn id, the
    hold id or the notification id."""

    events: Counter[tuple[str, str]] = field(default_factory=Counter)
    replays: int = 0

    def add(self, type_: str, key: str) -> None:
        self.events[(type_, key)] += 1


def key_of(body: dict[str, Any]) -> tuple[str, str]:
    data = body["data"]
    type_ = body["type"]
    if type_.startswith("hold."):
        return type_, data["hold_id"]
    if type_.startswith("notification."):
        return type_, data["notification_id"]
    return type_, data["txn_id"]


def run(ledger: Ledger, ops: int, seed: int = 20) -> Expected:
    """``ops`` operations: credits (of two funds), replays, transfers, debits (some refused),
    notifications added and dismissed, holds authorized then captured or voided."""
    rng = random.Random(seed)
    exp = Expected()
    for a in ACCOUNTS:
        ledger.accounts.open("shop", a)
    credits: list[tuple[str, str, str, int]] = []
    active: dict[tuple[str, str], str] = {}
    done = 0
    while done < ops:
        roll = rng.random()
        a = rng.choice(ACCOUNTS)
        n = done
        if roll < 0.30 or not credits:
            amount = rng.randint(100, 900)
            fund = "points" if roll < 0.08 else "cash"
            ledger.transactions.credit("shop", a, fund, amount, txn_id=f"c{n}")
            credits.append((a, fund, f"c{n}", amount))
            exp.add("transaction.posted", f"c{n}")
        elif roll < 0.42:
            acct, fund, txn, amount = rng.choice(credits)
            again = ledger.transactions.credit("shop", acct, fund, amount, txn_id=txn)
            assert again.replay
            exp.replays += 1
        elif roll < 0.57:
            b = rng.choice([x for x in ACCOUNTS if x != a])
            try:
                ledger.transactions.transfer(
                    "shop", a, b, "cash", rng.randint(1, 300), txn_id=f"t{n}"
                )
                exp.add("transaction.posted", f"t{n}")
            except InsufficientFunds:
                pass
        elif roll < 0.65:
            try:
                ledger.transactions.debit("shop", a, "cash", rng.randint(1, 400), txn_id=f"d{n}")
                exp.add("transaction.posted", f"d{n}")
            except InsufficientFunds:
                pass
        elif roll < 0.80:
            type_ = rng.choice(NOTIFICATION_TYPES)
            note = ledger.notifications.add("shop", a, type_, {"n": n})
            exp.add("notification.raised", note.id)
            old = active.pop((a, type_), None)
            if old is not None:
                exp.add("notification.dismissed", old)
            active[(a, type_)] = note.id
        elif roll < 0.87 and active:
            (acct, type_), nid = rng.choice(sorted(active.items()))
            ledger.notifications.dismiss("shop", acct, nid)
            del active[(acct, type_)]
            exp.add("notification.dismissed", nid)
        else:
            ledger.wallet.credit("shop", a, "cash", 500, txn_id=f"w{n}")
            exp.add("transaction.posted", f"w{n}")
            ledger.wallet.authorize("shop", a, 200, hold_id=f"h{n}")
            exp.add("hold.authorized", f"h{n}")
            done += 2
            if rng.random() < 0.5:
                ledger.wallet.capture("shop", f"h{n}", 150)
                exp.add("hold.captured", f"h{n}")
                exp.add("transaction.posted", f"h{n}:capture")
            else:
                ledger.wallet.void("shop", f"h{n}")
                exp.add("hold.voided", f"h{n}")
        done += 1
    return exp


def stream_pages(ledger: Ledger, limit: int = 100) -> list[list[dict[str, Any]]]:
    """The table stream's records so far, shard by shard, in pages of at most
    ``limit`` (what Lambda's event source mapping hands over)."""
    reader = stream_reader(ledger.store)
    assert reader is not None
    arn = reader.stream_arn()
    pages = []
    for shard in reader.shards(arn):
        iterator = reader.client.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = reader.client.get_records(ShardIterator=iterator, Limit=limit)
            if not page["Records"]:
                break
            pages.append(page["Records"])
            iterator = page.get("NextShardIterator")
    return pages
