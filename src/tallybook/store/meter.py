"""The capacity meter: every storage call priced by DynamoDB's rules.

:class:`CapacityMeter` turns what an engine read and wrote into capacity
units with :mod:`tallybook.store.capacity`. A write is priced on the item
before and after it, so the meter keeps a bounded cache of the item images
the engine has read or written (the posting engine reads every head it
updates); an update's after image is the before image with the typed updates
applied (:func:`~tallybook.store.evaluate.apply_updates`). A put whose
condition requires the item to be absent needs no before image. When the
before image is unknown the write is priced as if the item were new (a lower
bound) and counted in :attr:`Price.estimated`. A write whose condition
fails is charged by AWS all the same (:meth:`CapacityMeter.failed_write`).

The DynamoDB engine prices every request it sends (:mod:`.dynamodb`);
:class:`~tallybook.store.metered.MeteredStore` puts the same meter in front
of any engine, so the SQLite engine's layout can be priced too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tallybook.errors import StoreValidationError
from tallybook.store import capacity
from tallybook.store.evaluate import apply_updates
from tallybook.store.port import (
    INDEX_DEFS,
    KEY_ATTRS,
    Action,
    And,
    Condition,
    ConditionCheck,
    Delete,
    IndexDef,
    Item,
    Key,
    NotExists,
    Put,
    StoreMetrics,
    Update,
    Value,
    action_key,
    key_of,
)

#: item images kept for pricing updates (least recently used dropped first)
DEFAULT_CACHE_ITEMS = 10_000


@dataclass(frozen=True, slots=True)
class Price:
    """Capacity units of one request, by DynamoDB's rules."""

    read_units: float = 0.0
    #: table and index writes together
    write_units: float = 0.0
    index_write_units: float = 0.0
    #: items written whose before image was unknown (priced as new items)
    estimated: int = 0


@dataclass(frozen=True, slots=True)
class ItemCost:
    """One item's share of a write, and whether its before image was known."""

    key: Key
    cost: capacity.WriteCost
    known: bool


def is_transactional(actions: Sequence[Action], token: str | None) -> bool:
    """Whether an engine sends ``actions`` as ``TransactWriteItems``.

    A single put, update or delete without a token goes as a plain
    ``PutItem`` / ``UpdateItem`` / ``DeleteItem`` (half the write units).
    """
    return not (len(actions) == 1 and token is None and not isinstance(actions[0], ConditionCheck))


def requires_absent(condition: Condition | None) -> bool:
    """Whether a write that succeeded under ``condition`` found no item."""
    match condition:
        case NotExists(attr):
            return attr in KEY_ATTRS
        case And(conditions):
            return any(requires_absent(c) for c in conditions)
    return False


class CapacityMeter:
    """Prices reads and writes; remembers item images to price later updates."""

    def __init__(
        self, indexes: Iterable[IndexDef] = INDEX_DEFS, cache_items: int = DEFAULT_CACHE_ITEMS
    ) -> None:
        self.indexes = tuple(indexes)
        self.cache_items = cache_items
        self._images: OrderedDict[Key, Item | None] = OrderedDict()
        self._lock = threading.Lock()

    # -- the image cache ------------------------------------------------------

    def remember(self, key: Key, item: Mapping[str, Value] | None) -> None:
        """Note ``item`` as the image at ``key`` (``None``: no item there)."""
        with self._lock:
            self._images[key] = _copy(item) if item is not None else None
            self._images.move_to_end(key)
            while len(self._images) > self.cache_items:
                self._images.popitem(last=False)

    def forget(self, keys: Iterable[Key]) -> None:
        """Drop images that may be stale (after a failed or uncertain write)."""
        with self._lock:
            for key in keys:
                self._images.pop(key, None)

    def image(self, key: Key) -> tuple[bool, Item | None]:
        """Whether the image at ``key`` is known, and the image."""
        with self._lock:
            if key not in self._images:
                return False, None
            self._images.move_to_end(key)
            return True, self._images[key]

    # -- reads ---------------------------------------------------------------

    def get(self, key: Key, item: Item | None, *, consistent: bool = True) -> Price:
        self.remember(key, item)
        return Price(capacity.read_units(capacity.item_size(item), consistent=consistent))

    def query(
        self, items: Sequence[Item], *, index: str | None = None, consistent: bool = True
    ) -> Price:
        """One Query request returning ``items`` (an index is read eventually consistent)."""
        if index is None:
            for item in items:
                self.remember(key_of(item), item)
        return Price(capacity.query_units(items, consistent=consistent and index is None))

    def batch_get(
        self, items: Sequence[Item], missing: int = 0, *, consistent: bool = True
    ) -> Price:
        """One BatchGetItem request: ``items`` found, ``missing`` keys not found."""
        for item in items:
            self.remember(key_of(item), item)
        units = capacity.batch_get_units(items, consistent=consistent)
        units += missing * capacity.read_units(0, consistent=consistent)
        return Price(units)

    # -- writes --------------------------------------------------------------

    def write(self, actions: Sequence[Action], *, transactional: bool) -> Price:
        """A successful write of ``actions``; the cache learns the after images."""
        costs = self.item_costs(actions, transactional=transactional, learn=True)
        return Price(
            0.0,
            float(sum(c.cost.total for c in costs)),
            float(sum(c.cost.index_total for c in costs)),
            sum(0 if c.known else 1 for c in costs),
        )

    def failed_write(self, actions: Sequence[Action], *, transactional: bool) -> Price:
        """A write that a failed condition cancelled, priced as AWS charges it.

        A conditional ``PutItem`` / ``UpdateItem`` / ``DeleteItem`` whose
        condition is false still consumes write units for the larger of the
        item there and the item it would have become (1 WCU when neither
        exists); a cancelled ``TransactWriteItems`` still consumes the two
        underlying writes (prepare and commit) of every item. Nothing reaches
        an index, so no index units. The item found may be unknown (a put
        that required the item to be absent found one): it is priced as the
        item sent and counted in :attr:`Price.estimated`.
        """
        factor = capacity.TRANSACTION_FACTOR if transactional else 1
        units = estimated = 0
        for action in actions:
            known, before = self.image(action_key(action))
            if isinstance(action, ConditionCheck):
                units += capacity.condition_check_cost(before).table
            else:
                after = self._after(action, action_key(action), before)
                size = max(capacity.item_size(before), capacity.item_size(after))
                units += capacity.write_units(size) * factor
            estimated += 0 if known else 1
        return Price(0.0, float(units), 0.0, estimated)

    def item_costs(
        self, actions: Sequence[Action], *, transactional: bool, learn: bool = False
    ) -> list[ItemCost]:
        """What each action of a write costs; with ``learn`` the cache takes the after images."""
        out: list[ItemCost] = []
        for action in actions:
            if isinstance(action, ConditionCheck):
                known, before = self.image(action.key)
                out.append(ItemCost(action.key, capacity.condition_check_cost(before), known))
                continue
            key = key_of(action.item) if isinstance(action, Put) else action.key
            known, before = self.image(key)
            if isinstance(action, Put) and requires_absent(action.condition):
                known, before = True, None
            after = self._after(action, key, before)
            cost = capacity.write_cost(
                before, after, transactional=transactional, indexes=self.indexes
            )
            out.append(ItemCost(key, cost, known))
            if learn:
                self.remember(key, after)
        return out

    def batch_write(self, puts: Sequence[Item], deletes: Sequence[Key]) -> Price:
        """One BatchWriteItem request (standard writes)."""
        actions: list[Action] = [Put(i) for i in puts]
        actions += [Delete(k) for k in deletes]
        return self.write(actions, transactional=False)

    @staticmethod
    def _after(action: Put | Update | Delete, key: Key, before: Item | None) -> Item | None:
        if isinstance(action, Put):
            return action.item
        if isinstance(action, Delete):
            return None
        try:
            return apply_updates(before, key, action.updates)
        except StoreValidationError:  # the engine refused it too; price the key alone
            return key.as_item()


def _copy(item: Mapping[str, Value]) -> Item:
    """A copy of ``item`` sharing no list or map with it (callers may mutate theirs)."""
    return {name: _copy_value(v) for name, v in item.items()}


def _copy_value(value: Value) -> Value:
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    return value


def record_price(metrics: StoreMetrics, operation: str, price: Price) -> None:
    """Add ``price`` to ``metrics`` under ``operation``."""
    metrics.price(
        operation,
        read_units=price.read_units,
        write_units=price.write_units,
        index_write_units=price.index_write_units,
        estimated=price.estimated,
    )
