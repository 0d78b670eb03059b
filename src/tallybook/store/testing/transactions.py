"""Storage-port contract: transact_write (all or nothing, cancellation reasons)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable

import pytest

from tallybook.errors import ItemTooLarge, StoreValidationError
from tallybook.store.port import (
    Action,
    Add,
    Compare,
    ConditionCheck,
    Delete,
    Exists,
    ItemStore,
    NotExists,
    Put,
    Remove,
    Set,
    Update,
)
from tallybook.store.testing.helpers import PK, condition_failed, item, key, sks

FAILED = "ConditionalCheckFailed"


_BLOB = 390_000  # 11 items of this size pass 4 MB (4,194,304 bytes), 10 do not


class TransactionsContract:
    """The contract's transactions cases; every test takes the ``store`` fixture."""

    def test_several_actions_are_all_applied(self, store: ItemStore) -> None:
        store.put(item("upd", n=1, gone="x"))
        store.put(item("del", v=1))
        store.put(item("chk", version=7))
        store.transact_write(
            [
                Put(item("new", v="fresh"), NotExists("pk")),
                Update(key("upd"), (Add("n", 2), Remove("gone")), Compare("n", "=", 1)),
                Delete(key("del"), Exists("pk")),
                ConditionCheck(key("chk"), Compare("version", "=", 7)),
                Update(key("made"), (Set("s", "by update"),)),
            ]
        )
        assert store.get(key("new")) == item("new", v="fresh")
        assert store.get(key("upd")) == item("upd", n=3)
        assert store.get(key("del")) is None
        assert store.get(key("chk")) == item("chk", version=7)
        assert store.get(key("made")) == item("made", s="by update")

    @pytest.mark.parametrize("failing", [0, 1, 2])
    def test_one_failing_condition_cancels_everything(self, store: ItemStore, failing: int) -> None:
        store.put(item("b", n=1))
        store.put(item("c", v="keep"))

        actions: list[Action] = [
            Put(item("a", v="new"), NotExists("pk") if failing != 0 else Exists("pk")),
            Update(key("b"), (Add("n", 10),), Compare("n", "=", 1 if failing != 1 else 99)),
            Delete(key("c"), Exists("pk") if failing != 2 else NotExists("pk")),
        ]
        reasons: list[str | None] = [None, None, None]
        reasons[failing] = FAILED
        condition_failed(lambda: store.transact_write(actions), index=failing, reasons=reasons)
        assert store.get(key("a")) is None
        assert store.get(key("b")) == item("b", n=1)
        assert store.get(key("c")) == item("c", v="keep")
        assert sks(store.query(PK).items) == ["b", "c"]

    def test_several_failing_conditions_are_all_reported(self, store: ItemStore) -> None:
        store.put(item("x", n=1))
        store.put(item("y", n=1))
        condition_failed(
            lambda: store.transact_write(
                [
                    Put(item("w", v=1)),
                    ConditionCheck(key("x"), Compare("n", "=", 2)),
                    Update(key("z"), (Set("v", 1),)),
                    Update(key("y"), (Add("n", 1),), Compare("n", ">", 1)),
                ]
            ),
            index=1,
            reasons=[None, FAILED, None, FAILED],
        )
        assert sks(store.query(PK).items) == ["x", "y"]
        assert store.get(key("y")) == item("y", n=1)

    def test_condition_check_action(self, store: ItemStore) -> None:
        store.put(item("guard", open=True))
        store.transact_write(
            [ConditionCheck(key("guard"), Compare("open", "=", True)), Put(item("child", v=1))]
        )
        assert store.get(key("child")) == item("child", v=1)
        store.put(item("guard", open=False))
        condition_failed(
            lambda: store.transact_write(
                [Put(item("child2", v=1)), ConditionCheck(key("guard"), Compare("open", "=", True))]
            ),
            index=1,
            reasons=[None, FAILED],
        )
        assert store.get(key("child2")) is None
        # A ConditionCheck never writes: the checked item is unchanged, a missing one stays missing.
        store.transact_write([ConditionCheck(key("nobody"), NotExists("pk"))])
        assert store.get(key("nobody")) is None
        assert store.get(key("guard")) == item("guard", open=False)

    def test_single_action_failures_report_index_zero(self, store: ItemStore) -> None:
        store.put(item("s", n=1))
        for action in (
            Put(item("s", n=2), NotExists("pk")),
            Update(key("s"), (Add("n", 1),), Compare("n", "=", 0)),
            Delete(key("s"), Compare("n", "<>", 1)),
            ConditionCheck(key("s"), NotExists("n")),
        ):
            condition_failed(
                functools.partial(store.transact_write, [action]), index=0, reasons=[FAILED]
            )
        assert store.get(key("s")) == item("s", n=1)

    @pytest.mark.parametrize(
        "actions",
        [
            [Put(item("dup", v=1)), Put(item("dup", v=2))],
            [Put(item("dup", v=1)), Update(key("dup"), (Set("v", 2),))],
            [Update(key("dup"), (Add("n", 1),)), Delete(key("dup"))],
            [ConditionCheck(key("dup"), NotExists("pk")), Put(item("dup", v=1))],
        ],
        ids=["put-put", "put-update", "update-delete", "check-put"],
    )
    def test_the_same_item_twice_is_refused(self, store: ItemStore, actions: list[Action]) -> None:
        with pytest.raises(StoreValidationError):
            store.transact_write([Put(item("other")), *actions])
        assert store.get(key("dup")) is None
        assert store.get(key("other")) is None

    def test_same_sort_key_in_different_partitions_is_not_a_duplicate(
        self, store: ItemStore
    ) -> None:
        store.transact_write([Put(item("same", pk="p1", v=1)), Put(item("same", pk="p2", v=2))])
        assert store.get(key("same", pk="p1")) == item("same", pk="p1", v=1)
        assert store.get(key("same", pk="p2")) == item("same", pk="p2", v=2)

    @pytest.mark.parametrize("count", [0, 101])
    def test_action_count_limits(self, store: ItemStore, count: int) -> None:
        with pytest.raises(StoreValidationError):
            store.transact_write([Put(item(f"i{i:03}")) for i in range(count)])
        assert store.query(PK).items == []

    def test_ten_actions_in_one_transaction(self, store: ItemStore) -> None:
        store.transact_write([Put(item(f"i{i:02}", n=i)) for i in range(10)])
        assert [i["n"] for i in store.query(PK).items] == list(range(10))

    @pytest.mark.parametrize("count", [11, 100])
    def test_up_to_one_hundred_actions_in_one_transaction(
        self, store: ItemStore, count: int
    ) -> None:
        """AWS's limit on both engines (DynamoDB Local 3.x takes 100, as AWS)."""
        n = count - 1
        store.put(item(f"i{n:03}", n=0))
        store.transact_write(
            [Put(item(f"i{i:03}", n=i), NotExists("pk")) for i in range(n)]
            + [Update(key(f"i{n:03}"), (Add("n", n),), Exists("pk"))]
        )
        assert [i["n"] for i in store.query_all(PK)] == list(range(count))

    def test_one_hundred_actions_all_or_nothing(self, store: ItemStore) -> None:
        store.put(item("i099", v=1))
        condition_failed(
            lambda: store.transact_write(
                [Put(item(f"i{i:03}"), NotExists("pk")) for i in range(100)]
            ),
            index=99,
            reasons=[None] * 99 + [FAILED],
        )
        assert sks(store.query(PK).items) == ["i099"]

    def test_one_action_over_the_limit_is_refused_and_writes_nothing(
        self, store: ItemStore
    ) -> None:
        with pytest.raises(StoreValidationError, match="at most 100 actions"):
            store.transact_write([Put(item(f"k{i:03}", n=i)) for i in range(101)])
        assert store.query(PK).items == []

    @pytest.mark.parametrize(
        "make",
        [
            lambda i: Put(item(f"b{i:02}", blob="x" * _BLOB)),
            lambda i: Update(key(f"b{i:02}"), (Set("blob", "x" * _BLOB),)),
        ],
        ids=["puts", "updates"],
    )
    def test_a_transaction_beyond_4_mb_is_refused(
        self, store: ItemStore, make: Callable[[int], Action]
    ) -> None:
        """AWS refuses a transaction whose items add up to more than 4 MB; so do
        both engines, before writing anything (SQLite would take it otherwise)."""
        with pytest.raises(StoreValidationError, match="4 MB"):
            store.transact_write([Put(item("small", v=1))] + [make(i) for i in range(11)])
        assert store.query(PK).items == []

    def test_a_transaction_just_under_4_mb_is_applied(self, store: ItemStore) -> None:
        store.transact_write([Put(item(f"b{i:02}", blob="x" * _BLOB)) for i in range(10)])
        assert len(list(store.query_all(PK, page_size=3))) == 10

    def test_small_updates_of_large_items_count_as_what_they_carry(self, store: ItemStore) -> None:
        """An update is counted by its key and the values it sets, as DynamoDB does:
        eleven 390 KB items may each get a counter in one transaction."""
        store.batch_write(puts=[item(f"b{i:02}", blob="x" * _BLOB) for i in range(11)])
        store.transact_write([Update(key(f"b{i:02}"), (Add("n", 1),)) for i in range(11)])
        assert store.get(key("b10"), consistent=True) == item("b10", blob="x" * _BLOB, n=1)

    def test_a_request_token_is_accepted(self, store: ItemStore) -> None:
        # Tokens are unique per logical transaction (DynamoDB remembers them for
        # ten minutes, across tables on one endpoint).
        token = f"contract-{uuid.uuid4().hex}"
        store.transact_write(
            [Put(item("tok", v=1)), Update(key("ctr"), (Add("n", 1),))], token=token
        )
        assert store.get(key("tok")) == item("tok", v=1)
        assert store.get(key("ctr")) == item("ctr", n=1)

    def test_an_oversized_item_cancels_the_transaction(self, store: ItemStore) -> None:
        with pytest.raises(ItemTooLarge):
            store.transact_write([Put(item("small", v=1)), Put(item("huge", blob="x" * 410_000))])
        assert store.get(key("small")) is None
        assert store.get(key("huge")) is None
