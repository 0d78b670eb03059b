"""A store wrapper whose global secondary indexes lag behind the table (for tests).

DynamoDB's GSIs are eventually consistent: an index query may miss an item
written a moment ago, or still show an item as it was before a write (or after
its delete). SQLite and DynamoDB Local update their indexes at once, so no test
would see what lag does. :class:`LaggingStore` hides every index change from
index queries until ``lag`` later calls have gone through the wrapper, or until
:meth:`LaggingStore.flush`; with ``lag=None`` only a flush shows them.

Reads of the table itself (``get``, ``batch_get``, a query without ``index``)
pass through unchanged. A write remembers, per item it touches whose index
attributes change, the item as the indexes last showed it; an index query then
answers from the inner store's index with those items put back as they were.
It reads each written item before and after the write, so it is meant for
tests, not for production.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tallybook.store.evaluate import is_expired
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import (
    INDEX_ATTRS,
    INDEXES,
    Action,
    Item,
    ItemStore,
    Key,
    Page,
    Query,
    action_key,
    key_of,
)

T = TypeVar("T")


@dataclass(slots=True)
class _Stale:
    #: the item as the indexes show it (``None``: not there)
    shown: Item | None
    #: the call count from which the write becomes visible (``None``: at a flush)
    due: int | None


def _index_part(item: Item | None) -> dict[str, object]:
    return {} if item is None else {a: item[a] for a in INDEX_ATTRS if a in item}


class LaggingStore(ForwardingStore):
    """``inner`` with index changes hidden for ``lag`` later calls (module docstring)."""

    def __init__(self, inner: ItemStore, lag: int | None = None) -> None:
        super().__init__(inner)
        self.lag = lag
        self.calls = 0
        self._stale: dict[Key, _Stale] = {}

    def flush(self) -> None:
        """Let the indexes catch up with every write so far."""
        self._stale.clear()

    @property
    def pending(self) -> int:
        """How many written items the indexes do not show as they are yet."""
        self._tick(count=False)
        return len(self._stale)

    def _tick(self, count: bool = True) -> None:
        if count:
            self.calls += 1
        for key in [k for k, s in self._stale.items() if s.due is not None and s.due <= self.calls]:
            del self._stale[key]

    # -- writes ---------------------------------------------------------------

    def _written(self, keys: Sequence[Key], write: Callable[[], None]) -> None:
        before = {k: self.inner.get(k) for k in keys if k not in self._stale}
        write()
        due = None if self.lag is None else self.calls + self.lag
        for key in keys:
            stale = self._stale.get(key)
            if stale is not None:
                stale.due = due
                continue
            shown = before[key]
            if _index_part(shown) != _index_part(self.inner.get(key)):
                self._stale[key] = _Stale(shown, due)

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        self._tick()
        keys = [action_key(a) for a in actions]
        self._written(keys, lambda: self.inner.transact_write(actions, token=token))

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        self._tick()
        keys = [key_of(i) for i in puts] + list(deletes)
        self._written(keys, lambda: self.inner.batch_write(puts, deletes))

    # -- reads ----------------------------------------------------------------

    def around_read(self, read: Callable[[], T]) -> T:
        self._tick()
        return read()

    def run_query(self, q: Query) -> Page:
        self._tick()
        if q.index is None or not self._stale:
            return self.inner.run_query(q)
        return self._lagging_query(q, q.index)

    def _lagging_query(self, q: Query, index: str) -> Page:
        partition, sort, forward, limit, cursor = q.partition, q.sort, q.forward, q.limit, q.cursor
        hash_attr, range_attr = INDEXES[index]
        shown = [
            i
            for i in self.inner.query_all(partition, sort, index=index)
            if key_of(i) not in self._stale
        ]
        for stale in self._stale.values():
            item = stale.shown
            if (
                item is not None
                and item.get(hash_attr) == partition
                and isinstance(item.get(range_attr), str)
                and (sort is None or sort.matches(str(item[range_attr])))
                and not is_expired(item, self.ttl_now())
            ):
                shown.append(item)

        def order(item: Item) -> tuple[bytes, str, str]:
            return (str(item[range_attr]).encode(), str(item["pk"]), str(item["sk"]))

        shown.sort(key=order, reverse=not forward)
        if cursor is not None:
            after = tuple(json.loads(cursor))
            after_key = (after[0].encode(), after[1], after[2])
            shown = [
                i for i in shown if (order(i) > after_key) == forward and order(i) != after_key
            ]
        if limit is None or len(shown) <= limit:
            return Page(shown)
        last = order(shown[limit - 1])
        return Page(shown[:limit], json.dumps([last[0].decode(), last[1], last[2]]))

    def describe(self) -> str:
        return f"lagging({self.inner.describe()})"
