"""DynamoDB's pricing rules, on the examples of AWS's developer guide.

"DynamoDB item sizes and formats", "DynamoDB read and write operations",
"Provisioned throughput considerations for global secondary indexes" and
"Capacity management for transactions".
"""

from __future__ import annotations

from tallybook.store import capacity
from tallybook.store.capacity import (
    batch_get_units,
    index_write_units,
    item_size,
    query_units,
    read_units,
    value_size,
    write_cost,
    write_units,
)
from tallybook.store.port import INDEX_DEFS, IndexDef, Item, Value

KB = 1024
GSI = IndexDef("g", "gpk", "gsk")


def sized(total: int, **extra: Value) -> Item:
    """An item of exactly ``total`` bytes: keys ``pk``/``sk`` plus padding in ``body``."""
    item: Item = {"pk": "p", "sk": "s", **extra}
    pad = total - item_size(item) - len("body")
    assert pad >= 0
    item["body"] = "x" * pad
    assert item_size(item) == total
    return item


def test_sizes_of_each_type() -> None:
    # strings: UTF-8 bytes of the name plus of the value
    assert item_size({"name": "héllo"}) == 4 + 6
    # numbers: one byte per two significant digits plus one; zeros trimmed
    assert value_size(12345) == 4
    assert value_size(1_000_000) == 2
    assert value_size(0) == 2
    # null and Boolean: one byte
    assert item_size({"ok": True, "none": None}) == 2 + 1 + 4 + 1
    # lists and maps: 3 bytes, plus one byte and the size of each element
    assert value_size([]) == 3
    assert value_size(["ab", 7]) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"a": "xyz"}) == 3 + 1 + 1 + 3


def test_reads_round_up_to_4_kb() -> None:
    # "reading a 3,500-byte item consumes the same throughput as reading a 4 KB item"
    assert read_units(3500) == 1
    # an 8 KB item: 2 strongly consistent, 1 eventually consistent, 4 transactional
    assert read_units(8 * KB) == 2
    assert read_units(8 * KB, consistent=False) == 1
    assert read_units(8 * KB, transactional=True) == 4
    # "If you read a 10 KB item, DynamoDB rounds the item size to 12 KB"
    assert read_units(10 * KB) == 3
    # a read that finds nothing still costs the minimum
    assert read_units(0) == 1
    assert read_units(0, consistent=False) == 0.5


def test_batch_get_rounds_each_item_query_the_total() -> None:
    # "reads two items of 1.5 KB and 6.5 KB: 12 KB (4 KB + 8 KB), not 8 KB"
    small, large = sized(1536), sized(6656)
    assert batch_get_units([small, large]) == 3
    # a Query is charged on the total size of what it returns
    assert query_units([small, large]) == 2
    assert query_units([sized(400)] * 10) == 1
    assert query_units([], consistent=False) == 0.5


def test_writes_cost_1_wcu_per_kb_of_the_larger_image() -> None:
    assert write_units(500) == 1
    assert write_units(1536) == 2
    small, large = sized(500), sized(1536)
    # a put of a new item, an update that grows it, one that shrinks it
    assert write_cost(None, large).table == 2
    assert write_cost(small, large).table == 2
    assert write_cost(large, small).table == 2
    # a delete is priced on the item deleted
    assert write_cost(large, None).table == 2
    assert write_cost(None, None).table == 1


def test_transactional_writes_cost_twice() -> None:
    # "3 transactional writes per second of 5 KB items need 3 * 5 * 2 = 30 WCU"
    item = sized(5 * KB)
    per_item = write_cost(None, item, transactional=True, indexes=()).total
    assert 3 * per_item == 30
    # a condition check is priced as a transactional write of the item checked
    assert capacity.condition_check_cost(sized(1536)).total == 4


def test_gsi_write_rules() -> None:
    """The four cases of "Provisioned throughput considerations for global secondary indexes"."""
    plain = sized(300)
    entered = {**plain, "gpk": "A", "gsk": "1"}
    # a new item (or one updated to define the index key): one put into the index
    assert index_write_units(GSI, None, entered) == 1
    assert index_write_units(GSI, plain, entered) == 1
    # the indexed key changes from A to B: a delete plus a put
    assert index_write_units(GSI, entered, {**entered, "gpk": "B"}) == 2
    # the indexed attribute is removed: one delete
    assert index_write_units(GSI, entered, plain) == 1
    # not in the index before or after: no index write
    assert index_write_units(GSI, plain, {**plain, "body": "y"}) == 0
    # only a projected attribute changes: one write to update the entry
    assert index_write_units(GSI, entered, {**entered, "n": 1}) == 1
    # nothing projected changes: nothing to write
    assert index_write_units(GSI, entered, dict(entered)) == 0
    # larger index entries need more: 1 WCU per KB of the projected item
    assert index_write_units(GSI, None, sized(2500, gpk="A", gsk="1")) == 3


def test_projection_decides_what_an_index_pays_for() -> None:
    keys_only = IndexDef("k", "gpk", "gsk", projection="KEYS_ONLY")
    include = IndexDef("i", "gpk", "gsk", projection="INCLUDE", include=("status",))
    item = sized(3000, gpk="A", gsk="1", status="open")
    changed = {**item, "body": "y", "status": "closed"}
    # KEYS_ONLY: the entry is the table and index keys, small; a non-key change is free
    assert index_write_units(keys_only, None, item) == 1
    assert index_write_units(keys_only, item, {**item, "body": "y"}) == 0
    # INCLUDE: only the attributes it names count
    assert index_write_units(include, item, {**item, "body": "y"}) == 0
    assert index_write_units(include, item, changed) == 1
    # ALL: the whole item, 3 KB
    assert index_write_units(GSI, None, item) == 3


def test_write_cost_sums_table_and_every_index() -> None:
    item: Item = {"pk": "p", "sk": "s", "gsi1pk": "a", "gsi1sk": "b", "gsi2pk": "c", "gsi2sk": "d"}
    cost = write_cost(None, item, transactional=True, indexes=INDEX_DEFS)
    # table: 1 KB doubled in a transaction; each index: 1 KB, not doubled
    assert (cost.table, cost.indexes, cost.total) == (2, (("gsi1", 1), ("gsi2", 1)), 4)
