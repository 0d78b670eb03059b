"""In-memory engine: the port's semantics in Python dicts, for tests and experiments.

Nothing is written anywhere: the data lives in this process and is gone when
it exits (or when the last reference to the store goes). It mirrors the SQLite
engine exactly, sharing its building blocks: the same checks before anything
is written (:mod:`.checks`), conditions and updates decided by
:mod:`.evaluate`, cursors from :mod:`.queries`, sparse indexes ``gsi1`` and
``gsi2`` (an item is in an index only with both of its key attributes), TTL
filtering on every read and condition, the same batch chunks (100 keys, 25
writes) and the same request metrics. One lock serialises every call, so
threads see each transaction whole.

Items are kept serialised (with marshal: see :func:`_encode`), as SQLite keeps
them as JSON: a caller can never mutate a stored item through a dict it passed
in or got back, and an update's size check bounds the stored item from its
stored length, as SQLite's does.
"""

from __future__ import annotations

import bisect
import json
import marshal
import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

from tallybook.errors import TallybookError
from tallybook.store.checks import (
    Checked,
    check_actions,
    check_batch_write,
    check_key,
    check_updated,
)
from tallybook.store.evaluate import apply_updates, cancelled, evaluate
from tallybook.store.port import (
    INDEXES,
    TTL_ATTR,
    Action,
    Delete,
    Item,
    ItemStore,
    Key,
    Page,
    Put,
    Query,
    SortCondition,
    StoreMetrics,
    Update,
)
from tallybook.store.queries import shape

#: marshal's version 2 writes every value in full (version 3 added
#: back-references to repeated objects), which is what makes twice a body's
#: length a bound of its item's size (:func:`_size_bound`)
_MARSHAL_VERSION = 2


def _encode(item: Item) -> bytes:
    """An item's stored body: a deep, immutable copy, decoded by :func:`_decode`.

    marshal, not JSON as on SQLite: the engine's bodies never leave the process,
    and marshal writes and reads them in a third to a half of JSON's
    instructions (a posting writes four and reads two). A subclass of ``str`` or
    ``int`` (an enum member), which the port accepts and marshal refuses, is
    stored as its plain value, as JSON stores it on the other engines."""
    try:
        return marshal.dumps(item, _MARSHAL_VERSION)
    except ValueError:
        return marshal.dumps(json.loads(json.dumps(item)), _MARSHAL_VERSION)


def _decode(body: bytes) -> Item:
    # only ever bytes this engine wrote itself: nothing from outside is unmarshalled
    item: Item = marshal.loads(body)  # noqa: S302
    return item


def _size_bound(body: bytes) -> int:
    """An upper bound of :func:`~tallybook.store.checks.item_size` for the item
    stored as ``body``: twice its length. In marshal's version 2 a string takes
    5 bytes more than its UTF-8 text, a number 5 bytes (up to 10 digits, whose
    size is at most 6) or 5 plus 2 per 15 bits, ``true``, ``false`` and null 1
    byte, a list 5 bytes and a map 2 bytes more than their contents: every
    value's size is at most twice its length."""
    return 2 * len(body)


#: what a sort position is: (sort value, pk, sk); on the table the sort value is sk
_Position = tuple[str, str, str]


class _Row(NamedTuple):
    """A stored item: its body and what the engine looks up without decoding it.

    A named tuple rather than a frozen dataclass: as immutable, and built for
    every item written at a fraction of the cost (a posting writes four)."""

    body: bytes
    ttl: int | None
    #: (index name, partition, sort value) of each index the item is in
    indexed: tuple[tuple[str, str, str], ...]

    def live(self, now: int) -> bool:
        return self.ttl is None or self.ttl > now

    def item(self) -> Item:
        return _decode(self.body)


def _row(item: Item) -> _Row:
    ttl = item.get(TTL_ATTR)
    indexed: list[tuple[str, str, str]] = []
    for name, (hash_attr, range_attr) in INDEXES.items():
        part, sort = item.get(hash_attr), item.get(range_attr)
        if isinstance(part, str) and isinstance(sort, str):
            indexed.append((name, part, sort))
    return _Row(
        _encode(item),
        ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else None,
        tuple(indexed),
    )


class _Table:
    """Rows by key, with every partition of the table and of each index kept
    sorted by (sort value, pk, sk): Python orders strings by code point, which
    is the UTF-8 byte order DynamoDB and SQLite use."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], _Row] = {}
        self.partitions: dict[tuple[str | None, str], list[_Position]] = {}

    def put(self, pk: str, sk: str, row: _Row) -> None:
        old = self.rows.get((pk, sk))
        if old is not None and old.indexed == row.indexed:
            # an item rewritten in place (a head): its positions are unchanged
            self.rows[(pk, sk)] = row
            return
        self.delete(pk, sk)
        self.rows[(pk, sk)] = row
        bisect.insort(self.partitions.setdefault((None, pk), []), (sk, pk, sk))
        for name, part, sort in row.indexed:
            bisect.insort(self.partitions.setdefault((name, part), []), (sort, pk, sk))

    def delete(self, pk: str, sk: str) -> None:
        row = self.rows.pop((pk, sk), None)
        if row is None:
            return
        self._unlist((None, pk), (sk, pk, sk))
        for name, part, sort in row.indexed:
            self._unlist((name, part), (sort, pk, sk))

    def _unlist(self, partition: tuple[str | None, str], position: _Position) -> None:
        positions = self.partitions[partition]
        del positions[bisect.bisect_left(positions, position)]
        if not positions:
            del self.partitions[partition]


class MemoryStore(ItemStore):
    """The in-memory engine; ``name`` only labels it (``memory://NAME``)."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        #: a change hook, as the SQLite engine's: given the new image of every item
        #: a transaction puts or updates, the extra items to insert in that same
        #: transaction (an item already at their key is kept)
        self.capture: Callable[[Sequence[Item]], list[Item]] | None = None
        self.metrics = StoreMetrics()
        self._table = _Table()
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"memory://{self.name}"

    def durability(self) -> str:
        return "none: the data lives in this process's memory and is lost when it exits"

    # -- reads --------------------------------------------------------------

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        check_key(key)
        with self._lock:
            self.metrics.record("get")
            row = self._table.rows.get((key.pk, key.sk))
            return row.item() if row is not None and row.live(self.ttl_now()) else None

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        out: list[Item] = []
        for start in range(0, len(keys), 100):
            chunk = keys[start : start + 100]
            for k in chunk:
                check_key(k)
            with self._lock:
                self.metrics.record("batch_get")
                now = self.ttl_now()
                rows = [self._table.rows.get((k.pk, k.sk)) for k in dict.fromkeys(chunk)]
                out.extend(r.item() for r in rows if r is not None and r.live(now))
        return out

    def run_query(self, q: Query) -> Page:
        shaped = shape(q)
        after: _Position | None = None
        if shaped.after is not None:
            last = shaped.after
            after = (last[shaped.sk_attr], last["pk"], last["sk"])
        with self._lock:
            self.metrics.record("query")
            positions = self._table.partitions.get((q.index, q.partition), [])
            items = self._page(positions, q.sort, q.forward, q.limit, after)
        return shaped.page(items)

    def _page(
        self,
        positions: list[_Position],
        sort: SortCondition | None,
        forward: bool,
        limit: int | None,
        after: _Position | None,
    ) -> list[Item]:
        """Up to ``limit + 1`` live items past ``after`` in the query's order."""
        if after is None:
            ordered = positions if forward else reversed(positions)
        elif forward:
            ordered = positions[bisect.bisect_right(positions, after) :]
        else:
            ordered = reversed(positions[: bisect.bisect_left(positions, after)])
        now = self.ttl_now()
        out: list[Item] = []
        for sort_value, pk, sk in ordered:
            if sort is not None and not sort.matches(sort_value):
                continue
            row = self._table.rows[(pk, sk)]
            if row.live(now):
                out.append(row.item())
                if limit is not None and len(out) > limit:
                    break
        return out

    # -- writes -------------------------------------------------------------

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        checked = check_actions(actions)
        with self._lock:
            self.metrics.record("transact_write")
            try:
                self._apply(actions, checked)
            except TallybookError:
                self.metrics.stat("transact_write").failed += 1
                raise

    def _apply(self, actions: Sequence[Action], checked: Checked) -> None:
        """Check every condition against the live items, then write all or nothing.

        A stored item is decoded at most once, and only when a condition or an
        update reads it (a put that must create its item finds none)."""
        now = self.ttl_now()
        keys = checked.keys
        current: list[_Row | None] = []
        items: list[Item | None] = []
        reasons: list[str | None] = []
        for action, key in zip(actions, keys, strict=True):
            row = self._table.rows.get((key.pk, key.sk))
            row = row if row is not None and row.live(now) else None
            item = None
            if row is not None and (action.condition is not None or isinstance(action, Update)):
                item = row.item()
            current.append(row)
            items.append(item)
            ok = action.condition is None or evaluate(action.condition, item)
            reasons.append(None if ok else "ConditionalCheckFailed")
        if any(reasons):
            raise cancelled(reasons)
        writes: list[tuple[Key, Item | None]] = []
        for action, key, row, item, sets_bound in zip(
            actions, keys, current, items, checked.sets_bounds, strict=True
        ):
            if isinstance(action, Put):
                writes.append((key, action.item))
            elif isinstance(action, Update):
                new = apply_updates(item, key, action.updates)
                check_updated(
                    new,
                    action.updates,
                    None if row is None else _size_bound(row.body),
                    sets_bound,
                )
                writes.append((key, new))
            elif isinstance(action, Delete):
                writes.append((key, None))
        written = [item for _, item in writes if item is not None]
        extras = self.capture(written) if self.capture is not None and written else []
        rows = [(key, None if item is None else _row(item)) for key, item in writes]
        extra_rows = [(str(e["pk"]), str(e["sk"]), _row(e)) for e in extras]
        # nothing can fail from here on: the transaction applies whole
        for key, row in rows:
            if row is None:
                self._table.delete(key.pk, key.sk)
            else:
                self._table.put(key.pk, key.sk, row)
        for pk, sk, row in extra_rows:
            if (pk, sk) not in self._table.rows:
                self._table.put(pk, sk, row)

    def _write(self, key: Key, item: Item | None) -> None:
        if item is None:
            self._table.delete(key.pk, key.sk)
        else:
            self._table.put(key.pk, key.sk, _row(item))

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        check_batch_write(puts, deletes)
        ops: list[tuple[Key, Item | None]] = [(Key(str(i["pk"]), str(i["sk"])), i) for i in puts]
        ops += [(k, None) for k in deletes]
        for start in range(0, len(ops), 25):
            with self._lock:
                self.metrics.record("batch_write")
                for key, item in ops[start : start + 25]:
                    self._write(key, item)


_NAMED: dict[str, MemoryStore] = {}
_NAMED_LOCK = threading.Lock()


def open_memory_store(name: str) -> MemoryStore:
    """The process's in-memory store called ``name`` (``memory://NAME``), made
    on first use: every opening of one URL in a process sees the same data."""
    with _NAMED_LOCK:
        store = _NAMED.get(name)
        if store is None:
            store = _NAMED[name] = MemoryStore(name)
        return store
