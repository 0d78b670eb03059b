"""Storage-port contract: conditional puts, updates and deletes."""

from __future__ import annotations

import functools

import pytest

from tallybook.errors import StoreValidationError
from tallybook.store.port import (
    Add,
    And,
    Compare,
    CompareOp,
    Condition,
    Exists,
    ItemStore,
    NotExists,
    Or,
    Remove,
    Set,
    Value,
)
from tallybook.store.testing.helpers import condition_failed, item, key, refused

FAILED = ["ConditionalCheckFailed"]


# (operator, stored, holds-against, fails-against)
_COMPARE_CASES: list[tuple[CompareOp, Value, Value, Value]] = [
    ("=", 5, 5, 6),
    ("<>", 5, 6, 5),
    ("<", 10, 11, 9),  # numeric, not lexical: 10 < 9 is false
    ("<=", -5, -5, -6),
    (">", 10, 9, 10),
    (">=", -5, -10, -4),
    ("=", "m", "m", "M"),
    ("<>", "m", "n", "m"),
    ("<", "abc", "abd", "ab"),
    ("<=", "m", "m", "l"),
    (">", "b", "a", "ba"),
    (">=", "é", "z", "\U0001f600"),  # UTF-8 bytes: "z" < "é" < emoji
]


class WritesContract:
    """The contract's writes cases; every test takes the ``store`` fixture."""

    # --- conditional put -------------------------------------------------------
    def test_put_if_not_exists_succeeds_once(self, store: ItemStore) -> None:
        store.put(item("once", v=1), NotExists("pk"))
        condition_failed(
            lambda: store.put(item("once", v=2), NotExists("pk")), index=0, reasons=FAILED
        )
        assert store.get(key("once")) == item("once", v=1)

    def test_exists_condition(self, store: ItemStore) -> None:
        condition_failed(lambda: store.put(item("e", v=1), Exists("pk")), index=0, reasons=FAILED)
        assert store.get(key("e")) is None
        store.put(item("e", v=1, flag=None))
        store.put(item("e", v=2, flag=None), Exists("flag"))  # a null attribute exists
        assert store.get(key("e")) == item("e", v=2, flag=None)
        condition_failed(
            lambda: store.put(item("e", v=3), Exists("other")), index=0, reasons=FAILED
        )
        store.put(item("e", v=3), NotExists("other"))
        assert store.get(key("e")) == item("e", v=3)

    @pytest.mark.parametrize(
        ("op", "stored", "holds", "fails"),
        _COMPARE_CASES,
        ids=[f"{type(c[1]).__name__}-{c[0]}" for c in _COMPARE_CASES],
    )
    def test_compare_condition(
        self, store: ItemStore, op: CompareOp, stored: Value, holds: Value, fails: Value
    ) -> None:
        store.put(item("c", x=stored, v=0))
        store.update(key("c"), [Add("v", 1)], Compare("x", op, holds))
        condition_failed(
            lambda: store.update(key("c"), [Add("v", 1)], Compare("x", op, fails)),
            index=0,
            reasons=FAILED,
        )
        store.put(item("c", x=stored, v=5), Compare("x", op, holds))
        condition_failed(
            lambda: store.put(item("c", x=stored, v=6), Compare("x", op, fails)),
            index=0,
            reasons=FAILED,
        )
        assert store.get(key("c")) == item("c", x=stored, v=5)

    def test_compare_never_matches_across_types(self, store: ItemStore) -> None:
        store.put(item("t", n=1, s="1", b=True))
        for cond in (
            Compare("n", "=", "1"),
            Compare("s", "=", 1),
            Compare("b", "=", 1),
            Compare("n", "=", True),
            Compare("n", "<", "2"),
            Compare("s", "<", 2),
        ):
            condition_failed(
                functools.partial(store.delete, key("t"), cond), index=0, reasons=FAILED
            )
        store.update(
            key("t"), [Set("ok", True)], And((Compare("n", "<>", "1"), Compare("b", "=", True)))
        )
        assert store.get(key("t")) == item("t", n=1, s="1", b=True, ok=True)

    def test_compare_on_lists_and_maps(self, store: ItemStore) -> None:
        store.put(item("l", tags=["a", "b"], meta={"k": 1}))
        store.update(key("l"), [Set("v", 1)], Compare("tags", "=", ["a", "b"]))
        store.update(key("l"), [Set("v", 2)], Compare("meta", "=", {"k": 1}))
        condition_failed(
            lambda: store.update(key("l"), [Set("v", 3)], Compare("tags", "=", ["b", "a"])),
            index=0,
            reasons=FAILED,
        )
        assert store.get(key("l")) == item("l", tags=["a", "b"], meta={"k": 1}, v=2)

    def test_compare_on_a_missing_attribute(self, store: ItemStore) -> None:
        # As in DynamoDB: a missing attribute is unequal to everything, and no
        # ordering comparison with it holds.
        store.put(item("m", v=0))
        ops: tuple[CompareOp, ...] = ("=", "<", "<=", ">", ">=")
        for op in ops:
            condition_failed(
                functools.partial(store.update, key("m"), [Add("v", 1)], Compare("absent", op, 1)),
                index=0,
                reasons=FAILED,
            )
        store.update(key("m"), [Add("v", 1)], Compare("absent", "<>", 1))
        assert store.get(key("m")) == item("m", v=1)

    @pytest.mark.parametrize(
        "condition",
        [
            Compare("n", "=", refused(1.0)),
            Compare("n", "<", 10**38),
            Compare("n", "=", [1, {"x": refused(0.5)}]),
            And((Exists("n"), Or((NotExists("m"), Compare("m", ">", refused(0.5)))))),
        ],
        ids=["float", "39-digits", "nested-float", "deep-in-and-or"],
    )
    def test_malformed_condition_values_are_refused(
        self, store: ItemStore, condition: Condition
    ) -> None:
        store.put(item("mc", n=1))
        with pytest.raises(StoreValidationError):
            store.put(item("mc", n=2), condition)
        with pytest.raises(StoreValidationError):
            store.update(key("other"), [Set("n", 2)], condition)
        assert store.get(key("mc")) == item("mc", n=1)
        assert store.get(key("other")) is None

    @pytest.mark.parametrize(
        ("condition", "holds"),
        [
            (And((Compare("a", "=", 1), Compare("b", "=", "x"))), True),
            (And((Compare("a", "=", 1), Compare("b", "=", "y"))), False),
            (Or((Compare("a", "=", 2), Compare("b", "=", "x"))), True),
            (Or((Compare("a", "=", 2), Compare("b", "=", "y"))), False),
            (Or((NotExists("pk"), And((Exists("a"), Compare("a", "<", 5))))), True),
            (And((Exists("a"), Or((Compare("a", ">", 5), NotExists("b"))))), False),
            (And((Or((Compare("a", "=", 0), Compare("a", "=", 1))), Exists("b"))), True),
        ],
        ids=["and-true", "and-false", "or-true", "or-false", "nested-1", "nested-2", "nested-3"],
    )
    def test_and_or_combinations(self, store: ItemStore, condition: Condition, holds: bool) -> None:
        store.put(item("ao", a=1, b="x"))
        if holds:
            store.put(item("ao", a=1, b="x", written=True), condition)
            assert store.get(key("ao")) == item("ao", a=1, b="x", written=True)
        else:
            condition_failed(
                lambda: store.put(item("ao", a=1, b="x", written=True), condition),
                index=0,
                reasons=FAILED,
            )
            assert store.get(key("ao")) == item("ao", a=1, b="x")

    # --- update ----------------------------------------------------------------
    def test_update_set_and_remove(self, store: ItemStore) -> None:
        store.put(item("u", a=1, b="two", c=[3]))
        store.update(key("u"), [Set("a", {"nested": [1, None]}), Set("d", "new"), Remove("b")])
        assert store.get(key("u")) == item("u", a={"nested": [1, None]}, c=[3], d="new")
        store.update(key("u"), [Remove("never-there"), Remove("c")])
        assert store.get(key("u")) == item("u", a={"nested": [1, None]}, d="new")

    def test_update_add(self, store: ItemStore) -> None:
        store.put(item("a", n=10))
        store.update(key("a"), [Add("n", 5), Add("fresh", 3), Add("neg", -4)])
        assert store.get(key("a")) == item("a", n=15, fresh=3, neg=-4)
        store.update(key("a"), [Add("n", -20)])
        assert store.get(key("a")) == item("a", n=-5, fresh=3, neg=-4)

    def test_update_creates_a_missing_item(self, store: ItemStore) -> None:
        store.update(key("created"), [Set("s", "x"), Add("n", -2), Remove("nothing")])
        assert store.get(key("created")) == item("created", s="x", n=-2)
        store.update(key("created2"), [Add("n", 1)], NotExists("pk"))
        assert store.get(key("created2")) == item("created2", n=1)

    def test_conditional_update_failing_leaves_item_unchanged(self, store: ItemStore) -> None:
        store.put(item("cu", n=1, s="keep"))
        condition_failed(
            lambda: store.update(
                key("cu"), [Add("n", 1), Remove("s"), Set("x", 1)], Compare("n", "=", 0)
            ),
            index=0,
            reasons=FAILED,
        )
        assert store.get(key("cu")) == item("cu", n=1, s="keep")
        condition_failed(
            lambda: store.update(key("missing"), [Set("x", 1)], Exists("pk")),
            index=0,
            reasons=FAILED,
        )
        assert store.get(key("missing")) is None

    def test_add_to_a_non_number_is_refused(self, store: ItemStore) -> None:
        store.put(item("nn", s="text", b=True))
        for attr in ("s", "b"):
            with pytest.raises(StoreValidationError):
                store.update(key("nn"), [Add(attr, 1)])
        assert store.get(key("nn")) == item("nn", s="text", b=True)

    # --- delete ----------------------------------------------------------------
    def test_delete(self, store: ItemStore) -> None:
        store.put(item("d1", v=1))
        store.put(item("d2", v=2))
        store.delete(key("d1"))
        assert store.get(key("d1")) is None
        assert store.get(key("d2")) == item("d2", v=2)
        store.delete(key("never-existed"))  # deleting a missing item is not an error
        assert store.get(key("never-existed")) is None

    def test_conditional_delete(self, store: ItemStore) -> None:
        store.put(item("cd", version=3))
        condition_failed(
            lambda: store.delete(key("cd"), Compare("version", "=", 2)), index=0, reasons=FAILED
        )
        assert store.get(key("cd")) == item("cd", version=3)
        store.delete(key("cd"), Compare("version", "=", 3))
        assert store.get(key("cd")) is None
        condition_failed(lambda: store.delete(key("cd"), Exists("pk")), index=0, reasons=FAILED)
