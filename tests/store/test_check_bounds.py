"""The port's checks size plain items in one pass: same refusals, a true bound.

``check_item`` and ``check_update`` size an item of plain values in one loop
(names joined, numbers and strings inline) and fall back to the value-by-value
checks for anything else. Whichever path an item takes, it must be refused
with the same error as the exact checks give, and a bound must never be
below the item's real size (the 400 KB and 4 MB rules rely on it).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

import pytest

from tallybook.errors import ItemTooLarge, StoreValidationError
from tallybook.store.checks import (
    check_actions,
    check_item,
    check_update,
    check_value,
    item_size,
    value_size,
)
from tallybook.store.port import ITEM_ABSENT, Item, Put, Set, Update, Value, key_of


class Colour(StrEnum):
    RED = "red"


class Size(IntEnum):
    BIG = 7


KEY = {"pk": "P", "sk": "S"}

VALID: list[Value] = [
    "",
    "plain",
    "héllo wörld ✓",
    0,
    -(10**38) + 1,
    10**38 - 1,
    True,
    False,
    None,
    [],
    {},
    [1, "a", None, True, [2, {"x": "y"}], {}],
    {"balance": 5, "held": 0, "seq": 5, "last_us": 1_795_811_599_201_686},
    {"naïve": 1, "ключ": {"ä": ["ö", 2]}},
    {"a": {"b": {"c": {"d": [1, [2, [3, "é"]]]}}}},
    Colour.RED,
    Size.BIG,
    [Colour.RED, Size.BIG, {"k": Colour.RED}],
    {"enum": Size.BIG, "flag": True},
]


@pytest.mark.parametrize("value", VALID)
def test_a_valid_value_is_taken_and_bounded_in_an_item_and_an_update(value: Value) -> None:
    item: Item = {**KEY, "v": value, "n": 1, "s": "x", "ü": value}
    assert check_item(item) >= item_size(item)
    assert check_update(Set("v", value)) >= 1 + value_size(value)
    checked = check_actions(
        [Put(item, ITEM_ABSENT), Update(key_of({**KEY, "sk": "T"}), (Set("v", value),))]
    )
    assert checked.sets_bounds == [0, check_update(Set("v", value))]


INVALID: list[object] = [
    1.5,
    10**38,
    -(10**38),
    {"": 1},
    {1: "a"},
    {"a": [1, 2.0]},
    [{"ok": 1}, {"": 2}],
    {"deep": {"deeper": {"x": 10**40}}},
    "\ud800",
    {"\udc00": 1},
    ["a", "\ud800b"],
    {"é": {"x": 1.0}},
    (1, 2),
    b"bytes",
    {1, 2},
]


def _error(call: object) -> tuple[type[BaseException], str] | None:
    try:
        call()  # type: ignore[operator]
    except (StoreValidationError, ItemTooLarge) as exc:
        return type(exc), str(exc)
    return None


def _reference(item: Item) -> tuple[type[BaseException], str] | None:
    """The exact checks, attribute by attribute (what the one pass stands for)."""

    def run() -> None:
        for name, value in item.items():
            check_value(value, name)
        item_size(item)  # sizes every string: a lone surrogate is refused here

    return _error(run)


@pytest.mark.parametrize("value", INVALID)
def test_an_invalid_value_gets_the_error_of_the_exact_checks(value: object) -> None:
    item: Item = {**KEY, "first": "ok", "v": value, "last": 2}  # type: ignore[dict-item]
    expected = _reference(item)
    assert expected is not None
    assert _error(lambda: check_item(item)) == expected


def test_the_first_fault_of_an_item_is_the_one_reported() -> None:
    item: Item = {**KEY, "a": 1.5, "b": "\ud800", "c": {"": 1}}  # type: ignore[dict-item]
    assert _error(lambda: check_item(item)) == (
        StoreValidationError,
        "a: unsupported type float (integers, strings, booleans, null, lists and maps only; "
        "never floats)",
    )


def test_a_name_with_a_lone_surrogate_is_refused_as_before() -> None:
    item: Item = {**KEY, "x": {"ok": 1, "\ud800": 2}}
    error = _error(lambda: check_item(item))
    assert error == _reference(item)
    assert error is not None
    assert "lone surrogate" in error[1]


def test_an_item_near_400kb_is_sized_exactly() -> None:
    blob = "é" * (200 * 1024)  # 400 KB of UTF-8 in 200 K characters
    item: Item = {**KEY, "blob": blob, "more": ["x" * 100]}
    assert _error(lambda: check_item(item)) == (
        ItemTooLarge,
        "item P/S exceeds the 400 KB item size limit",
    )


@pytest.mark.parametrize("number", [10**5000, -(10**5000)], ids=["huge", "huge-negative"])
def test_a_number_past_pythons_4300_digit_str_limit_is_refused_not_a_value_error(
    number: int,
) -> None:
    for value in (number, [number], {"n": number}):
        item: Item = {**KEY, "v": value}
        with pytest.raises(StoreValidationError, match="at most 38 digits"):
            check_item(item)
        assert value_size(value) > 0  # sized without str()
    with pytest.raises(StoreValidationError, match="at most 38 digits"):
        check_actions([Update(key_of(KEY), [Set("v", [number])])])
