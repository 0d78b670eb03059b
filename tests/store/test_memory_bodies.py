"""How the in-memory engine keeps items: serialised copies (marshal), which must
behave as SQLite's JSON bodies do, and whose length bounds the item's size."""

from __future__ import annotations

from enum import IntEnum, StrEnum
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tallybook.store.checks import item_size
from tallybook.store.memory import MemoryStore, _encode, _size_bound
from tallybook.store.port import Add, Item, ItemStore, Key, Put, Set, Update, Value
from tallybook.store.sqlite import SqliteStore


class Colour(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


@pytest.mark.parametrize("engine", ["memory", "sqlite"])
def test_enum_members_are_kept_as_their_plain_values(engine: str, tmp_path: Path) -> None:
    """The port takes a str or int subclass; both engines give back the plain value."""
    store: ItemStore = MemoryStore() if engine == "memory" else SqliteStore(tmp_path / "t.db")
    store.transact_write(
        [Put({"pk": "p", "sk": "s", "colour": Colour.RED, "levels": [Level.HIGH], "n": 1})]
    )
    store.transact_write([Update(Key("p", "s"), (Set("tag", {"c": Colour.RED}), Add("n", 1)))])
    found = store.get(Key("p", "s"))
    assert found == {
        "pk": "p",
        "sk": "s",
        "colour": "red",
        "levels": [3],
        "n": 2,
        "tag": {"c": "red"},
    }
    assert found is not None
    assert type(found["colour"]) is str
    assert type(found["levels"][0]) is int  # type: ignore[index]


def test_stored_items_cannot_be_changed_through_the_caller_s_dicts() -> None:
    store = MemoryStore()
    nested: dict[str, Value] = {"a": [1, 2]}
    put: Item = {"pk": "p", "sk": "s", "m": nested}
    store.transact_write([Put(put)])
    nested["a"] = []
    got = store.get(Key("p", "s"))
    assert got is not None
    got["m"] = "changed"
    assert store.get(Key("p", "s")) == {"pk": "p", "sk": "s", "m": {"a": [1, 2]}}


_plain: st.SearchStrategy[Value] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(min_size=1), _plain, max_size=8))
def test_twice_the_body_bounds_the_item_size(attrs: dict[str, Value]) -> None:
    """What an update's size check relies on (``check_updated``'s stored bound)."""
    stored: Item = {"pk": "p", "sk": "s", **attrs}
    assert item_size(stored) <= _size_bound(_encode(stored))


def test_repeated_values_count_in_full() -> None:
    """The same string object many times over: written in full each time (no
    back-references), so the bound holds for it too."""
    text = "x" * 1000
    stored: Item = {"pk": "p", "sk": "s", "many": [text] * 50}
    assert item_size(stored) <= _size_bound(_encode(stored))
