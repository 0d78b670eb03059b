"""DynamoDB's capacity pricing rules, as pure functions of item images.

DynamoDB Local misreports ``ConsumedCapacity`` for transactions and index
writes (3.3.1 reports 2 WCU for a 100-item transaction), so tallybook prices
every call itself, by the rules of AWS's developer guide ("DynamoDB item
sizes and formats", "DynamoDB read and write operations", "Provisioned
throughput considerations for global secondary indexes", "Capacity
management for transactions"):

* item size: the UTF-8 length of every attribute name plus its value; a
  string is its UTF-8 length, a number about one byte per two significant
  digits plus one, a Boolean or null one byte, a list or map three bytes
  plus one byte and the size of each element (a map element also counts
  its name);
* a standard write costs 1 WCU per started KB of the larger of the item
  before and after (at least 1); a delete is priced on the item deleted;
  a transactional write costs twice that;
* each global secondary index whose key an item enters, leaves or keeps
  while a projected attribute changes costs 1 WCU per started KB of the
  projected item (the index entry); a changed index key is a delete plus a
  put; index writes are not doubled in a transaction;
* a strongly consistent read costs 1 RCU per started 4 KB, an eventually
  consistent one half that, a transactional one twice; a Query is charged
  on the total size of the page it returns (at least one unit), a
  BatchGetItem on each item rounded up separately.

Two choices where the guide is silent, stated here so the figures can be
read: an index entry's size is its projected attributes (the 100 bytes of
per-item overhead count towards storage, not throughput), and a
``ConditionCheck`` in a transaction is priced as a transactional write of
the checked item.

:mod:`tallybook.store.meter` applies these to what an engine reads and
writes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tallybook.store.port import INDEX_DEFS, KEY_ATTRS, IndexDef, Item, Value

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
TRANSACTION_FACTOR = 2


def value_size(value: Value) -> int:
    """Bytes of one attribute value (without its name)."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int):
        digits = str(abs(value)).strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1 + (1 if value < 0 else 0)
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, list):
        return 3 + sum(1 + value_size(v) for v in value)
    if isinstance(value, dict):
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in value.items())
    raise TypeError(f"no DynamoDB size for {type(value).__name__}")  # pragma: no cover


def item_size(item: Mapping[str, Value] | None) -> int:
    """Bytes of an item by DynamoDB's rules (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(v) for name, v in item.items())


def write_units(size: int) -> int:
    """WCU of one standard write of an item of ``size`` bytes (at least 1)."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, *, consistent: bool = True, transactional: bool = False) -> float:
    """RCU of reading ``size`` bytes in one unit of account (at least one unit)."""
    units = float(max(1, math.ceil(size / READ_UNIT_BYTES)))
    if transactional:
        return units * TRANSACTION_FACTOR
    return units if consistent else units / 2


def query_units(items: Iterable[Mapping[str, Value]], *, consistent: bool = True) -> float:
    """RCU of one Query (or Scan) page: the total size of the items it returns."""
    return read_units(sum(item_size(i) for i in items), consistent=consistent)


def batch_get_units(items: Iterable[Mapping[str, Value]], *, consistent: bool = True) -> float:
    """RCU of one BatchGetItem: every item rounded up to 4 KB on its own."""
    return sum(read_units(item_size(i), consistent=consistent) for i in items)


# --- index entries -----------------------------------------------------------


def in_index(index: IndexDef, item: Mapping[str, Value] | None) -> bool:
    """Whether ``item`` has an entry in ``index`` (it carries both key attributes)."""
    return item is not None and index.hash_attr in item and index.range_attr in item


def projected(index: IndexDef, item: Mapping[str, Value]) -> Item:
    """The attributes of ``item`` that ``index`` holds: its entry."""
    if index.projection == "ALL":
        return dict(item)
    names = {*KEY_ATTRS, index.hash_attr, index.range_attr}
    if index.projection == "INCLUDE":
        names.update(index.include)
    return {k: v for k, v in item.items() if k in names}


def index_write_units(
    index: IndexDef, before: Mapping[str, Value] | None, after: Mapping[str, Value] | None
) -> int:
    """WCU ``index`` consumes when a table write turns ``before`` into ``after``."""
    was, now = in_index(index, before), in_index(index, after)
    old = projected(index, before) if was and before is not None else None
    new = projected(index, after) if now and after is not None else None
    if old is None and new is None:
        return 0
    if old is None:
        return write_units(item_size(new))
    if new is None:
        return write_units(item_size(old))
    if any(old[a] != new[a] for a in (index.hash_attr, index.range_attr)):
        return write_units(item_size(old)) + write_units(item_size(new))
    if old == new:
        return 0
    return write_units(max(item_size(old), item_size(new)))


# --- one write ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteCost:
    """The WCU of one item write: the table's and each index's."""

    table: int
    indexes: tuple[tuple[str, int], ...] = ()

    @property
    def index_total(self) -> int:
        return sum(units for _, units in self.indexes)

    @property
    def total(self) -> int:
        return self.table + self.index_total


def write_cost(
    before: Mapping[str, Value] | None,
    after: Mapping[str, Value] | None,
    *,
    transactional: bool = False,
    indexes: Iterable[IndexDef] = INDEX_DEFS,
) -> WriteCost:
    """The cost of a write that turns ``before`` into ``after`` (``None``: no item).

    A put or update has an ``after``; a delete has none and is priced on
    ``before``.
    """
    table = write_units(max(item_size(before), item_size(after)))
    if transactional:
        table *= TRANSACTION_FACTOR
    per_index = tuple(
        (index.name, units)
        for index in indexes
        if (units := index_write_units(index, before, after))
    )
    return WriteCost(table, per_index)


def condition_check_cost(item: Mapping[str, Value] | None) -> WriteCost:
    """A ``ConditionCheck`` in a transaction: a transactional write of the item checked."""
    return WriteCost(write_units(item_size(item)) * TRANSACTION_FACTOR)
