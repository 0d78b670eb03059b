"""The stream reader's shard lineage rule, on shard lists as DescribeStream gives them:
a child shard is read only after its parent is drained (read to its end) or gone.

DynamoDB Local keeps one shard per table, so splits cannot be made happen there;
these lists are written the way AWS describes a split (a closed parent with an
``EndingSequenceNumber``, children naming it as ``ParentShardId``)."""

from __future__ import annotations

from typing import Any

from tallybook.webhooks.stream import in_lineage_order, readable


def shard(shard_id: str, start: int, parent: str | None = None, end: int | None = None) -> Any:
    seq: dict[str, str] = {"StartingSequenceNumber": str(start)}
    if end is not None:
        seq["EndingSequenceNumber"] = str(end)
    described: dict[str, Any] = {"ShardId": shard_id, "SequenceNumberRange": seq}
    if parent is not None:
        described["ParentShardId"] = parent
    return described


SPLIT = [
    shard("child-b", 300, parent="parent"),
    shard("parent", 100, end=299),
    shard("child-a", 300, parent="parent"),
]


def test_children_wait_until_their_parent_is_drained() -> None:
    assert readable(SPLIT, drained=set(), done=set()) == ["parent"]
    assert readable(SPLIT, drained=set(), done={"parent"}) == []  # read, not to its end
    assert readable(SPLIT, drained={"parent"}, done={"parent"}) == ["child-b", "child-a"]


def test_a_child_whose_parent_is_no_longer_listed_is_read() -> None:
    trimmed = [shard("child", 300, parent="gone-past-24-hours")]
    assert readable(trimmed, drained=set(), done=set()) == ["child"]


def test_lineages_proceed_independently_oldest_first() -> None:
    shards = [
        shard("late", 900),
        shard("blocked", 500, parent="open-parent"),
        shard("open-parent", 50),
        shard("early", 10),
    ]
    assert readable(shards, drained=set(), done=set()) == ["early", "open-parent", "late"]


def test_one_pass_reads_a_chain_in_order_when_each_parent_drains() -> None:
    chain = [
        shard("grandchild", 500, parent="child"),
        shard("child", 300, parent="parent", end=499),
        shard("parent", 100, end=299),
    ]
    calls: list[str] = []

    def read(shard_id: str) -> bool:
        calls.append(shard_id)
        return shard_id != "grandchild"  # the open tip is not drained

    assert in_lineage_order(chain, set(), read) == ["parent", "child", "grandchild"]
    assert calls == ["parent", "child", "grandchild"]


def test_a_parent_not_drained_in_this_pass_holds_its_children_to_the_next() -> None:
    calls: list[str] = []

    def read(shard_id: str) -> bool:
        calls.append(shard_id)
        return False  # stopped early (an empty page before the end)

    assert in_lineage_order(SPLIT, set(), read) == ["parent"]
    # the next pass: the parent's checkpoint says it is drained
    assert in_lineage_order(SPLIT, {"parent"}, read) == ["child-b", "child-a"]
    assert calls == ["parent", "child-b", "child-a"]


def test_drained_shards_are_not_read_again() -> None:
    assert in_lineage_order(SPLIT, {"parent", "child-a", "child-b"}, lambda _: True) == []
