"""The change hook of the SQLite and in-memory engines (the outbound event log rides on it):
extra items written in the same transaction, never over an item that exists."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tallybook.errors import ConditionFailed
from tallybook.store.memory import MemoryStore
from tallybook.store.port import Add, Item, ItemStore, NotExists, Put, Update
from tallybook.store.sqlite import SqliteStore
from tallybook.store.testing.helpers import item, key


@pytest.fixture(params=["sqlite", "memory"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _hooked(store: ItemStore, seen: list[list[Item]]) -> None:
    def capture(images: Sequence[Item]) -> list[Item]:
        seen.append(list(images))
        return [item(f"log#{image['sk']}", pk="LOG", n=image.get("n")) for image in images]

    assert isinstance(store, SqliteStore | MemoryStore)
    store.capture = capture


def test_the_hook_sees_new_images_and_its_items_are_written_with_them(store: ItemStore) -> None:
    seen: list[list[Item]] = []
    _hooked(store, seen)
    store.put(item("a", n=1))
    store.transact_write([Update(key("a"), (Add("n", 1),)), Put(item("b", n=5))])
    assert seen == [[item("a", n=1)], [item("a", n=2), item("b", n=5)]]
    # the first log item of "a" is kept: an existing item is never overwritten
    assert store.get(key("log#a", pk="LOG")) == item("log#a", pk="LOG", n=1)
    assert store.get(key("log#b", pk="LOG")) == item("log#b", pk="LOG", n=5)


def test_a_cancelled_transaction_writes_nothing_and_calls_no_hook(store: ItemStore) -> None:
    seen: list[list[Item]] = []
    _hooked(store, seen)
    store.put(item("a", n=1))
    with pytest.raises(ConditionFailed):
        store.transact_write([Put(item("c", n=3)), Put(item("a", n=9), NotExists("pk"))])
    assert len(seen) == 1
    assert store.get(key("c")) is None
    assert store.get(key("log#c", pk="LOG")) is None
