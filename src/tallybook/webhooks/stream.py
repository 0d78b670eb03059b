"""Events on DynamoDB: read from the table's stream (NEW_IMAGE), nothing added to writes.

The reader walks the shards of the table's latest stream from the checkpoint
it stored for each (``WHSTREAM`` rows in the table) or from the oldest record
kept (``TRIM_HORIZON``: the stream keeps 24 hours, so a worker must run at
least that often). It follows the shards' lineage (:func:`readable`): a shard
is read only once its parent (``ParentShardId``) is drained, that is, read to
its end, or is no longer listed (trimmed), because DynamoDB orders an item's
records within a shard and its lineage, not across shards. Each record's new image
goes through :func:`tallybook.webhooks.events.derive`; the events are handed to
a sink (the fan-out) and only then is the checkpoint advanced, so a worker
killed in between reads the records again, and the fan-out, idempotent by
event id, skips what it stored. An event's log position is its record's
sequence number, which orders the records of a shard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, cast

import boto3
from botocore.exceptions import ClientError

from tallybook.errors import ConfigError
from tallybook.store.dynamodb.connection import DynamoConnection, _has_credentials
from tallybook.store.dynamodb.errors import error_code
from tallybook.store.dynamodb.store import DynamoStore
from tallybook.store.dynamodb.table import NEW_IMAGE_VIEWS
from tallybook.store.dynamodb.values import to_item
from tallybook.store.port import ItemStore
from tallybook.store.records.webhook_changes import event_position
from tallybook.store.records.webhooks import (
    Checkpoint,
    is_checkpoint_record,
    read_checkpoint,
    save_checkpoint,
)
from tallybook.webhooks.events import Event, derive
from tallybook.webhooks.log import unwrap

Sink = Callable[[Sequence[tuple[Event, str]]], int]
_PAGE = 1000
#: records read between two checkpoint writes, at most
_CHECKPOINT_EVERY = 5000


def stream_reader(store: ItemStore) -> StreamReader | None:
    """A reader when ``store`` is DynamoDB, else ``None``."""
    engine = unwrap(store)
    if not isinstance(engine, DynamoStore):
        return None
    return StreamReader(store, engine.connection)


def events_of(records: Sequence[dict[str, Any]]) -> list[tuple[Event, str]]:
    """The events of stream records, each with its log position."""
    out: list[tuple[Event, str]] = []
    for record in records:
        change = record.get("dynamodb", {})
        image = change.get("NewImage")
        if record.get("eventName") == "REMOVE" or not image:
            continue
        seq = int(change["SequenceNumber"])
        item = to_item({name: _repair(av) for name, av in image.items()})
        out += [(e, event_position(seq, 0, i)) for i, e in enumerate(derive(item))]
    return out


def _repair(av: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB Local 3.3.1's stream gives an empty map as ``{}``: make it ``{"M": {}}``."""
    if not av:
        return {"M": {}}
    if "M" in av:
        return {"M": {k: _repair(v) for k, v in av["M"].items()}}
    if "L" in av:
        return {"L": [_repair(v) for v in av["L"]]}
    return av


class StreamReader:
    def __init__(self, store: ItemStore, engine: DynamoConnection) -> None:
        self.store = store
        self.engine = engine
        kwargs: dict[str, Any] = {"region_name": engine.region}
        if engine.endpoint:
            kwargs["endpoint_url"] = engine.endpoint
            if not _has_credentials():
                kwargs["aws_access_key_id"] = "local"
                kwargs["aws_secret_access_key"] = "local"  # noqa: S105 - DynamoDB Local
        self._arn: str | None = None
        self.client: Any = boto3.session.Session().client("dynamodbstreams", **kwargs)

    def stream_arn(self) -> str:
        if self._arn is None:
            self._arn = self._describe()
        return self._arn

    def _describe(self) -> str:
        table = self.engine.client.describe_table(TableName=self.engine.table)["Table"]
        arn = table.get("LatestStreamArn")
        spec = table.get("StreamSpecification", {})
        if not arn or not spec.get("StreamEnabled"):
            raise ConfigError(
                f"table {self.engine.table} has no stream; run `tallybook table create` "
                "to enable it (NEW_IMAGE)"
            )
        if spec.get("StreamViewType") not in NEW_IMAGE_VIEWS:
            # its records carry no item to derive events from: every one would be lost
            raise ConfigError(
                f"table {self.engine.table} has a stream of {spec.get('StreamViewType')}, "
                "not of new images: turn it off, then run `tallybook table create`"
            )
        return arn

    def shards(self, arn: str) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        start: str | None = None
        while True:
            args: dict[str, Any] = {"StreamArn": arn}
            if start:
                args["ExclusiveStartShardId"] = start
            desc = self.client.describe_stream(**args)["StreamDescription"]
            shards += cast(list[dict[str, Any]], desc.get("Shards", []))
            start = desc.get("LastEvaluatedShardId")
            if not start:
                break
        return sorted(shards, key=_start)

    def read(self, sink: Sink) -> int:
        """Read every readable shard to its current end, parents before children (a
        child whose parent is drained in this pass is read in it too); the number of
        new events."""
        arn = self.stream_arn()
        shards = self.shards(arn)
        drained = {s["ShardId"] for s in shards if read_checkpoint(self.store, s["ShardId"]).closed}
        new = 0

        def read_one(shard_id: str) -> bool:
            nonlocal new
            added, closed = self._read_shard(arn, shard_id, sink)
            new += added
            return closed

        in_lineage_order(shards, drained, read_one)
        return new

    def _iterator(self, arn: str, shard_id: str, after: str | None) -> str | None:
        args: dict[str, Any] = {"StreamArn": arn, "ShardId": shard_id}
        if after:
            args.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after)
        else:
            args["ShardIteratorType"] = "TRIM_HORIZON"
        try:
            return cast(str, self.client.get_shard_iterator(**args)["ShardIterator"])
        except ClientError as exc:
            if error_code(exc) == "TrimmedDataAccessException" and after:
                return self._iterator(arn, shard_id, None)
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise

    def _read_shard(self, arn: str, shard_id: str, sink: Sink) -> tuple[int, bool]:
        """Read one shard to its current end: (new events, whether it is drained).
        The checkpoint is written every few pages and at the end, unless all that
        was read since is checkpoint rows (whose own records would otherwise keep
        an idle worker writing)."""
        checkpoint = read_checkpoint(self.store, shard_id)
        if checkpoint.closed:
            return 0, True
        iterator = self._iterator(arn, shard_id, checkpoint.seq)
        new = unsaved = 0
        last: str | None = None
        while iterator:
            answer = self.client.get_records(ShardIterator=iterator, Limit=_PAGE)
            records = cast(list[dict[str, Any]], answer.get("Records", []))
            iterator = answer.get("NextShardIterator")
            if records:
                new += sink(events_of(records))
                last = records[-1]["dynamodb"]["SequenceNumber"]
                unsaved += sum(1 for r in records if not is_checkpoint_record(r))
            if iterator is None:
                save_checkpoint(self.store, shard_id, Checkpoint(closed=True))
                return new, True
            if unsaved and (not records or unsaved >= _CHECKPOINT_EVERY):
                save_checkpoint(self.store, shard_id, Checkpoint(seq=last))
                unsaved = 0
            if not records:
                break
        return new, iterator is None


def readable(
    shards: Sequence[Mapping[str, Any]], drained: AbstractSet[str], done: AbstractSet[str]
) -> list[str]:
    """The ids of the shards that may be read now, oldest first: neither drained nor
    ``done`` (read in this pass), and whose parent is drained or not listed (its
    records are past the stream's 24 hours, or it was never listed)."""
    listed = {s["ShardId"] for s in shards}
    out: list[str] = []
    for shard in sorted(shards, key=_start):
        shard_id, parent = shard["ShardId"], shard.get("ParentShardId")
        if shard_id in drained or shard_id in done:
            continue
        if parent and parent in listed and parent not in drained:
            continue
        out.append(shard_id)
    return out


def in_lineage_order(
    shards: Sequence[Mapping[str, Any]], drained: AbstractSet[str], read: Callable[[str], bool]
) -> list[str]:
    """Call ``read`` (which says whether it drained the shard) on each shard once,
    in :func:`readable` order, until no shard is readable; the ids read, in order."""
    now_drained, done = set(drained), list[str]()
    while todo := readable(shards, now_drained, set(done)):
        for shard_id in todo:
            done.append(shard_id)
            if read(shard_id):
                now_drained.add(shard_id)
    return done


def _start(shard: Mapping[str, Any]) -> int:
    return int(shard["SequenceNumberRange"]["StartingSequenceNumber"])
