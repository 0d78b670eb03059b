"""Every account's changes are numbered without a gap or a double, with concurrent writers.

Threads credit, transfer, debit (some refused), place and void holds, and add
and dismiss notifications on two accounts at once. Then every change the
ledger logged (the stream on DynamoDB Local, the change log elsewhere) is
read back: each account's numbers are exactly 1..N, one change each, every
``account_previous`` names the change before, and the head holds the last.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, cast

import pytest

from tallybook.errors import InsufficientFunds, TooManyRetries
from tallybook.ledger import Ledger
from tallybook.store.records.ledger import read_head

from .test_shards import records_of

ENGINES = ["memory", "sqlite", "dynamodb"]
ACCOUNTS = ("x", "y")
THREADS = 4


def _retrying(call: Callable[[], object]) -> None:
    for _ in range(50):
        try:
            call()
            return
        except TooManyRetries:
            continue
        except InsufficientFunds:
            return  # refused: no change, no number
    raise AssertionError("no progress after 50 retries")


def _work(ledger: Ledger, thread: int, ops: int, barrier: threading.Barrier) -> None:
    rng = random.Random(thread)
    txns, wallet, notes = ledger.transactions, ledger.wallet, ledger.notifications
    barrier.wait()
    for i in range(ops):
        a = rng.choice(ACCOUNTS)
        b = "y" if a == "x" else "x"
        tag = f"{thread}-{i}"
        kind = rng.choice(["Promo", "Survey"])
        roll = rng.random()
        if roll < 0.25:
            _retrying(partial(txns.credit, "shop", a, "cash", 50, txn_id=f"c{tag}"))
        elif roll < 0.4:
            _retrying(partial(txns.transfer, "shop", a, b, "cash", 30, txn_id=f"t{tag}"))
        elif roll < 0.5:
            _retrying(partial(txns.debit, "shop", a, "points", 10, txn_id=f"d{tag}"))
        elif roll < 0.65:
            _retrying(partial(wallet.authorize, "shop", a, 20, hold_id=f"h{tag}"))
            _retrying(partial(wallet.void, "shop", f"h{tag}"))
        elif roll < 0.85:
            _retrying(partial(notes.add, "shop", a, kind, {"n": tag}))
        else:
            _retrying(partial(notes.dismiss_type, "shop", a, kind))


@pytest.mark.parametrize("engine", ENGINES)
def test_concurrent_changes_of_an_account_take_every_number_once(
    ledger: Ledger, engine: str
) -> None:
    for a in ACCOUNTS:
        ledger.accounts.open("shop", a)
        ledger.wallet.credit("shop", a, "cash", 5_000, txn_id=f"seed-{a}")
    ops = 12 if engine == "dynamodb" else 20
    barrier = threading.Barrier(THREADS)
    with ThreadPoolExecutor(THREADS) as pool:
        for f in [pool.submit(_work, ledger, n, ops, barrier) for n in range(THREADS)]:
            f.result()

    # per account: number -> (the change's first event id, its account_previous)
    changes: dict[str, dict[int, set[tuple[str, str | None]]]] = {a: {} for a in ACCOUNTS}
    for _, pairs in records_of(ledger):
        data = cast(dict[str, Any], pairs[0][0].data)
        previous = cast(dict[str, dict[str, str]], data.get("account_previous") or {})
        for account, n in cast(dict[str, int], data.get("account_seq") or {}).items():
            before = previous.get(account, {}).get("id")
            changes[account].setdefault(n, set()).add((pairs[0][0].id, before))
    for account in ACCOUNTS:
        numbered = changes[account]
        last = len(numbered)
        assert last > ops, account
        assert sorted(numbered) == list(range(1, last + 1)), account
        # a number read twice (a row written again) is the same change, not another
        assert all(len(found) == 1 for found in numbered.values()), account
        first = {n: next(iter(found))[0] for n, found in numbered.items()}
        for n, found in numbered.items():
            (_, before) = next(iter(found))
            assert before == (first[n - 1] if n > 1 else None), (account, n)
        head = read_head(ledger.store, "shop", account)
        assert head is not None
        assert (head.changes, head.last_change) == (last, first[last])
