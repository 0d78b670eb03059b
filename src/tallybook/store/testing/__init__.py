"""The storage port's contract suite, shipped with the package so that any engine
can run it (as the ``eventsourcing`` library ships its recorder test cases).

:class:`ItemStoreContract` gathers every case as pytest test methods that take
a ``store`` fixture (an empty :class:`~tallybook.store.port.ItemStore`). An
engine is correct when it passes the whole suite unchanged. To run it on an
engine, subclass it in a test module and provide the fixture::

    from collections.abc import Iterator

    import pytest
    from tallybook.store.testing import ItemStoreContract

    class TestMyEngine(ItemStoreContract):
        @pytest.fixture
        def store(self) -> Iterator[MyEngine]:
            engine = MyEngine()
            yield engine
            engine.close()

The project runs it on SQLite, DynamoDB (Local) and the in-memory engine in
``tests/store/test_contract.py``. Importing this package needs pytest (the
``test`` extra); nothing else in ``tallybook`` imports it.
"""

from __future__ import annotations

from tallybook.store.testing.concurrency import ConcurrencyContract
from tallybook.store.testing.items import ItemsContract
from tallybook.store.testing.limits import LimitsContract
from tallybook.store.testing.query import QueryContract
from tallybook.store.testing.transactions import TransactionsContract
from tallybook.store.testing.writes import WritesContract


class ItemStoreContract(
    ItemsContract,
    QueryContract,
    WritesContract,
    TransactionsContract,
    LimitsContract,
    ConcurrencyContract,
):
    """Every case of the storage-port contract."""


__all__ = [
    "ConcurrencyContract",
    "ItemStoreContract",
    "ItemsContract",
    "LimitsContract",
    "QueryContract",
    "TransactionsContract",
    "WritesContract",
]
