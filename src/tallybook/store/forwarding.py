"""The one base of every store wrapper: each port call goes on to a wrapped store.

:class:`ForwardingStore` forwards every call of the port to ``inner`` and
shares its metrics, so a wrapper overrides only what it changes: the lagging
indexes (:mod:`.lagging`), pricing (:mod:`.metered`) and fault injection
(:mod:`tallybook.reliability.faults`). Reads go through :meth:`around_read`,
one hook for a wrapper that does the same thing before any read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from tallybook.store.port import Action, Item, ItemStore, Key, Page, Query

T = TypeVar("T")


class ForwardingStore(ItemStore):
    """``inner``, call for call (subclass it to change some calls)."""

    def __init__(self, inner: ItemStore) -> None:
        self.inner = inner
        self.metrics = inner.metrics

    def read_ttl_by(self, now: Callable[[], datetime]) -> None:
        super().read_ttl_by(now)
        self.inner.read_ttl_by(now)

    def around_read(self, read: Callable[[], T]) -> T:
        """Runs every read (``get``, ``batch_get``, a query); the default just runs it."""
        return read()

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        return self.around_read(lambda: self.inner.get(key, consistent=consistent))

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        return self.around_read(lambda: self.inner.batch_get(keys, consistent=consistent))

    def run_query(self, q: Query) -> Page:
        return self.around_read(lambda: self.inner.run_query(q))

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        self.inner.transact_write(actions, token=token)

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        self.inner.batch_write(puts, deletes)

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> str:
        return self.inner.describe()

    def durability(self) -> str:
        return self.inner.durability()
