"""Small helpers shared by the storage-port contract suite (and tests of wrappers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import pytest

from tallybook.errors import ConditionFailed
from tallybook.store.evaluate import now_epoch
from tallybook.store.port import Item, ItemStore, Key, SortCondition, Value

PK = "contract"


def key(sk: str, pk: str = PK) -> Key:
    return Key(pk, sk)


def item(sk: str, pk: str = PK, **attrs: Value) -> Item:
    return {"pk": pk, "sk": sk, **attrs}


def refused(value: object) -> Value:
    """A value the port refuses (a float, say), typed as one so the call type-checks."""
    return cast("Value", value)


def past_ttl() -> int:
    """A TTL an hour ago: the item is expired."""
    return now_epoch() - 3600


def future_ttl() -> int:
    """A TTL an hour ahead: the item is live."""
    return now_epoch() + 3600


def sks(items: Sequence[Item]) -> list[str]:
    return [str(i["sk"]) for i in items]


def pages(
    store: ItemStore,
    partition: str,
    *,
    limit: int,
    forward: bool = True,
    sort: SortCondition | None = None,
    index: str | None = None,
    max_pages: int = 100,
) -> list[list[Item]]:
    """Every page of a query, following cursors until there is none."""
    out: list[list[Item]] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = store.query(
            partition, sort, index=index, forward=forward, limit=limit, cursor=cursor
        )
        assert len(page.items) <= limit
        out.append(page.items)
        if page.cursor is None:
            return out
        cursor = page.cursor
    raise AssertionError(f"query did not finish within {max_pages} pages")


def condition_failed(
    action: Callable[[], object], *, index: int, reasons: Sequence[str | None]
) -> ConditionFailed:
    """Run ``action``, which must raise ConditionFailed with exactly these details."""
    with pytest.raises(ConditionFailed) as info:
        action()
    exc = info.value
    assert exc.index == index
    assert exc.reasons == list(reasons)
    return exc
