"""Storage-port contract: TTL, the 400 KB item limit, batch reads and writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tallybook.errors import ItemTooLarge, StoreValidationError
from tallybook.store.port import Add, ConditionCheck, Exists, ItemStore, Key, NotExists, Set
from tallybook.store.testing.helpers import (
    PK,
    condition_failed,
    future_ttl,
    item,
    key,
    pages,
    past_ttl,
    refused,
    sks,
)

FAILED = ["ConditionalCheckFailed"]


class LimitsContract:
    """The contract's limits cases; every test takes the ``store`` fixture."""

    # --- TTL -------------------------------------------------------------------
    def test_expired_items_are_invisible_to_reads(self, store: ItemStore) -> None:
        gone = past_ttl()
        store.batch_write(
            puts=[
                item("old", ttl=gone, gsi1pk="G", gsi1sk="1", gsi2pk="H", gsi2sk="1"),
                item("live", v=1, gsi1pk="G", gsi1sk="2"),
            ]
        )
        store.put(item("old2", ttl=gone))
        assert store.get(key("old")) is None
        assert store.get(key("old2"), consistent=False) is None
        assert sks(store.query(PK).items) == ["live"]
        assert sks(store.query(PK, forward=False, limit=5).items) == ["live"]
        assert sks(store.query("G", index="gsi1").items) == ["live"]
        assert store.query("H", index="gsi2").items == []
        assert sks(store.batch_get([key("old"), key("live"), key("old2")])) == ["live"]

    def test_items_with_a_future_ttl_are_visible(self, store: ItemStore) -> None:
        later = future_ttl()
        store.put(item("soon", ttl=later, v=1, gsi1pk="G", gsi1sk="1"))
        expected = item("soon", ttl=later, v=1, gsi1pk="G", gsi1sk="1")
        assert store.get(key("soon")) == expected
        assert store.query(PK).items == [expected]
        assert store.query("G", index="gsi1").items == [expected]
        assert store.batch_get([key("soon")]) == [expected]
        # Moving the TTL of a live item into the past hides it.
        store.update(key("soon"), [Set("ttl", past_ttl())])
        assert store.get(key("soon")) is None
        assert store.query(PK).items == []

    def test_writes_treat_an_expired_item_as_absent(self, store: ItemStore) -> None:
        # Both engines hide expired items from conditions and updates too, so an
        # expired item behaves exactly like a deleted one.
        gone = past_ttl()
        store.batch_write(
            puts=[
                item("put", ttl=gone, old=1),
                item("upd", ttl=gone, old=1, n=5),
                item("del", ttl=gone, old=1),
            ]
        )
        store.put(item("put", v=2), NotExists("pk"))
        assert store.get(key("put")) == item("put", v=2)
        store.update(key("upd"), [Add("n", 1)])
        assert store.get(key("upd")) == item("upd", n=1)  # started afresh: no ttl, no old
        condition_failed(lambda: store.delete(key("del"), Exists("pk")), index=0, reasons=FAILED)
        condition_failed(
            lambda: store.transact_write([ConditionCheck(key("del"), Exists("old"))]),
            index=0,
            reasons=FAILED,
        )

    def test_pagination_skips_expired_items(self, store: ItemStore) -> None:
        gone, later = past_ttl(), future_ttl()
        names = [f"e{i:02}" for i in range(15)]
        store.batch_write(
            puts=[item(n, ttl=gone if i % 3 == 1 else later) for i, n in enumerate(names)]
        )
        live = [n for i, n in enumerate(names) if i % 3 != 1]
        for forward in (True, False):
            got = pages(store, PK, limit=3, forward=forward)
            assert [sk for p in got for sk in sks(p)] == (live if forward else live[::-1])
            assert all(len(p) <= 3 for p in got)

    def test_ttls_are_read_against_the_clock_given(self, store: ItemStore) -> None:
        # a ledger with a clock of its own (ManualClock) writes TTLs on its time:
        # reads and conditions take that time, not the wall clock's
        now = datetime.now(UTC)
        clock = [now - timedelta(days=1)]
        store.read_ttl_by(lambda: clock[0])
        assert store.ttl_now() == int(clock[0].timestamp())
        within = past_ttl()  # an hour ago by the wall, a day less an hour ahead of the clock
        store.batch_write(puts=[item("a", ttl=within, gsi1pk="G", gsi1sk="1")])
        store.put(item("b", ttl=within))
        expected = item("a", ttl=within, gsi1pk="G", gsi1sk="1")
        assert store.get(key("a")) == expected
        assert store.query(PK).items == [expected, item("b", ttl=within)]
        assert store.query("G", index="gsi1").items == [expected]
        assert sks(store.batch_get([key("a"), key("b")])) == ["a", "b"]

        def create_b() -> None:
            store.put(item("b", v=2), NotExists("pk"))

        condition_failed(create_b, index=0, reasons=FAILED)
        clock[0] = now  # past the TTL by the clock
        assert store.get(key("a")) is None
        assert store.query(PK).items == []
        create_b()  # an expired item is absent
        assert store.get(key("b")) == item("b", v=2)

    @pytest.mark.parametrize(
        "write",
        [
            lambda s: s.put(item("t", ttl="tomorrow")),
            lambda s: s.put(item("t", ttl=True)),
            lambda s: s.batch_write(puts=[item("t", ttl="1700000000")]),
            lambda s: s.update(key("t"), [Set("ttl", "tomorrow")]),
        ],
        ids=["put-string", "put-bool", "batch-write", "update-set"],
    )
    def test_ttl_must_be_an_integer(
        self, store: ItemStore, write: Callable[[ItemStore], None]
    ) -> None:
        with pytest.raises(StoreValidationError):
            write(store)
        assert store.get(key("t")) is None

    # --- the 400 KB item limit --------------------------------------------------
    def test_an_item_just_under_400kb_is_stored(self, store: ItemStore) -> None:
        blob = "x" * 390_000
        store.put(item("big", blob=blob))
        got = store.get(key("big"))
        assert got is not None
        assert got["blob"] == blob

    @pytest.mark.parametrize(
        "blob", ["x" * 410_000, "é" * 205_000], ids=["ascii", "two-byte-chars"]
    )
    def test_an_item_over_400kb_is_refused(self, store: ItemStore, blob: str) -> None:
        # "é" * 205_000 is only 205 000 characters but 410 000 UTF-8 bytes.
        with pytest.raises(ItemTooLarge):
            store.put(item("huge", blob=blob))
        assert store.get(key("huge")) is None
        assert store.query(PK).items == []

    def test_an_update_past_400kb_is_refused(self, store: ItemStore) -> None:
        store.put(item("grow", blob="x" * 390_000, n=1))
        with pytest.raises(ItemTooLarge):
            store.update(key("grow"), [Set("more", "y" * 30_000), Set("n", 2)])
        got = store.get(key("grow"))
        assert got is not None
        assert got["n"] == 1
        assert "more" not in got

    # --- batch reads and writes ------------------------------------------------
    def test_batch_get_more_than_100_keys(self, store: ItemStore) -> None:
        present = [f"i{i:03}" for i in range(0, 130) if i % 4 != 3]
        store.batch_write(puts=[item(sk, n=int(sk[1:])) for sk in present])
        got = store.batch_get([key(f"i{i:03}") for i in range(130)])
        assert sorted(sks(got)) == present
        assert all(g == item(str(g["sk"]), n=int(str(g["sk"])[1:])) for g in got)
        other = store.batch_get([Key("nobody", "i000"), key("i003"), key("i000")])
        assert sks(other) == ["i000"]

    def test_batch_calls_with_nothing_to_do(self, store: ItemStore) -> None:
        assert store.batch_get([]) == []
        store.batch_write()
        store.batch_write(puts=[], deletes=[])
        assert store.query(PK).items == []

    def test_batch_write_puts_then_deletes(self, store: ItemStore) -> None:
        names = [f"b{i:02}" for i in range(60)]
        store.put(item("b00", stale=True))
        store.batch_write(puts=[item(n, n=i) for i, n in enumerate(names)])
        assert list(store.query_all(PK, page_size=25)) == [
            item(n, n=i) for i, n in enumerate(names)
        ]
        store.batch_write(deletes=[key(n) for n in names[:59]] + [key("never-there")])
        assert store.query(PK).items == [item("b59", n=59)]

    def test_batch_write_puts_and_deletes_together(self, store: ItemStore) -> None:
        store.batch_write(puts=[item(f"old{i:02}") for i in range(30)])
        store.batch_write(
            puts=[item(f"new{i:02}") for i in range(30)],
            deletes=[key(f"old{i:02}") for i in range(30)],
        )
        assert sks(store.query(PK).items) == [f"new{i:02}" for i in range(30)]

    def test_batch_write_validates_everything_before_writing(self, store: ItemStore) -> None:
        puts = [item(f"v{i:02}") for i in range(59)] + [item("v59", bad=refused(0.5))]
        with pytest.raises(StoreValidationError):
            store.batch_write(puts=puts)
        assert store.query(PK).items == []
