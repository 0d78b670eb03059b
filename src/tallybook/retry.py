"""One retry policy for every layer: bounded attempts and time, shared so retries never multiply.

A layer that retries (the DynamoDB engine on throttling, transaction conflicts
and unprocessed batch items, the SQLite engine on a locked file, the posting
engine on a version conflict, notifications on a concurrent change, billing
ingest and the wallet debit, the torture client on an ambiguous answer) runs
its loop inside :func:`retrying`. The outermost loop opens the
operation's :class:`Budget`: at most ``attempts`` sends in all and no retry
starting after ``seconds``. A loop opened inside it (the engine under a
posting) joins that budget instead of opening its own, so every send a retry
makes, at any layer, counts once against the operation's total: a posting
under the defaults sends at most 12 requests, where nested loops of 12 and 8
attempts could send 96.

A first try never costs anything, whoever makes it: an inner loop's first
send *is* the outer loop's attempt. Only a retry takes from the budget. Each
loop keeps its own backoff shape (exponential, capped, full jitter), since a
throttled DynamoDB request wants longer waits than a version conflict. The
budget travels in a :mod:`contextvars` variable: one per thread (a thread
starts without one), and nothing crosses a process or an HTTP call.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a loop retries; ``attempts`` and ``seconds`` bound a whole operation
    when this loop is the outermost one (else the outer loop's budget rules)."""

    attempts: int = 12
    seconds: float = 10.0
    base_seconds: float = 0.002
    cap_seconds: float = 0.25

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...): full jitter, capped."""
        return random.uniform(0, min(self.cap_seconds, self.base_seconds * 2 ** (retry - 1)))


class Budget:
    """The retries one operation has left and the time after which none starts."""

    def __init__(self, policy: RetryPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.retries_left = max(policy.attempts - 1, 0)
        self.deadline = clock() + policy.seconds
        #: retries taken, by every loop sharing the budget
        self.retries = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take one retry; False when none is left or the time is up."""
        with self._lock:
            if self.retries_left <= 0 or self.clock() >= self.deadline:
                return False
            self.retries_left -= 1
            self.retries += 1
            return True


_CURRENT: ContextVar[Budget | None] = ContextVar("tallybook_retry_budget", default=None)


class Tries:
    """Attempt numbers of one retry loop: 0, then one per retry the budget allows,
    after sleeping this loop's backoff delay."""

    def __init__(self, policy: RetryPolicy, budget: Budget, sleep: Callable[[float], None]) -> None:
        self.policy = policy
        self.budget = budget
        self._sleep = sleep

    def __iter__(self) -> Iterator[int]:
        yield 0
        retry = 0
        while self.budget.take():
            retry += 1
            self._sleep(self.policy.delay(retry))
            yield retry


def current_budget() -> Budget | None:
    """The budget of the operation under way in this thread, if any."""
    return _CURRENT.get()


@contextmanager
def retrying(
    policy: RetryPolicy, *, sleep: Callable[[float], None] = time.sleep
) -> Iterator[Tries]:
    """A retry loop under the operation's budget: joined if one is open, else opened here.

    Use as ``with retrying(policy) as tries: for attempt in tries: ...``; the
    loop ends when the budget is spent, and the caller raises its own error.
    """
    outer = _CURRENT.get()
    if outer is not None:
        yield Tries(policy, outer, sleep)
        return
    budget = Budget(policy)
    token = _CURRENT.set(budget)
    try:
        yield Tries(policy, budget, sleep)
    finally:
        _CURRENT.reset(token)
