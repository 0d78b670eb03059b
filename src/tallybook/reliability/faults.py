"""Fault injection at the storage port: an :class:`ItemStore` wrapper with random faults.

Each call to the wrapped store may, with the plan's probabilities (seeded RNG):

- ``slow``: sleep before the call (every kind of call);
- ``throttle``: start a burst of ``throttle_burst`` calls that raise
  :class:`Throttled` (every kind of call; the burst is shared by all threads,
  as a real capacity limit is);
- ``error_before``: a ``transact_write`` raises :class:`StoreUnavailable`
  without being applied (the request never arrived);
- ``conflict``: a ``transact_write`` raises :class:`TransactionConflict`
  without being applied;
- ``error_after``: a ``transact_write`` **is applied**, then raises
  :class:`StoreUnavailable` (the response was lost: an ambiguous outcome).

A caller cannot tell ``error_before`` from ``error_after``; retrying with the
same idempotency key must be safe in both cases (invariant 3).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tallybook.errors import StoreUnavailable, Throttled, TransactionConflict
from tallybook.store.port import Action, Item, ItemStore, Key, Page, SortCondition

FAULT_KINDS = ("error_before", "error_after", "conflict", "throttle", "slow")


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Probabilities per call; ``throttle`` is the chance a call starts a burst."""

    error_before: float = 0.0
    error_after: float = 0.0
    conflict: float = 0.0
    throttle: float = 0.0
    throttle_burst: int = 3
    slow: float = 0.0
    slow_seconds: float = 0.005
    seed: int = 0

    @staticmethod
    def none(seed: int = 0) -> FaultPlan:
        return FaultPlan(seed=seed)

    @staticmethod
    def standard(seed: int = 0) -> FaultPlan:
        """A few percent of writes fail either way; rare throttling bursts; some slow calls."""
        return FaultPlan(
            error_before=0.02,
            error_after=0.02,
            conflict=0.02,
            throttle=0.003,
            throttle_burst=3,
            slow=0.01,
            slow_seconds=0.005,
            seed=seed,
        )

    def with_seed(self, seed: int) -> FaultPlan:
        return FaultPlan(
            self.error_before,
            self.error_after,
            self.conflict,
            self.throttle,
            self.throttle_burst,
            self.slow,
            self.slow_seconds,
            seed,
        )


class FaultyStore(ItemStore):
    """Delegates to ``inner``; injects the plan's faults and counts them by kind."""

    def __init__(self, inner: ItemStore, plan: FaultPlan) -> None:
        self.inner = inner
        self.plan = plan
        self.metrics = inner.metrics
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(plan.seed)
        self._lock = threading.Lock()
        self._burst_left = 0
        #: faults stop while False (setup and the final check use the same store)
        self.armed = True

    def _roll(self, p: float) -> bool:
        if p <= 0 or not self.armed:
            return False
        with self._lock:
            return self._rng.random() < p

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1

    def _before_call(self) -> None:
        if self._roll(self.plan.slow):
            self._count("slow")
            time.sleep(self.plan.slow_seconds)
        if not self.armed:
            return
        with self._lock:
            if (
                self._burst_left == 0
                and self.plan.throttle > 0
                and self._rng.random() < self.plan.throttle
            ):
                self._burst_left = self.plan.throttle_burst
            throttled = self._burst_left > 0
            if throttled:
                self._burst_left -= 1
                self.counts["throttle"] += 1
        if throttled:
            raise Throttled("injected: the store refused the request for capacity (burst)")

    # -- the port -------------------------------------------------------------

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        self._before_call()
        if self._roll(self.plan.error_before):
            self._count("error_before")
            raise StoreUnavailable("injected: the request did not reach the store")
        if self._roll(self.plan.conflict):
            self._count("conflict")
            raise TransactionConflict("injected: a concurrent transaction touched the same items")
        self.inner.transact_write(actions, token=token)
        if self._roll(self.plan.error_after):
            self._count("error_after")
            raise StoreUnavailable("injected: timed out waiting for the store's response")

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        self._before_call()
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
        self._before_call()
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
        self._before_call()
        return self.inner.batch_get(keys, consistent=consistent)

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        self._before_call()
        self.inner.batch_write(puts, deletes)

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> str:
        return self.inner.describe()
