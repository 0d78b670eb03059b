"""The storage-port contract suite (:mod:`tallybook.store.testing`) on every
engine: SQLite, DynamoDB (when ``TALLYBOOK_TEST_DYNAMODB`` is set) and memory."""

from __future__ import annotations

import contextlib

import pytest

from tallybook.errors import ConditionFailed
from tallybook.store.port import Add, Exists, ItemStore
from tallybook.store.testing import ItemStoreContract
from tallybook.store.testing.helpers import item, key


@pytest.fixture(params=["sqlite", "dynamodb", "memory"])
def engine(request: pytest.FixtureRequest) -> str:
    """The shared ``store`` fixture (``tests/conftest.py``) on all three engines."""
    return str(request.param)


class TestContract(ItemStoreContract):
    """Every case, once per engine."""


def test_single_writes_are_counted_as_what_was_sent(engine: str, store: ItemStore) -> None:
    """DynamoDB sends one action without a token as PutItem, UpdateItem or
    DeleteItem and counts it so; SQLite and memory run every write as one transaction."""
    store.metrics.reset()
    store.put(item("w", n=1))
    store.update(key("w"), [Add("n", 1)])
    store.delete(key("w"))
    with contextlib.suppress(ConditionFailed):
        store.delete(key("w"), Exists("pk"))
    ops = store.metrics.snapshot()
    if engine == "dynamodb":
        assert (ops["put"].requests, ops["update"].requests, ops["delete"].requests) == (1, 1, 2)
        assert ops["delete"].failed == 1
        assert "transact_write" not in ops
    else:
        assert (ops["transact_write"].requests, ops["transact_write"].failed) == (4, 1)
