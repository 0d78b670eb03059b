"""Fault injection at the storage port: one :class:`ItemStore` wrapper, two ways.

**Random plans** (the torture run): each call to the wrapped store may, with
the plan's probabilities (seeded RNG):

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

**One-shot arming** (tests of one step): :meth:`FaultyStore.lose_response`
and :meth:`FaultyStore.fail_request` make the next matching writes be applied
then fail, or fail unapplied; :meth:`FaultyStore.crash_at` kills the caller
(:class:`Crash`, a ``BaseException`` no ``except Exception`` swallows) at
its n-th storage call, before the call or after a write is applied.

A caller cannot tell a lost request from a lost response; retrying with the
same idempotency key must be safe in both cases (invariant 3).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from tallybook.errors import StoreError, StoreUnavailable, Throttled, TransactionConflict
from tallybook.store.forwarding import ForwardingStore
from tallybook.store.port import Action, Item, ItemStore, Key, action_key

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


T = TypeVar("T")
Match = Callable[[Sequence[Action]], bool]
CrashMode = Literal["before", "after"]


class Crash(BaseException):
    """A simulated process death at a storage call (see :meth:`FaultyStore.crash_at`)."""


def any_write(actions: Sequence[Action]) -> bool:
    return True


def touches(pk_prefix: str) -> Match:
    """A matcher for transactions that write an item whose pk starts with ``pk_prefix``."""

    def match(actions: Sequence[Action]) -> bool:
        return any(action_key(a).pk.startswith(pk_prefix) for a in actions)

    return match


def timeout() -> StoreError:
    return StoreUnavailable("timed out waiting for the store's response")


@dataclass
class _Armed:
    apply_first: bool
    remaining: int
    match: Match
    error: Callable[[], StoreError]


class FaultyStore(ForwardingStore):
    """Delegates to ``inner``; injects the plan's random faults and the armed
    one-shot faults, and counts them (``counts`` by kind, ``fired`` for armed
    ones). With ``record_writes`` it keeps the keys of every transaction that
    reached the store, in order (``written``)."""

    def __init__(
        self, inner: ItemStore, plan: FaultPlan | None = None, *, record_writes: bool = False
    ) -> None:
        super().__init__(inner)
        self.plan = plan or FaultPlan.none()
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(self.plan.seed)
        self._lock = threading.Lock()
        self._burst_left = 0
        #: random faults stop while False (setup and the final check use the same store)
        self.armed = True
        self._one_shots: list[_Armed] = []
        #: how many armed faults fired (lost responses and failed requests)
        self.fired = 0
        self.record_writes = record_writes
        self.written: list[list[Key]] = []
        self._crash_at: int | None = None
        self._crash_mode: CrashMode = "before"
        self._crash_reads = True
        #: storage calls counted towards :meth:`crash_at` (writes only in "after" mode)
        self.calls = 0

    # -- one-shot arming ------------------------------------------------------

    def lose_response(
        self, times: int = 1, *, match: Match = any_write, error: Callable[[], StoreError] = timeout
    ) -> None:
        """The next ``times`` matching writes are applied, then raise ``error``."""
        with self._lock:
            self._one_shots.append(_Armed(True, times, match, error))

    def fail_request(
        self, times: int = 1, *, match: Match = any_write, error: Callable[[], StoreError] = timeout
    ) -> None:
        """The next ``times`` matching writes are not applied and raise ``error``."""
        with self._lock:
            self._one_shots.append(_Armed(False, times, match, error))

    def crash_at(self, at: int, mode: CrashMode = "before", *, reads: bool = True) -> None:
        """Raise :class:`Crash` at storage call ``at`` from now.

        ``"before"`` counts every call and crashes before it reaches the store;
        ``"after"`` counts writes only and crashes once the write is applied,
        before the caller sees the answer (an acknowledgement lost with the
        process). A read has no effect, so losing its answer is the same crash
        as dying just before it, which ``"before"`` covers.

        ``reads=False`` counts writes only in ``"before"`` mode too: dying before
        a read leaves what dying before the next write leaves (or, after the last
        write, what ``"after"`` at that write leaves), so a test walking every
        crash point of a read-heavy flow can skip those repeats.
        """
        with self._lock:
            self._crash_at, self._crash_mode, self.calls = at, mode, 0
            self._crash_reads = reads

    def disarm(self) -> None:
        """Drop the armed one-shot faults and crash (the random plan stays)."""
        with self._lock:
            self._one_shots.clear()
            self._crash_at = None

    def _take(self, actions: Sequence[Action]) -> _Armed | None:
        with self._lock:
            for fault in self._one_shots:
                if fault.remaining > 0 and fault.match(actions):
                    fault.remaining -= 1
                    self.fired += 1
                    return fault
        return None

    def _crash_before(self, write: bool) -> None:
        with self._lock:
            counted = write or (self._crash_mode == "before" and self._crash_reads)
            if self._crash_at is None or not counted:
                return
            self.calls += 1
            if self._crash_mode == "before" and self.calls == self._crash_at:
                raise Crash(f"crash before storage call {self.calls}")

    def _crash_after(self, write: bool) -> None:
        if write and self._crash_mode == "after" and self._crash_at == self.calls:
            raise Crash(f"crash after storage write {self.calls}")

    # -- random faults --------------------------------------------------------

    def _roll(self, p: float) -> bool:
        if p <= 0 or not self.armed:
            return False
        with self._lock:
            return self._rng.random() < p

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1

    def _before_call(self, write: bool = False) -> None:
        self._crash_before(write)
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

    def around_read(self, read: Callable[[], T]) -> T:
        self._before_call()
        return read()

    # -- the port -------------------------------------------------------------

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        self._before_call(write=True)
        if self._roll(self.plan.error_before):
            self._count("error_before")
            raise StoreUnavailable("injected: the request did not reach the store")
        if self._roll(self.plan.conflict):
            self._count("conflict")
            raise TransactionConflict("injected: a concurrent transaction touched the same items")
        armed = self._take(actions)
        if armed is not None and not armed.apply_first:
            raise armed.error()
        self.inner.transact_write(actions, token=token)
        if self.record_writes:
            with self._lock:
                self.written.append([action_key(a) for a in actions])
        self._crash_after(write=True)
        if armed is not None:
            raise armed.error()
        if self._roll(self.plan.error_after):
            self._count("error_after")
            raise StoreUnavailable("injected: timed out waiting for the store's response")

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        self._before_call(write=True)
        self.inner.batch_write(puts, deletes)
        self._crash_after(write=True)
