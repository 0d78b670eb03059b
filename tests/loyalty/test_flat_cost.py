"""A long history costs nothing: balance is one request, an earn costs what it
costs on a new account (requests and capacity units counted, never timed).

The long history is written directly with correct sequence numbers and
balances: 100,000 entries on SQLite, 2,000 on DynamoDB Local (slow to fill);
the assertions are the same.
"""

from __future__ import annotations

from typing import cast

import pytest

from tallybook.ledger import Ledger
from tallybook.store import keys
from tallybook.store.port import Item, OperationStats, Value
from tallybook.store.records.codec import iso, to_us


def build_history(ledger: Ledger, account: str, entries: int) -> None:
    """``entries`` credits of 1 point each, with the head to match."""
    ledger.accounts.open("shop", account)
    now = ledger.clock.now()
    base_us = to_us(now) - entries - 1
    batch: list[Item] = []
    for seq in range(1, entries + 1):
        batch.append(
            {
                **keys.entry("shop", account, "points", base_us + seq, seq).as_item(),
                "program": "shop",
                "account": account,
                "fund": "points",
                "unit": "points",
                "seq": seq,
                "amount": 1,
                "balance": seq,
                "txn_id": f"seed-{seq}",
                "type": "credit",
                "created_at": iso(now),
            }
        )
        if len(batch) == 5000:
            ledger.store.batch_write(batch)
            batch = []
    if batch:
        ledger.store.batch_write(batch)
    head = cast(Item, dict(ledger.store.get(keys.account_head("shop", account)) or {}))
    funds = cast(dict[str, Value], head["funds"])
    funds["points"] = {"balance": entries, "held": 0, "seq": entries, "last_us": base_us + entries}
    head["version"] = 1
    ledger.store.put(head)


def cost(ledger: Ledger, action: object) -> dict[str, OperationStats]:
    ledger.programs.get("shop", fresh=True)  # the program is cached, as in a warm process
    ledger.store.metrics.reset()
    assert callable(action)
    action()
    return ledger.store.metrics.snapshot()


@pytest.mark.slow
def test_long_history_keeps_balance_and_earn_flat(ledger: Ledger, engine: str) -> None:
    entries = 100_000 if engine == "sqlite" else 2_000
    ledger.loyalty.configure("shop", {"expiry": {"days": 365}})
    build_history(ledger, "old", entries)
    ledger.accounts.open("shop", "new")
    page = ledger.accounts.history("shop", "old", "points", limit=1)
    assert (page.entries[0].seq, page.entries[0].balance) == (entries, entries)

    balance = cost(ledger, lambda: ledger.accounts.balances("shop", "old"))
    assert {op: s.requests for op, s in balance.items()} == {"get": 1}
    status = cost(ledger, lambda: ledger.loyalty.status("shop", "old"))
    assert {op: s.requests for op, s in status.items()} == {"get": 1}

    # first earns enrol both accounts in the base tier; the next ones are compared
    ledger.loyalty.earn("shop", "old", "warm-old", 1000)
    ledger.loyalty.earn("shop", "new", "warm-new", 1000)
    old = cost(ledger, lambda: ledger.loyalty.earn("shop", "old", "order-old", 2500))
    new = cost(ledger, lambda: ledger.loyalty.earn("shop", "new", "order-new", 2500))
    assert {op: s.requests for op, s in old.items()} == {"get": 1, "transact_write": 1}
    assert {op: (s.requests, s.read_units, s.write_units) for op, s in old.items()} == {
        op: (s.requests, s.read_units, s.write_units) for op, s in new.items()
    }
    if engine == "dynamodb":
        assert old["transact_write"].write_units > 0

    redeem_old = cost(ledger, lambda: ledger.loyalty.redeem("shop", "old", 30, "mug", txn_id="r-o"))
    redeem_new = cost(ledger, lambda: ledger.loyalty.redeem("shop", "new", 30, "mug", txn_id="r-n"))
    assert {op: (s.requests, s.write_units) for op, s in redeem_old.items()} == {
        op: (s.requests, s.write_units) for op, s in redeem_new.items()
    }
    assert ledger.accounts.balances("shop", "old")[0].balance == entries + 10 + 25 - 30
