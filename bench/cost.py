"""Capacity per operation, priced by AWS's rules (:mod:`tallybook.store.meter`).

The product's credit, debit, transfer, loyalty earn and redeem, and the
reference design (a) "active flag" on the same port and the same meter: an
entry per posting, the latest carrying ``active``; a posting is a strongly
consistent query (limit 1) for the latest entry, then a transaction that puts
the new active entry and removes the flag from the previous one.

Priced on SQLite through :class:`~tallybook.store.metered.MeteredStore` and,
when DynamoDB Local runs, by the DynamoDB engine itself: the two agree except
that the DynamoDB engine reads one item more per limited page (to know
whether another page exists).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from bench.common import Json, Sizes
from bench.dynamo_product import PROGRAM, drop
from bench.dynamo_product import open_ledger as open_dynamo_ledger
from tallybook.ledger import Ledger
from tallybook.store.meter import ItemCost, is_transactional
from tallybook.store.metered import MeteredStore
from tallybook.store.port import (
    Action,
    Exists,
    Item,
    ItemStore,
    Key,
    NotExists,
    Put,
    Remove,
    SortCondition,
    StoreMetrics,
    Update,
)
from tallybook.store.sqlite import SqliteStore

OPS = ("credit", "debit", "transfer", "earn", "redeem")
#: WCU per operation the lean write path aims for (issue 16)
TARGET_WCU = {"credit": 6, "debit": 6, "transfer": 10, "earn": 8, "redeem": 8}


class _Breakdown(MeteredStore):
    """Keeps what each item of the last transaction cost."""

    last: list[ItemCost]

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        self.last = self.meter.item_costs(actions, transactional=is_transactional(actions, token))
        super().transact_write(actions, token=token)


def _items(costs: list[ItemCost]) -> list[Json]:
    return [
        {"key": f"{c.key.pk} {c.key.sk}", "table": c.cost.table, "indexes": dict(c.cost.indexes)}
        for c in costs
    ]


class ActiveFlag:
    """Reference design (a) on the item-store port."""

    def __init__(self, store: ItemStore) -> None:
        self.store = store

    def post(self, account: str, amount: int, txn_id: str) -> None:
        partition = f"AF#{account}"
        page = self.store.query(
            partition, SortCondition.begins_with("E#"), forward=False, limit=1, consistent=True
        )
        prev = page.items[0] if page.items else None
        seq = int(prev["seq"]) if prev else 0  # type: ignore[arg-type]
        balance = int(prev["balance"]) if prev else 0  # type: ignore[arg-type]
        if balance + amount < 0:
            raise ValueError("insufficient funds")
        item: Item = {
            "pk": partition,
            "sk": f"E#{seq + 1:012d}",
            "seq": seq + 1,
            "active": True,
            "txn_id": txn_id,
            "type": "earn" if amount > 0 else "redeem",
            "amount": amount,
            "balance": balance + amount,
            "held": 0,
            "created_at": datetime.now(UTC).isoformat(),
        }
        actions: list[Action] = [Put(item, NotExists("pk"))]
        if prev is not None:
            key = Key(partition, str(prev["sk"]))
            actions.append(Update(key, (Remove("active"),), Exists("active")))
        self.store.transact_write(actions)


def _figures(metrics: StoreMetrics) -> Json:
    snap = metrics.snapshot()
    return {
        "requests": sum(s.requests for s in snap.values()),
        "rcu": sum(s.priced_read_units for s in snap.values()),
        "wcu": sum(s.priced_write_units for s in snap.values()),
        "index_wcu": sum(s.priced_index_write_units for s in snap.values()),
        "estimated_writes": sum(s.estimated_writes for s in snap.values()),
    }


def _mean(samples: list[Json]) -> Json:
    keys = samples[0].keys()
    return {k: round(sum(s[k] for s in samples) / len(samples), 2) for k in keys}


def _cost(store: ItemStore, before: Callable[[], object], op: Callable[[], object]) -> Json:
    before()
    store.metrics.reset()
    op()
    return _figures(store.metrics)


def product(ledger: Ledger, store: ItemStore, repeats: int) -> Json:
    for name in ("c1", "c2"):
        ledger.accounts.open(PROGRAM, name)
        ledger.transactions.credit(PROGRAM, name, "points", 10**6, txn_id=f"fund-{name}")
        ledger.loyalty.earn(PROGRAM, name, f"enrol-{name}", 1000)
    ops: dict[str, Callable[[int], object]] = {
        "credit": lambda i: ledger.transactions.credit(
            PROGRAM, "c1", "points", 10, txn_id=f"cr-{i}"
        ),
        "debit": lambda i: ledger.transactions.debit(PROGRAM, "c1", "points", 1, txn_id=f"db-{i}"),
        "transfer": lambda i: ledger.transactions.transfer(
            PROGRAM, "c1", "c2", "points", 1, txn_id=f"tr-{i}"
        ),
        "earn": lambda i: ledger.loyalty.earn(PROGRAM, "c1", f"o-{i}", 2500),
        "redeem": lambda i: ledger.loyalty.redeem(PROGRAM, "c1", 10, "mug", txn_id=f"rd-{i}"),
    }

    def fresh() -> object:
        return ledger.programs.get(PROGRAM, fresh=True)

    out: Json = {}
    for name, op in ops.items():
        op(-1)  # the first of its kind may create items the next ones update
        out[name] = _mean([_cost(store, fresh, partial(op, i)) for i in range(repeats)])
        if isinstance(store, _Breakdown):
            out[name]["items"] = _items(store.last)
    return out


def reference(store: ItemStore, repeats: int) -> Json:
    design = ActiveFlag(store)
    design.post("ref", 10**6, "seed")

    def nothing() -> object:
        return None

    earn = [_cost(store, nothing, partial(design.post, "ref", 25, f"e{i}")) for i in range(repeats)]
    redeem = [
        _cost(store, nothing, partial(design.post, "ref", -10, f"r{i}")) for i in range(repeats)
    ]
    return {"earn": _mean(earn), "redeem": _mean(redeem)}


def _sqlite_ledger(path: Path) -> tuple[Ledger, ItemStore]:
    store = _Breakdown(SqliteStore(path, synchronous="normal"))
    ledger = Ledger(store)
    ledger.programs.create(PROGRAM)
    ledger.loyalty.configure(PROGRAM, {"expiry": {"days": 365}})
    return ledger, store


def run_sqlite(sizes: Sizes) -> Json:
    repeats = max(2, sizes.ddb_repeats)
    with tempfile.TemporaryDirectory(prefix="tb-bench-cost-") as tmp:
        ledger, store = _sqlite_ledger(Path(tmp) / "cost.db")
        with ledger:
            return {
                "engine": "sqlite (priced by MeteredStore)",
                "product": product(ledger, store, repeats),
                "baseline_a": reference(store, repeats),
            }


def run_dynamodb(endpoint: str, sizes: Sizes) -> Json:
    ledger = open_dynamo_ledger(endpoint)
    try:
        return {
            "engine": "DynamoDB Local (priced by the engine)",
            "product": product(ledger, ledger.store, sizes.ddb_repeats),
            "baseline_a": reference(ledger.store, sizes.ddb_repeats),
        }
    finally:
        drop(ledger)
