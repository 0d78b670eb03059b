"""Storage-port contract: items, values, numbers and keys.

Part of the contract suite of :class:`tallybook.store.port.ItemStore`
(:mod:`tallybook.store.testing`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tallybook.errors import ConditionFailed, StoreValidationError
from tallybook.store.port import (
    Add,
    Compare,
    ConditionCheck,
    Delete,
    Exists,
    Item,
    ItemStore,
    Key,
    Put,
    Set,
    SortCondition,
    Update,
    Value,
)
from tallybook.store.testing.helpers import PK, item, key, refused

MAX_38 = 10**38 - 1  # the largest integer DynamoDB stores exactly
DIGITS_39 = int("9" * 39)


# --- keys ------------------------------------------------------------------

_EMPTY_KEY_CALLS: dict[str, Callable[[ItemStore, Key], object]] = {
    "put": lambda s, k: s.put({"pk": k.pk, "sk": k.sk, "v": 1}),
    "get": lambda s, k: s.get(k),
    "update": lambda s, k: s.update(k, [Set("v", 1)]),
    "delete": lambda s, k: s.delete(k),
    "condition-check": lambda s, k: s.transact_write(
        [ConditionCheck(k, Exists("v")), Put(item("ok"))]
    ),
    "batch-get": lambda s, k: s.batch_get([key("ok"), k]),
    "batch-write-put": lambda s, k: s.batch_write(puts=[{"pk": k.pk, "sk": k.sk}]),
    "batch-write-delete": lambda s, k: s.batch_write(deletes=[k]),
}


class ItemsContract:
    """The contract's items cases; every test takes the ``store`` fixture."""

    # --- round trips -----------------------------------------------------------
    @pytest.mark.parametrize(
        "value",
        [
            "plain text",
            "ünïcødé ✓ 中文 \U0001f600 e\u0301",
            0,
            42,
            -7,
            True,
            False,
            None,
            [],
            {},
            [1, "two", None, True, [3, [4]], {"five": 5}],
            {"a": {"b": {"c": [1, {"d": "deep"}]}}, "n": None, "flag": False, "ü": "ß"},
        ],
        ids=[
            "str",
            "unicode",
            "zero",
            "int",
            "negative",
            "true",
            "false",
            "none",
            "empty-list",
            "empty-map",
            "nested-list",
            "nested-map",
        ],
    )
    def test_put_get_round_trips_every_value_type(self, store: ItemStore, value: Value) -> None:
        store.put(item("v", value=value))
        got = store.get(key("v"))
        assert got == {"pk": PK, "sk": "v", "value": value}
        assert type(got["value"]) is type(value)

    def test_booleans_and_integers_keep_their_types(self, store: ItemStore) -> None:
        store.put(item("t", one=1, true=True, zero=0, false=False, nested=[1, True, {"x": 0}]))
        got = store.get(key("t"))
        assert got is not None
        assert [(got[a], type(got[a])) for a in ("one", "true", "zero", "false")] == [
            (1, int),
            (True, bool),
            (0, int),
            (False, bool),
        ]
        nested = got["nested"]
        assert isinstance(nested, list)
        assert [type(v) for v in nested] == [int, bool, dict]
        assert nested[2] == {"x": 0}
        assert type(nested[2]["x"]) is int

    def test_get_missing_key_returns_none(self, store: ItemStore) -> None:
        store.put(item("present"))
        assert store.get(key("absent")) is None
        assert store.get(Key("other-partition", "present")) is None

    def test_consistent_flag_is_accepted_on_reads(self, store: ItemStore) -> None:
        store.put(item("c", n=1))
        assert store.get(key("c"), consistent=False) == item("c", n=1)
        assert store.get(key("c"), consistent=True) == item("c", n=1)
        assert store.query(PK, consistent=False).items == [item("c", n=1)]
        assert store.batch_get([key("c")], consistent=False) == [item("c", n=1)]

    def test_put_replaces_the_whole_item(self, store: ItemStore) -> None:
        store.put(item("r", a=1, b="two", c=[3]))
        store.put(item("r", a=10))
        assert store.get(key("r")) == item("r", a=10)

    def test_unicode_keys_round_trip(self, store: ItemStore) -> None:
        k = Key("пользователь#ü", "订单#\U0001f600#é")
        store.put({"pk": k.pk, "sk": k.sk, "v": 1})
        assert store.get(k) == {"pk": k.pk, "sk": k.sk, "v": 1}
        assert store.query(k.pk).items == [{"pk": k.pk, "sk": k.sk, "v": 1}]

    def test_odd_and_reserved_attribute_names_work_in_conditions_and_updates(
        self,
        store: ItemStore,
    ) -> None:
        # Reserved words and characters that need placeholders in DynamoDB expressions.
        names = ["name", "status", "size", "count", "data", "a.b", "with space", "ünï", "#x", ":y"]
        store.put({**item("odd"), **dict.fromkeys(names, 1)})
        for n in names:
            store.update(key("odd"), [Add(n, 1)], Compare(n, "=", 1))
        assert store.get(key("odd")) == {**item("odd"), **dict.fromkeys(names, 2)}

    # --- numbers ---------------------------------------------------------------
    @pytest.mark.parametrize("number", [MAX_38, -MAX_38, 12345678901234567890123456789012345678])
    def test_38_digit_integers_round_trip_exactly(self, store: ItemStore, number: int) -> None:
        store.put(item("n", n=number, nested={"list": [number]}))
        got = store.get(key("n"))
        assert got == item("n", n=number, nested={"list": [number]})
        assert type(got["n"]) is int  # not a float, not a Decimal
        assert store.query(PK).items == [item("n", n=number, nested={"list": [number]})]
        assert store.batch_get([key("n")]) == [item("n", n=number, nested={"list": [number]})]

    def test_add_updates_are_exact_at_38_digits(self, store: ItemStore) -> None:
        store.put(item("n", up=MAX_38 - 5, down=-MAX_38 + 5))
        store.update(key("n"), [Add("up", 5), Add("down", -5), Add("fresh", MAX_38)])
        got = store.get(key("n"))
        assert got == item("n", up=MAX_38, down=-MAX_38, fresh=MAX_38)
        store.update(key("n"), [Add("up", -MAX_38), Add("fresh", -(MAX_38 - 1))])
        assert store.get(key("n")) == item("n", up=0, down=-MAX_38, fresh=1)

    def test_an_add_beyond_38_digits_is_refused_and_leaves_the_item(self, store: ItemStore) -> None:
        store.put(item("n", n=MAX_38))
        with pytest.raises(StoreValidationError):
            store.update(key("n"), [Add("n", MAX_38)])  # 39 significant digits
        assert store.get(key("n")) == item("n", n=MAX_38)

    @pytest.mark.parametrize("start", [MAX_38, -MAX_38], ids=["up", "down"])
    def test_an_add_to_10_to_the_38_is_refused(self, store: ItemStore, start: int) -> None:
        # 10**38 has one significant digit, which DynamoDB itself would store, but
        # 39 digits: outside the port's integers, which never put it either.
        store.put(item("edge", n=start))
        with pytest.raises(StoreValidationError):
            store.update(key("edge"), [Add("n", 1 if start > 0 else -1)])
        assert store.get(key("edge")) == item("edge", n=start)
        assert store.query(PK).items == [item("edge", n=start)]

    @pytest.mark.parametrize(
        "make",
        [
            lambda s: s.put(item("bad", n=DIGITS_39)),
            lambda s: s.put(item("bad", n=-DIGITS_39)),
            lambda s: s.put(item("bad", nested={"n": [DIGITS_39]})),
            lambda s: s.update(key("bad"), [Set("n", DIGITS_39)]),
            lambda s: s.update(key("bad"), [Add("n", DIGITS_39)]),
            lambda s: s.batch_write(puts=[item("bad", n=DIGITS_39)]),
        ],
        ids=["put", "put-negative", "put-nested", "update-set", "update-add", "batch-write"],
    )
    def test_39_digit_integers_are_refused(
        self, store: ItemStore, make: Callable[[ItemStore], None]
    ) -> None:
        with pytest.raises(StoreValidationError):
            make(store)
        assert store.get(key("bad")) is None

    @pytest.mark.parametrize(
        "make",
        [
            lambda s: s.put(item("f", n=refused(1.5))),
            lambda s: s.put(item("f", n=refused(2.0))),
            lambda s: s.put(item("f", nested={"a": [1, refused(0.1)]})),
            lambda s: s.put(item("f", nested=[{"x": refused(1e10)}])),
            lambda s: s.update(key("f"), [Set("n", refused(0.5))]),
            lambda s: s.update(key("f"), [Set("n", {"deep": [refused(0.5)]})]),
            lambda s: s.update(key("f"), [Add("n", 1.5)]),  # type: ignore[arg-type]
            lambda s: s.batch_write(puts=[item("ok"), item("f", n=refused(1.5))]),
            lambda s: s.transact_write([Put(item("ok")), Put(item("f", n=refused(0.25)))]),
        ],
        ids=[
            "top-level",
            "integral-float",
            "nested-list",
            "nested-map",
            "update-set",
            "update-set-nested",
            "update-add",
            "batch-write",
            "transaction",
        ],
    )
    def test_floats_are_refused_and_nothing_is_written(
        self, store: ItemStore, make: Callable[[ItemStore], None]
    ) -> None:
        with pytest.raises(StoreValidationError):
            make(store)
        assert store.get(key("f")) is None
        assert store.get(key("ok")) is None
        assert store.query(PK).items == []

    @pytest.mark.parametrize("operation", sorted(_EMPTY_KEY_CALLS))
    @pytest.mark.parametrize("bad", [Key("", "sk"), Key("pk", "")], ids=["empty-pk", "empty-sk"])
    def test_empty_key_parts_are_refused(self, store: ItemStore, operation: str, bad: Key) -> None:
        with pytest.raises(StoreValidationError):
            _EMPTY_KEY_CALLS[operation](store, bad)
        assert store.get(key("ok")) is None

    @pytest.mark.parametrize(
        "bad",
        [{"sk": "no-pk"}, {"pk": "no-sk"}, {"pk": 1, "sk": "s"}, {"pk": "p", "sk": None}],
        ids=["missing-pk", "missing-sk", "int-pk", "null-sk"],
    )
    def test_items_need_string_keys(self, store: ItemStore, bad: Item) -> None:
        with pytest.raises(StoreValidationError):
            store.put(bad)
        with pytest.raises(StoreValidationError):
            store.batch_write(puts=[bad])

    def test_sort_keys_up_to_1024_bytes(self, store: ItemStore) -> None:
        longest = "é" * 512  # 1024 UTF-8 bytes
        store.put(item(longest, v=1))
        assert store.get(key(longest)) == item(longest, v=1)
        with pytest.raises(StoreValidationError):
            store.put(item(longest + "x"))
        assert store.query(PK, SortCondition.begins_with("é")).items == [item(longest, v=1)]

    def test_key_attributes_cannot_be_updated(self, store: ItemStore) -> None:
        store.put(item("k", v=1))
        for attr in ("pk", "sk"):
            with pytest.raises(StoreValidationError):
                store.update(key("k"), [Set(attr, "other")])
        assert store.get(key("k")) == item("k", v=1)
        assert store.get(Key("other", "k")) is None

    def test_validation_happens_before_any_action_is_applied(self, store: ItemStore) -> None:
        store.put(item("keep", v=1))
        with pytest.raises(StoreValidationError):
            store.transact_write(
                [
                    Delete(key("keep")),
                    Update(key("new"), (Set("v", 1),)),
                    Put(item("bad", v=[refused(1.0)])),
                ]
            )
        assert store.get(key("keep")) == item("keep", v=1)
        assert store.get(key("new")) is None

    @pytest.mark.parametrize(
        "write",
        [
            lambda s: s.put({"pk": PK, "sk": "bad", "": 1}),
            lambda s: s.update(key("bad"), [Set("", 1)]),
            lambda s: s.update(key("bad"), [Add("", 1)]),
            lambda s: s.put(item("bad"), Exists("")),
            lambda s: s.batch_write(puts=[{"pk": PK, "sk": "bad", "": 1}]),
            lambda s: s.put(item("bad", m={"": 1})),
            lambda s: s.put(item("bad", m={"a": [{"b": {"": "x"}}]})),
            lambda s: s.update(key("bad"), [Set("m", {"": 1})]),
            lambda s: s.transact_write([Put(item("bad", m={"": 1}))]),
        ],
        ids=[
            "put",
            "update-set",
            "update-add",
            "condition",
            "batch-write",
            "map-key",
            "nested-map-key",
            "update-set-map-key",
            "transaction-map-key",
        ],
    )
    def test_empty_attribute_names_are_refused(
        self, store: ItemStore, write: Callable[[ItemStore], None]
    ) -> None:
        with pytest.raises(StoreValidationError):
            write(store)
        assert store.get(key("bad")) is None

    @pytest.mark.parametrize(
        "write",
        [
            lambda s: s.put(item("bad", v="\ud800")),
            lambda s: s.put(item("bad", m={"a": ["x\udfff"]})),
            lambda s: s.put(item("bad", m={"\ud800": 1})),
            lambda s: s.update(key("bad"), [Set("m", {"k": "\ud800"})]),
            lambda s: s.transact_write([Put(item("bad", v="é\ud800"))]),
        ],
        ids=["value", "nested-value", "map-key", "update-set", "transaction"],
    )
    def test_strings_with_a_lone_surrogate_are_refused(
        self, store: ItemStore, write: Callable[[ItemStore], None]
    ) -> None:
        """JSON can spell ``"\\ud800"``, which has no UTF-8 form: refused, not a crash."""
        with pytest.raises(StoreValidationError):
            write(store)
        assert store.get(key("bad")) is None

    # --- empty strings -----------------------------------------------------------
    # AWS (since 2020) and DynamoDB Local 3.x store empty strings in non-key
    # attributes; keys and index keys must not be empty. Both engines do the same.
    def test_empty_strings_are_stored_and_read_back(self, store: ItemStore) -> None:
        stored = item("empty", s="", nested={"m": "", "l": ["", "x"]}, gsi1pk="G", gsi1sk="1")
        store.put(stored)
        store.update(key("empty"), [Set("t", "")])
        expected = {**stored, "t": ""}
        assert store.get(key("empty")) == expected
        assert store.query(PK).items == [expected]
        assert store.query("G", index="gsi1").items == [expected]
        store.transact_write([ConditionCheck(key("empty"), Compare("s", "=", "")), Put(item("ok"))])
        assert store.get(key("ok")) == item("ok")
        with pytest.raises(ConditionFailed):  # a missing attribute is not ""
            store.update(key("empty"), [Set("v", 1)], Compare("missing", "=", ""))
        assert store.get(key("empty")) == expected

    @pytest.mark.parametrize("attr", ["gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk"])
    def test_empty_index_keys_are_refused(self, store: ItemStore, attr: str) -> None:
        with pytest.raises(StoreValidationError):
            store.put(item("idx", **{attr: ""}))
        with pytest.raises(StoreValidationError):
            store.update(key("idx"), [Set(attr, "")])
        assert store.get(key("idx")) is None
