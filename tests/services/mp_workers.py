"""Functions run in child processes (multiprocessing with spawn) by the concurrency tests."""

from __future__ import annotations

import random

from tallybook.errors import TooManyRetries
from tallybook.ledger import Ledger


def credit_hot_account(
    url: str, program: str, account: str, txn_ids: list[str], seed: int
) -> list[tuple[str, bool]]:
    """Credit 1 to ``account`` once per id, in a shuffled order; (txn id, replay) per call.

    ``TooManyRetries`` says the engine gave up under contention and that the
    call is safe to repeat, so it is repeated with the same transaction id.
    """
    order = list(txn_ids)
    random.Random(seed).shuffle(order)
    results: list[tuple[str, bool]] = []
    with Ledger.open(url) as ledger:
        for txn_id in order:
            for _ in range(50):
                try:
                    txn = ledger.transactions.credit(program, account, "points", 1, txn_id=txn_id)
                except TooManyRetries:
                    continue
                results.append((txn_id, txn.replay))
                break
            else:
                raise AssertionError(f"{txn_id} never went through")
    return results
