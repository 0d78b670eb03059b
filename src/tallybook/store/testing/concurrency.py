"""Storage-port contract: concurrent writers, and the request metrics."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tallybook.errors import ConditionFailed, TransactionConflict
from tallybook.store.port import (
    Add,
    Compare,
    ItemStore,
    NotExists,
    Set,
    SortCondition,
    Update,
)
from tallybook.store.testing.helpers import PK, item, key

THREADS = 8


def _backoff() -> None:
    time.sleep(random.uniform(0, 0.004))


class ConcurrencyContract:
    """The contract's concurrency and metrics cases; every test takes the ``store`` fixture."""

    def test_concurrent_read_modify_write_loses_no_update(self, store: ItemStore) -> None:
        store.put(item("counter", n=0))
        per_thread = 25
        barrier = threading.Barrier(THREADS)

        def worker() -> tuple[int, int]:
            successes = failures = 0
            barrier.wait()
            while successes < per_thread:
                assert failures < 5_000, "no progress"
                current = store.get(key("counter"))
                assert current is not None
                v = current["n"]
                assert isinstance(v, int)
                try:
                    store.update(key("counter"), [Set("n", v + 1)], Compare("n", "=", v))
                except (ConditionFailed, TransactionConflict):
                    failures += 1
                    _backoff()
                    continue
                successes += 1
            return successes, failures

        with ThreadPoolExecutor(THREADS) as pool:
            results = [f.result() for f in [pool.submit(worker) for _ in range(THREADS)]]
        successes = sum(s for s, _ in results)
        assert successes == THREADS * per_thread == 200
        assert store.get(key("counter")) == item("counter", n=successes)

    def test_racing_puts_if_not_exists_have_exactly_one_winner(self, store: ItemStore) -> None:
        barrier = threading.Barrier(THREADS)

        def worker(n: int) -> str:
            barrier.wait()
            try:
                store.put(item("race", owner=n), NotExists("pk"))
            except ConditionFailed as exc:
                return f"lost {exc.reasons}"
            return "won"

        with ThreadPoolExecutor(THREADS) as pool:
            outcomes = list(pool.map(worker, range(THREADS)))
        assert outcomes.count("won") == 1
        assert outcomes.count("lost ['ConditionalCheckFailed']") == THREADS - 1
        winner = outcomes.index("won")
        assert store.get(key("race")) == item("race", owner=winner)

    def test_concurrent_transfers_are_atomic_and_respect_conditions(self, store: ItemStore) -> None:
        store.put(item("from", bal=40))
        store.put(item("to", bal=0))
        barrier = threading.Barrier(THREADS)

        def worker() -> tuple[int, int | None]:
            moved = 0
            barrier.wait()
            for _ in range(200):
                try:
                    store.transact_write(
                        [
                            Update(key("from"), (Add("bal", -1),), Compare("bal", ">=", 1)),
                            Update(key("to"), (Add("bal", 1),)),
                        ]
                    )
                except TransactionConflict:
                    _backoff()
                    continue
                except ConditionFailed as exc:
                    return moved, exc.index  # the source ran dry
                moved += 1
            return moved, None

        with ThreadPoolExecutor(THREADS) as pool:
            results = [f.result() for f in [pool.submit(worker) for _ in range(THREADS)]]
        assert [failed_at for _, failed_at in results] == [0] * THREADS
        assert sum(moved for moved, _ in results) == 40
        assert store.get(key("from")) == item("from", bal=0)
        assert store.get(key("to")) == item("to", bal=40)

    # --- metrics ---------------------------------------------------------------
    def test_metrics_count_requests_and_reset(self, store: ItemStore) -> None:
        store.metrics.reset()
        assert store.metrics.requests == 0
        before = store.metrics.requests
        steps: list[Callable[[], object]] = [
            lambda: store.put(item("m", n=1)),
            lambda: store.get(key("m")),
            lambda: store.update(key("m"), [Add("n", 1)]),
            lambda: store.query(PK, SortCondition.begins_with("m")),
            lambda: store.batch_get([key("m")]),
            lambda: store.batch_write(puts=[item("m2")]),
            lambda: store.delete(key("m2")),
        ]
        for step in steps:
            step()
            assert store.metrics.requests > before
            before = store.metrics.requests
        with contextlib.suppress(ConditionFailed):
            store.put(item("m", n=0), NotExists("pk"))
        assert store.metrics.requests > before  # a refused write is still a request
        assert sum(s.failed for s in store.metrics.snapshot().values()) == 1
        assert store.metrics.snapshot()
        store.metrics.reset()
        assert store.metrics.requests == 0
        assert store.metrics.snapshot() == {}
        store.get(key("m"))
        assert store.metrics.requests >= 1
