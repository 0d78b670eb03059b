"""A closed ledger (or store) refuses every later call, on each engine: it was
opened again quietly, so a ledger used after its ``with`` block, or after
``close()``, went on working (and, on SQLite, kept a connection open again)."""

from __future__ import annotations

import pytest

from tallybook.errors import NotFound, StoreClosed, StoreError
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store import keys
from tallybook.store.port import ItemStore


def test_a_ledger_used_after_close_is_refused_and_writes_nothing(
    store: ItemStore, clock: ManualClock
) -> None:
    with Ledger(store, clock=clock) as ledger:  # the documented use: closed at the end
        ledger.programs.create("shop")
        ledger.accounts.open("shop", "alice")
    calls = {
        "read": lambda: ledger.accounts.balances("shop", "alice"),
        "write": lambda: ledger.transactions.credit("shop", "alice", "cash", 5, txn_id="t-1"),
    }
    for what, call in calls.items():
        with pytest.raises(StoreClosed, match=r"^the ledger's store .* is closed") as caught:
            call()
        assert isinstance(caught.value, StoreError), what
        assert (caught.value.code, caught.value.status) == ("store-closed", 503)
    ledger.close()  # closing again is no error
    with pytest.raises(StoreClosed):  # the store itself, as the port's close() says
        store.get(keys.program("shop"))


def test_a_ledger_opened_again_after_close_works(store: ItemStore, clock: ManualClock) -> None:
    with Ledger(store, clock=clock) as ledger:
        ledger.programs.create("shop")
        ledger.accounts.open("shop", "alice")
    with pytest.raises(StoreClosed):
        ledger.transactions.credit("shop", "alice", "cash", 5, txn_id="t-1")
    with Ledger.open(store.describe(), clock=clock) as again:
        with pytest.raises(NotFound):  # the refused credit wrote nothing
            again.transactions.get("shop", "t-1")
        again.transactions.credit("shop", "alice", "cash", 5, txn_id="t-1")
        assert again.accounts.get("shop", "alice").fund("cash").balance == 5
