"""Any engine's calls priced by DynamoDB's rules: what this layout would cost on AWS.

The DynamoDB engine prices every request itself; :func:`metered` wraps
another engine (SQLite) in :class:`MeteredStore`, which prices each port
call with the same :class:`~tallybook.store.meter.CapacityMeter` into the
inner engine's :attr:`~tallybook.store.port.ItemStore.metrics` (``priced_*``).
Benchmarks use it to price the item layout on either engine.

One difference: the DynamoDB engine prices the requests it sends (a page
asked with ``limit`` reads one item more to learn whether another page
exists), this wrapper the pages the port returns.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from tallybook.errors import ConditionFailed
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.meter import CapacityMeter, Price, is_transactional, record_price
from tallybook.store.port import Action, Item, ItemStore, Key, Page, Query, action_key, key_of


def metered(store: ItemStore) -> ItemStore:
    """``store`` priced by AWS's rules: itself if it prices its calls, else wrapped."""
    return (
        store if isinstance(getattr(store, "meter", None), CapacityMeter) else MeteredStore(store)
    )


class MeteredStore(ForwardingStore):
    """Delegates to ``inner`` and prices every call into ``inner.metrics``."""

    def __init__(self, inner: ItemStore, meter: CapacityMeter | None = None) -> None:
        super().__init__(inner)
        self.meter = meter or CapacityMeter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        """The inner engine's own attributes (``path``, ...)."""
        return getattr(self.inner, name)

    def _charge(self, operation: str, price: Price) -> None:
        with self._lock:
            record_price(self.metrics, operation, price)

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        item = self.inner.get(key, consistent=consistent)
        self._charge("get", self.meter.get(key, item, consistent=consistent))
        return item

    def run_query(self, q: Query) -> Page:
        page = self.inner.run_query(q)
        self._charge("query", self.meter.query(page.items, index=q.index, consistent=q.consistent))
        return page

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        transactional = is_transactional(actions, token)
        try:
            self.inner.transact_write(actions, token=token)
        except ConditionFailed:
            # AWS charges a write whose condition fails (CapacityMeter.failed_write)
            self._charge(
                "transact_write", self.meter.failed_write(actions, transactional=transactional)
            )
            self.meter.forget(map(action_key, actions))
            raise
        except Exception:
            self.meter.forget(map(action_key, actions))
            raise
        self._charge("transact_write", self.meter.write(actions, transactional=transactional))

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        items = self.inner.batch_get(keys, consistent=consistent)
        missing = len(set(keys)) - len(items)
        self._charge("batch_get", self.meter.batch_get(items, missing, consistent=consistent))
        return items

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        try:
            self.inner.batch_write(puts, deletes)
        except Exception:
            self.meter.forget([*(key_of(i) for i in puts), *deletes])
            raise
        self._charge("batch_write", self.meter.batch_write(puts, deletes))
