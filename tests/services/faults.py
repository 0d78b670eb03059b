"""Fault injection for the storage port: a store wrapper that loses requests or responses.

``FaultyStore`` delegates every call to a real engine and, when armed, makes
the next matching ``transact_write`` fail in one of two ways:

* ``lose_response``: the write **is applied**, then the caller sees a
  timeout (``StoreUnavailable``), as when a connection drops after DynamoDB
  committed the transaction;
* ``fail_request``: the write is **not applied** and the caller sees the
  same error, as when the request never reached the store.

A caller cannot tell the two apart, which is the point: a retry with the same
transaction id must be safe in both cases. The wrapper also records the keys
every transaction wrote, so tests can see which items a workload touches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tallybook.errors import StoreError, StoreUnavailable
from tallybook.store.port import (
    Action,
    Item,
    ItemStore,
    Key,
    Page,
    SortCondition,
    action_key,
)

Match = Callable[[Sequence[Action]], bool]


def any_write(actions: Sequence[Action]) -> bool:
    return True


def touches(pk_prefix: str) -> Match:
    """A matcher for transactions that write an item whose pk starts with ``pk_prefix``."""

    def match(actions: Sequence[Action]) -> bool:
        return any(action_key(a).pk.startswith(pk_prefix) for a in actions)

    return match


@dataclass
class _Fault:
    apply_first: bool
    remaining: int
    match: Match
    error: Callable[[], StoreError]


def timeout() -> StoreError:
    return StoreUnavailable("timed out waiting for the store's response")


class FaultyStore(ItemStore):
    """An :class:`ItemStore` around a real one, with armed faults on ``transact_write``."""

    def __init__(self, inner: ItemStore) -> None:
        self.inner = inner
        self.metrics = inner.metrics
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        #: keys written by each transaction that reached the store, in order
        self.written: list[list[Key]] = []
        #: how many faults fired (lost responses and failed requests)
        self.fired = 0

    # -- arming ---------------------------------------------------------------

    def lose_response(
        self,
        times: int = 1,
        *,
        match: Match = any_write,
        error: Callable[[], StoreError] = timeout,
    ) -> None:
        """The next ``times`` matching writes are applied, then raise ``error``."""
        with self._lock:
            self._faults.append(_Fault(True, times, match, error))

    def fail_request(
        self,
        times: int = 1,
        *,
        match: Match = any_write,
        error: Callable[[], StoreError] = timeout,
    ) -> None:
        """The next ``times`` matching writes are not applied and raise ``error``."""
        with self._lock:
            self._faults.append(_Fault(False, times, match, error))

    def disarm(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take(self, actions: Sequence[Action]) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.match(actions):
                    fault.remaining -= 1
                    self.fired += 1
                    return fault
        return None

    # -- the port -------------------------------------------------------------

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        fault = self._take(actions)
        if fault is not None and not fault.apply_first:
            raise fault.error()
        self.inner.transact_write(actions, token=token)
        with self._lock:
            self.written.append([action_key(a) for a in actions])
        if fault is not None:
            raise fault.error()

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        return self.inner.get(key, consistent=consistent)

    def query(
        self,
        partition: str,
        sort: SortCondition | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        cursor: str | None = None,
        consistent: bool = True,
    ) -> Page:
        return self.inner.query(
            partition,
            sort,
            index=index,
            forward=forward,
            limit=limit,
            cursor=cursor,
            consistent=consistent,
        )

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        return self.inner.batch_get(keys, consistent=consistent)

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        self.inner.batch_write(puts, deletes)

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> str:
        return self.inner.describe()
