"""The capacity meter on both engines, and against DynamoDB Local where it is right."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tallybook.errors import ConditionFailed
from tallybook.store import capacity
from tallybook.store.dynamodb import DynamoStore
from tallybook.store.meter import CapacityMeter, Price
from tallybook.store.metered import MeteredStore, metered
from tallybook.store.port import (
    Action,
    Add,
    ConditionCheck,
    Delete,
    Exists,
    Item,
    ItemStore,
    Key,
    NotExists,
    OperationStats,
    Put,
    Set,
    Update,
)

BIG = "x" * 1500


def meter_of(store: ItemStore) -> CapacityMeter:
    meter = getattr(store, "meter", None)
    assert isinstance(meter, CapacityMeter)
    return meter


def priced(store: ItemStore, operation: str) -> tuple[float, float, float, int]:
    s: OperationStats = store.metrics.stat(operation)
    return (s.priced_read_units, s.priced_write_units, s.priced_index_write_units,
            s.estimated_writes)  # fmt: skip


def priced_writes(store: ItemStore) -> tuple[float, float, float, int]:
    """:func:`priced` over every write operation: DynamoDB counts a single write
    as the PutItem, UpdateItem or DeleteItem it sends, SQLite as a transaction."""
    each = [priced(store, op) for op in ("transact_write", "put", "update", "delete")]
    return (sum(p[0] for p in each), sum(p[1] for p in each), sum(p[2] for p in each),
            sum(p[3] for p in each))  # fmt: skip


def test_same_calls_same_price_on_both_engines(store: ItemStore) -> None:
    s = metered(store)
    indexed: Item = {"pk": "a", "sk": "1", "gsi1pk": "g", "gsi1sk": "1", "body": BIG}
    s.put(indexed, NotExists("pk"))
    # 1.5 KB: 2 WCU in the table, 2 in gsi1; the condition says the item was new
    assert priced_writes(s) == (0, 4, 2, 0)
    s.update(Key("a", "1"), [Add("n", 1), Set("body", "short")])
    # priced on the larger image (before), the index entry updated (now small)
    assert priced_writes(s) == (0, 4 + 2 + 2, 2 + 2, 0)
    s.metrics.reset()
    s.transact_write([Put({"pk": "b", "sk": str(i)}, NotExists("pk")) for i in range(5)])
    # five one-item puts in a transaction: 2 WCU each
    assert priced_writes(s) == (0, 10, 0, 0)
    assert s.get(Key("a", "1")) is not None
    assert s.get(Key("a", "missing"), consistent=False) is None
    assert priced(s, "get") == (1.5, 0, 0, 0)
    assert len(s.query("b").items) == 5
    assert len(s.query("g", index="gsi1").items) == 1
    assert priced(s, "query") == (1.5, 0, 0, 0)
    s.delete(Key("a", "1"))
    assert priced_writes(s) == (0, 10 + 2, 1, 0)


def test_unknown_before_image_is_priced_as_new_and_counted(store: ItemStore) -> None:
    s = metered(store)
    s.put({"pk": "a", "sk": "1", "body": BIG})
    meter_of(s).forget([Key("a", "1")])
    s.metrics.reset()
    s.update(Key("a", "1"), [Add("n", 1)])
    # a lower bound (the key and the new attribute), flagged as estimated
    assert priced_writes(s) == (0, 1, 0, 1)
    # the cache now knows the item as the meter saw it written
    assert meter_of(s).image(Key("a", "1"))[0]


def test_what_callers_do_to_items_they_read_does_not_change_the_price(store: ItemStore) -> None:
    s = metered(store)
    s.put({"pk": "a", "sk": "1", "m": {"big": BIG}}, NotExists("pk"))
    item = s.get(Key("a", "1"))
    assert item is not None
    assert isinstance(item["m"], dict)
    item["m"]["big"] = ""
    s.metrics.reset()
    s.update(Key("a", "1"), [Add("n", 1)])
    # priced on the stored item (1.5 KB), not on the caller's copy
    assert priced_writes(s) == (0, 2, 0, 0)


def test_the_image_cache_is_bounded() -> None:
    meter = CapacityMeter(cache_items=2)
    for i in range(3):
        meter.remember(Key("p", str(i)), {"pk": "p", "sk": str(i)})
    assert [meter.image(Key("p", str(i)))[0] for i in range(3)] == [False, True, True]


def test_metered_passes_through_a_self_pricing_engine(store: ItemStore) -> None:
    wrapped = metered(store)
    if isinstance(store, DynamoStore):
        assert wrapped is store
    else:
        assert isinstance(wrapped, MeteredStore)
        assert wrapped.metrics is store.metrics
        assert wrapped.describe() == store.describe()


@pytest.mark.parametrize("engine", ["dynamodb"], indirect=True)
def test_priced_equals_dynamodb_local_on_single_item_calls(store: ItemStore) -> None:
    """DynamoDB Local reports single-item calls right, index writes included."""
    assert isinstance(store, DynamoStore)
    both: Item = {"gsi1pk": "g", "gsi1sk": "1", "gsi2pk": "h", "gsi2sk": "2"}
    calls: list[Callable[[], object]] = [
        lambda: store.put({"pk": "a", "sk": "1", "body": BIG}),
        lambda: store.put({"pk": "a", "sk": "2", "body": BIG, **both}),
        lambda: store.update(Key("a", "2"), [Set("body", "z")]),
        lambda: store.update(Key("a", "2"), [Set("gsi1sk", "9")]),
        lambda: store.update(Key("a", "2"), [Add("n", 5)]),
        lambda: store.get(Key("a", "1")),
        lambda: store.get(Key("a", "1"), consistent=False),
        lambda: store.get(Key("a", "none")),
        lambda: store.query("a"),
        lambda: store.query("g", index="gsi1"),
        lambda: store.delete(Key("a", "2")),
    ]
    for call in calls:
        store.metrics.reset()
        call()
        (op,) = store.metrics.by_operation
        s = store.metrics.stat(op)
        assert (s.priced_read_units, s.priced_write_units) == (s.read_units, s.write_units)
        assert s.priced_read_units + s.priced_write_units > 0


def _sized(key: Key, kb: int) -> Item:
    """An item of exactly ``kb`` KB by DynamoDB's item-size rules."""
    item: Item = {"pk": key.pk, "sk": key.sk, "body": ""}
    item["body"] = "x" * (kb * 1024 - capacity.item_size(item))
    assert capacity.item_size(item) == kb * 1024
    return item


def test_a_failed_conditional_write_is_priced_on_aws_example() -> None:
    """AWS's example: an existing item of 300 KB, the put or update that fails
    its condition would make it 310 KB: 310 WCU consumed (no index write)."""
    meter = CapacityMeter()
    key = Key("p", "1")
    meter.remember(key, _sized(key, 300))
    fails = Put(_sized(key, 310), NotExists("pk"))
    assert meter.failed_write([fails], transactional=False) == Price(0.0, 310.0, 0.0, 0)
    # the other way round, and a delete: the larger image, the existing one
    meter.remember(key, _sized(key, 310))
    assert meter.failed_write([Put(_sized(key, 300))], transactional=False).write_units == 310
    assert meter.failed_write([Delete(key)], transactional=False).write_units == 310
    # no item and a small write: the minimum, 1 WCU
    meter.remember(Key("p", "2"), None)
    assert meter.failed_write([Update(Key("p", "2"), (Add("n", 1),))], transactional=False) == (
        Price(0.0, 1.0, 0.0, 0)
    )


def test_a_cancelled_transaction_is_priced_on_both_engines(store: ItemStore) -> None:
    """A transaction cancelled by one failed condition still consumes the two
    underlying writes of every item (2 WCU per KB), as a committed one would,
    but writes no index entry; a single conditional write that fails consumes
    standard units. The same on both engines."""
    s = metered(store)
    s.put({"pk": "b", "sk": "2", "body": BIG})
    for absent in ("0", "3"):
        assert s.get(Key("b", absent)) is None  # the meter now knows them absent
    s.metrics.reset()
    indexed: Item = {"pk": "b", "sk": "0", "gsi1pk": "g", "gsi1sk": "1"}
    actions: list[Action] = [
        Put(indexed, NotExists("pk")),  # 2: one small item, no index entry written
        Put({"pk": "b", "sk": "1"}, NotExists("pk")),  # 2, never read: estimated
        Put({"pk": "b", "sk": "2"}, NotExists("pk")),  # 4: fails on the 1.5 KB item there
        ConditionCheck(Key("b", "3"), NotExists("pk")),  # 2
    ]
    with pytest.raises(ConditionFailed):
        s.transact_write(actions)
    assert priced_writes(s) == (0, 10, 0, 1)
    # the images are forgotten after a failure: read again to know them
    assert not meter_of(s).image(Key("b", "2"))[0]
    assert s.get(Key("b", "2")) is not None
    assert s.get(Key("b", "0")) is None
    s.metrics.reset()
    with pytest.raises(ConditionFailed):
        s.put({"pk": "b", "sk": "2"}, NotExists("pk"))
    assert priced_writes(s) == (0, 2, 0, 0)
    with pytest.raises(ConditionFailed):
        s.delete(Key("b", "0"), Exists("pk"))
    assert priced_writes(s) == (0, 2 + 1, 0, 0)
