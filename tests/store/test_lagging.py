"""The index-lag wrapper: index queries show writes only after ``lag`` calls or a flush."""

from __future__ import annotations

import pytest

from tallybook.store.lagging import LaggingStore
from tallybook.store.port import Delete, ItemStore, Put, Set, Update
from tallybook.store.testing.helpers import PK, item, key, sks


def _indexed(sk: str, part: str = "G", order: str = "1", **attrs: object) -> dict[str, object]:
    return item(sk, gsi1pk=part, gsi1sk=order, **attrs)  # type: ignore[arg-type]


def test_a_put_shows_in_the_index_after_a_flush(store: ItemStore) -> None:
    lagging = LaggingStore(store)
    lagging.put(_indexed("a"))  # type: ignore[arg-type]
    assert lagging.get(key("a")) is not None  # the table is up to date
    assert sks(lagging.query(PK).items) == ["a"]
    assert lagging.query("G", index="gsi1").items == []
    assert lagging.pending == 1
    lagging.flush()
    assert sks(lagging.query("G", index="gsi1").items) == ["a"]


def test_updates_and_deletes_show_the_old_index_entry(store: ItemStore) -> None:
    store.batch_write(puts=[_indexed("a", "G", "1"), _indexed("b", "G", "2")])  # type: ignore[list-item]
    lagging = LaggingStore(store)
    lagging.transact_write(
        [Update(key("a"), (Set("gsi1pk", "H"),)), Delete(key("b")), Put(item("c", v=1))]
    )
    assert lagging.pending == 2  # c has no index attributes: nothing to hide
    assert sks(lagging.query("G", index="gsi1").items) == ["a", "b"]
    assert lagging.query("H", index="gsi1").items == []
    lagging.flush()
    assert lagging.query("G", index="gsi1").items == []
    assert sks(lagging.query("H", index="gsi1").items) == ["a"]


def test_changes_show_after_lag_calls(store: ItemStore) -> None:
    lagging = LaggingStore(store, lag=3)
    lagging.put(_indexed("a"))  # type: ignore[arg-type]
    assert lagging.query("G", index="gsi1").items == []  # call 1 after the write
    assert lagging.query("G", index="gsi1").items == []  # call 2
    assert sks(lagging.query("G", index="gsi1").items) == ["a"]  # call 3


@pytest.mark.parametrize("forward", [True, False])
def test_pages_over_stale_and_fresh_entries(store: ItemStore, forward: bool) -> None:
    store.batch_write(puts=[_indexed(f"s{i}", "G", f"{i:02}") for i in range(0, 10, 2)])  # type: ignore[misc]
    lagging = LaggingStore(store)
    for i in range(1, 10, 2):
        lagging.put(_indexed(f"s{i}", "G", f"{i:02}"))  # type: ignore[arg-type]
    lagging.delete(key("s4"))
    store.put(_indexed("fresh", "G", "05"))  # type: ignore[arg-type]
    got: list[str] = []
    cursor = None
    while True:
        page = lagging.query("G", index="gsi1", forward=forward, limit=2, cursor=cursor)
        got += sks(page.items)
        cursor = page.cursor
        if cursor is None:
            break
    expected = ["s0", "s2", "s4", "fresh", "s6", "s8"]  # written through the wrapper: hidden
    assert got == (expected if forward else expected[::-1])
