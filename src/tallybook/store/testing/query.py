"""Storage-port contract: queries on the table and on the two GSIs."""

from __future__ import annotations

import base64

import pytest

from tallybook.errors import StoreValidationError
from tallybook.store.port import ItemStore, Remove, Set, SortCondition
from tallybook.store.queries import encode_cursor
from tallybook.store.testing.helpers import PK, item, key, pages, sks

SORT_KEYS = ["a", "a#1", "a#2", "ab", "b", "b#1", "c"]


def _fill(store: ItemStore, names: list[str], pk: str = PK) -> None:
    store.batch_write(puts=[item(sk, pk=pk, n=i) for i, sk in enumerate(names)])


def _names(count: int) -> list[str]:
    return [f"e{i:03}" for i in range(count)]


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


class QueryContract:
    """The contract's query cases; every test takes the ``store`` fixture."""

    # --- order, limit, pagination -----------------------------------------------
    def test_query_forward_and_backward(self, store: ItemStore) -> None:
        _fill(store, list(reversed(SORT_KEYS)))
        page = store.query(PK)
        assert sks(page.items) == SORT_KEYS
        assert page.cursor is None
        back = store.query(PK, forward=False)
        assert sks(back.items) == list(reversed(SORT_KEYS))
        assert back.cursor is None
        assert store.query(PK).items[0] == item("a", n=6)  # whole items, every attribute

    def test_query_limit(self, store: ItemStore) -> None:
        _fill(store, _names(10))
        first = store.query(PK, limit=3)
        assert sks(first.items) == ["e000", "e001", "e002"]
        assert first.cursor is not None
        last = store.query(PK, limit=3, forward=False)
        assert sks(last.items) == ["e009", "e008", "e007"]
        assert last.cursor is not None
        assert sks(store.query(PK, limit=50).items) == _names(10)
        with pytest.raises(StoreValidationError):
            store.query(PK, limit=0)

    @pytest.mark.parametrize("forward", [True, False], ids=["forward", "backward"])
    def test_pagination_covers_every_item_once_in_order(
        self, store: ItemStore, forward: bool
    ) -> None:
        names = _names(23)
        _fill(store, names)
        got = pages(store, PK, limit=5, forward=forward)
        assert [len(p) for p in got] == [5, 5, 5, 5, 3]
        expected = names if forward else list(reversed(names))
        assert [sk for p in got for sk in sks(p)] == expected
        assert sks(list(store.query_all(PK, forward=forward, page_size=4))) == expected

    def test_pagination_ending_on_a_page_boundary(self, store: ItemStore) -> None:
        names = _names(10)
        _fill(store, names)
        got = pages(store, PK, limit=5)
        # An engine may return one trailing empty page (DynamoDB's LastEvaluatedKey)
        # but never loses or repeats an item.
        assert [len(p) for p in got] in ([5, 5], [5, 5, 0])
        assert [sk for p in got for sk in sks(p)] == names

    @pytest.mark.parametrize(
        ("sort", "expected"),
        [
            (SortCondition.eq("a#1"), ["a#1"]),
            (SortCondition.eq("zzz"), []),
            (SortCondition.begins_with("a#"), ["a#1", "a#2"]),
            (SortCondition.begins_with("a"), ["a", "a#1", "a#2", "ab"]),
            (SortCondition.between("a#2", "b"), ["a#2", "ab", "b"]),
            (SortCondition.lt("ab"), ["a", "a#1", "a#2"]),
            (SortCondition.le("ab"), ["a", "a#1", "a#2", "ab"]),
            (SortCondition.gt("b"), ["b#1", "c"]),
            (SortCondition.ge("b"), ["b", "b#1", "c"]),
        ],
        ids=["eq", "eq-none", "begins-1", "begins-2", "between", "lt", "le", "gt", "ge"],
    )
    def test_sort_key_conditions(
        self, store: ItemStore, sort: SortCondition, expected: list[str]
    ) -> None:
        _fill(store, SORT_KEYS)
        _fill(store, SORT_KEYS, pk="neighbour")
        assert sks(store.query(PK, sort).items) == expected
        assert sks(store.query(PK, sort, forward=False).items) == list(reversed(expected))
        paged = pages(store, PK, limit=2, sort=sort, forward=False)
        assert [sk for p in paged for sk in sks(p)] == list(reversed(expected))

    def test_partition_isolation(self, store: ItemStore) -> None:
        for pk in ("p", "p#", "p#1", "P", "q"):
            _fill(store, ["x", "y"], pk=pk)
        got = store.query("p#").items
        assert [(i["pk"], i["sk"]) for i in got] == [("p#", "x"), ("p#", "y")]
        everything = [i["pk"] for p in pages(store, "p", limit=1) for i in p]
        assert everything == ["p", "p"]

    def test_empty_result(self, store: ItemStore) -> None:
        _fill(store, ["x"])
        page = store.query("nobody")
        assert page.items == []
        assert page.cursor is None
        assert store.query(PK, SortCondition.gt("x")).items == []
        assert store.query("nobody", index="gsi1").items == []
        with pytest.raises(StoreValidationError):
            store.query("")

    @pytest.mark.parametrize(
        "cursor",
        [
            "%%% not a cursor %%%",
            _b64("not json"),
            _b64("[1, 2]"),
            _b64('{"pk": 1, "sk": 2}'),
            encode_cursor({"unrelated": "attribute"}),
        ],
        ids=["garbage", "not-json", "not-a-map", "non-string-values", "wrong-attributes"],
    )
    def test_malformed_cursor_is_refused(self, store: ItemStore, cursor: str) -> None:
        _fill(store, _names(3))
        with pytest.raises(StoreValidationError):
            store.query(PK, limit=1, cursor=cursor)

    def test_a_cursor_only_continues_its_own_query(self, store: ItemStore) -> None:
        _fill(store, _names(4))
        _fill(store, _names(4), pk="elsewhere")
        store.batch_write(puts=[item(f"g{i}", gsi1pk="G", gsi1sk="s") for i in range(4)])
        table_cursor = store.query("elsewhere", limit=2).cursor
        index_cursor = store.query("G", index="gsi1", limit=2).cursor
        assert table_cursor is not None
        assert index_cursor is not None
        with pytest.raises(StoreValidationError):
            store.query(PK, limit=2, cursor=table_cursor)  # another partition
        with pytest.raises(StoreValidationError):
            store.query("G", index="gsi1", limit=2, cursor=table_cursor)  # not an index cursor
        with pytest.raises(StoreValidationError):
            store.query("H", index="gsi1", limit=2, cursor=index_cursor)  # another index partition
        rest = store.query("G", index="gsi1", limit=2, cursor=index_cursor)
        assert len(rest.items) == 2

    def test_a_cursor_outside_the_sort_condition_is_refused(self, store: ItemStore) -> None:
        """DynamoDB refuses such a start key ("does not match the range key
        predicate"); every engine does, instead of answering an empty page."""
        _fill(store, ["a1", "a2", "a3", "b1", "b2", "b3"])
        cursor = store.query(PK, SortCondition.begins_with("a"), limit=2).cursor
        assert cursor is not None
        with pytest.raises(StoreValidationError):
            store.query(PK, SortCondition.begins_with("b"), limit=2, cursor=cursor)
        rest = store.query(PK, SortCondition.begins_with("a"), limit=2, cursor=cursor)
        assert sks(rest.items) == ["a3"]

    def test_sort_order_is_by_utf8_bytes(self, store: ItemStore) -> None:
        # Code point order equals UTF-8 byte order; UTF-16 order (Java strings)
        # would put the emoji (a surrogate pair, 0xD83D...) before U+FF21.
        names = ["\U0001f600", "\uff21", "中", "é", "z", "a", "B", "A", "0", "#"]
        _fill(store, names)
        expected = sorted(names, key=lambda s: s.encode("utf-8"))
        assert expected[-2:] == ["\uff21", "\U0001f600"]
        assert sks(store.query(PK).items) == expected
        assert sks(store.query(PK, SortCondition.lt("\U0001f600")).items) == expected[:-1]
        assert sks(store.query(PK, SortCondition.gt("\uff21")).items) == ["\U0001f600"]
        assert sks(store.query(PK, SortCondition.between("z", "\uff21")).items) == [
            "z",
            "é",
            "中",
            "\uff21",
        ]
        paged = pages(store, PK, limit=3, forward=False)
        assert [sk for p in paged for sk in sks(p)] == list(reversed(expected))

    # --- global secondary indexes ---------------------------------------------
    def test_gsi_queries(self, store: ItemStore) -> None:
        store.batch_write(
            puts=[
                item("1", pk="acct#1", gsi1pk="tier#gold", gsi1sk="b", gsi2pk="city#x", gsi2sk="1"),
                item("1", pk="acct#2", gsi1pk="tier#gold", gsi1sk="a", name="second"),
                item("1", pk="acct#3", gsi1pk="tier#silver", gsi1sk="a"),
                item("1", pk="acct#4", gsi1pk="tier#gold"),  # no gsi1sk: not in gsi1
                item("1", pk="acct#5", gsi1sk="a"),  # no gsi1pk: not in gsi1
                item("1", pk="acct#6", gsi2pk="city#x", gsi2sk="0"),
                item("2", pk="acct#6", gsi2pk="city#x", gsi2sk="2"),
            ]
        )
        gold = store.query("tier#gold", index="gsi1").items
        assert [i["pk"] for i in gold] == ["acct#2", "acct#1"]
        assert gold[0] == item("1", pk="acct#2", gsi1pk="tier#gold", gsi1sk="a", name="second")
        assert [i["pk"] for i in store.query("tier#gold", index="gsi1", forward=False).items] == [
            "acct#1",
            "acct#2",
        ]
        assert [i["pk"] for i in store.query("tier#silver", index="gsi1").items] == ["acct#3"]
        city = store.query("city#x", index="gsi2").items
        assert [(i["pk"], i["sk"]) for i in city] == [
            ("acct#6", "1"),
            ("acct#1", "1"),
            ("acct#6", "2"),
        ]
        gt = store.query("city#x", SortCondition.gt("0"), index="gsi2", forward=False).items
        assert [i["gsi2sk"] for i in gt] == ["2", "1"]
        assert store.query("tier#gold", index="gsi2").items == []
        assert store.query("city#x", index="gsi1").items == []
        with pytest.raises(StoreValidationError):
            store.query("tier#gold", index="gsi9")

    def test_gsi_follows_updates_and_deletes(self, store: ItemStore) -> None:
        store.put(item("m", gsi1pk="G", gsi1sk="1", v=1))
        store.update(key("m"), [Set("v", 2)])
        assert store.query("G", index="gsi1").items == [item("m", gsi1pk="G", gsi1sk="1", v=2)]
        store.update(key("m"), [Set("gsi1pk", "H")])
        assert store.query("G", index="gsi1").items == []
        assert [i["v"] for i in store.query("H", index="gsi1").items] == [2]
        store.update(key("m"), [Remove("gsi1sk")])
        assert store.query("H", index="gsi1").items == []
        store.update(key("m"), [Set("gsi1sk", "2")])
        assert len(store.query("H", index="gsi1").items) == 1
        store.delete(key("m"))
        assert store.query("H", index="gsi1").items == []

    @pytest.mark.parametrize("forward", [True, False], ids=["forward", "backward"])
    @pytest.mark.parametrize("index", ["gsi1", "gsi2"])
    def test_gsi_pagination_with_duplicate_sort_keys(
        self, store: ItemStore, index: str, forward: bool
    ) -> None:
        ipk, isk = f"{index}pk", f"{index}sk"
        puts = [item(f"s{i:02}", pk=f"acct#{i % 3}", **{ipk: "I", isk: "same"}) for i in range(12)]
        puts += [item(f"t{i}", pk="acct#x", **{ipk: "I", isk: f"k{i % 2}"}) for i in range(4)]
        puts += [item("other", pk="acct#y", **{ipk: "J", isk: "same"})]
        store.batch_write(puts=puts)
        got = pages(store, "I", limit=5, forward=forward, index=index)
        flat = [i for p in got for i in p]
        assert sorted((i["pk"], i["sk"]) for i in flat) == sorted(
            (p["pk"], p["sk"]) for p in puts if p[ipk] == "I"
        )
        order = [str(i[isk]) for i in flat]
        assert order == sorted(order, reverse=not forward)
        assert [len(p) for p in got][:3] == [5, 5, 5]
