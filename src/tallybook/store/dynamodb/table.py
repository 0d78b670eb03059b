"""The tallybook table: its definition, its creation and deletion, TTL.

One table keyed ``pk``/``sk`` (strings), the global secondary indexes of
:data:`~tallybook.store.port.INDEX_DEFS` (keys and projection), on-demand
billing, TTL on ``ttl``, and a stream of new images (the outbound event log
reads it: :mod:`tallybook.webhooks.stream`).
:func:`cloudformation_template` describes the same table for deployments.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from tallybook.errors import ConfigError, StoreUnavailable
from tallybook.store.dynamodb.errors import error_code, error_message
from tallybook.store.port import INDEX_DEFS, INDEXES, KEY_ATTRS, TTL_ATTR, IndexDef

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TableDescriptionTypeDef


def _key_schema(hash_attr: str, range_attr: str) -> list[dict[str, str]]:
    return [
        {"AttributeName": hash_attr, "KeyType": "HASH"},
        {"AttributeName": range_attr, "KeyType": "RANGE"},
    ]


def _attribute_definitions() -> list[dict[str, str]]:
    names = [*KEY_ATTRS, *(a for pair in INDEXES.values() for a in pair)]
    return [{"AttributeName": n, "AttributeType": "S"} for n in names]


def _projection(index: IndexDef) -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": index.projection}
    if index.projection == "INCLUDE":
        projection["NonKeyAttributes"] = list(index.include)
    return projection


def _gsis() -> list[dict[str, Any]]:
    return [
        {
            "IndexName": index.name,
            "KeySchema": _key_schema(index.hash_attr, index.range_attr),
            "Projection": _projection(index),
        }
        for index in INDEX_DEFS
    ]


#: the table's stream: new images only (what the event log derives events from)
STREAM_SPECIFICATION: dict[str, Any] = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
#: stream view types that carry the new images the event log reads
NEW_IMAGE_VIEWS = ("NEW_IMAGE", "NEW_AND_OLD_IMAGES")


def table_definition(table: str, *, stream: bool = True) -> dict[str, Any]:
    """The ``CreateTable`` arguments for a tallybook table (``stream``: with the
    stream webhooks read)."""
    return {
        "TableName": table,
        "AttributeDefinitions": _attribute_definitions(),
        "KeySchema": _key_schema(*KEY_ATTRS),
        "GlobalSecondaryIndexes": _gsis(),
        "BillingMode": "PAY_PER_REQUEST",
        "StreamSpecification": STREAM_SPECIFICATION if stream else {"StreamEnabled": False},
    }


def cloudformation_template(table: str) -> dict[str, Any]:
    """A CloudFormation template with the table, its two GSIs and TTL."""
    properties: dict[str, Any] = {
        "TableName": table,
        "AttributeDefinitions": _attribute_definitions(),
        "KeySchema": _key_schema(*KEY_ATTRS),
        "GlobalSecondaryIndexes": _gsis(),
        "BillingMode": "PAY_PER_REQUEST",
        "TimeToLiveSpecification": {"AttributeName": TTL_ATTR, "Enabled": True},
        "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
    }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": f"tallybook ledger table {table}: key pk/sk, indexes gsi1 and gsi2, "
        "TTL on 'ttl'",
        "Resources": {
            "TallybookTable": {
                "Type": "AWS::DynamoDB::Table",
                "DeletionPolicy": "Retain",
                "UpdateReplacePolicy": "Retain",
                "Properties": properties,
            }
        },
        "Outputs": {
            "TableName": {"Value": {"Ref": "TallybookTable"}},
            "TableArn": {"Value": {"Fn::GetAtt": ["TallybookTable", "Arn"]}},
            "StoreUrl": {
                "Value": {
                    "Fn::Sub": "dynamodb://${TallybookTable}?region=${AWS::Region}",
                }
            },
        },
    }


@dataclass(frozen=True, slots=True)
class TableSetup:
    """What :meth:`DynamoStore.create_table` did."""

    table: str
    created: bool
    ttl_enabled: bool
    status: str

    def summary(self) -> str:
        first = "created table" if self.created else "table exists:"
        ttl = "TTL on 'ttl' enabled now" if self.ttl_enabled else "TTL on 'ttl' already enabled"
        stream = ", stream of new images"
        if self.status != "ACTIVE":
            ttl = f"status {self.status}; run again to enable TTL once it is ACTIVE"
            stream = "" if not self.created else stream
        return f"{first} {self.table} (key pk/sk, indexes gsi1 and gsi2, {ttl}{stream})"


@dataclass(frozen=True, slots=True)
class TableAdmin:
    """Creates, checks and deletes one table; errors come out in the port's terms."""

    client: DynamoDBClient
    table: str
    translate: Callable[[ClientError], Exception]
    unavailable: Callable[[Exception], Exception]
    sleep: Callable[[float], None]
    #: seconds between two looks at a table being created
    poll_seconds: float

    def create(self, wait: bool, timeout: float, stream: bool = True) -> TableSetup:
        """Create the table, its indexes and TTL; an existing table is fine.

        With ``wait`` it returns once the table and both indexes are ACTIVE and
        TTL is on; without, TTL is enabled only if the table is already ACTIVE
        (run it again later).
        """
        created = True
        try:
            self.client.create_table(**table_definition(self.table, stream=stream))
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                raise self.translate(exc) from exc
            created = False
        except BotoCoreError as exc:
            raise self.unavailable(exc) from exc
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self.status()
            except StoreUnavailable:
                # a new table may take a moment to be described
                if not (created and wait) or time.monotonic() > deadline:
                    raise
                status = "CREATING"
            if status == "ACTIVE" or not wait:
                break
            if time.monotonic() > deadline:
                raise StoreUnavailable(f"table {self.table} not ACTIVE after {timeout:.0f}s")
            self.sleep(self.poll_seconds)
        if status == "ACTIVE" and not created and stream:
            self.stream_enabled()  # refuse another stream before changing anything
        ttl_enabled = self.enable_ttl() if status == "ACTIVE" else False
        if status == "ACTIVE" and not created and stream:
            self.enable_stream()
        return TableSetup(self.table, created, ttl_enabled, status)

    def describe(self) -> TableDescriptionTypeDef:
        """The table's description (``DescribeTable``), errors translated."""
        try:
            return self.client.describe_table(TableName=self.table)["Table"]
        except ClientError as exc:
            raise self.translate(exc) from exc
        except BotoCoreError as exc:
            raise self.unavailable(exc) from exc

    def status(self) -> str:
        """The table's status, once its key and indexes are found as tallybook needs."""
        desc = self.describe()
        keys = {k["AttributeName"]: k["KeyType"] for k in desc.get("KeySchema", [])}
        if keys != {"pk": "HASH", "sk": "RANGE"}:
            raise ConfigError(
                f"table {self.table} exists with key {keys}, not pk (HASH) / sk (RANGE)"
            )
        indexes = {g["IndexName"]: g for g in desc.get("GlobalSecondaryIndexes", [])}
        missing = [name for name in INDEXES if name not in indexes]
        if missing:
            raise ConfigError(f"table {self.table} exists without index(es) {', '.join(missing)}")
        for index in INDEX_DEFS:
            found = indexes[index.name]
            index_keys = {k["AttributeName"]: k["KeyType"] for k in found.get("KeySchema", [])}
            projection = found.get("Projection", {}).get("ProjectionType")
            if index_keys != {index.hash_attr: "HASH", index.range_attr: "RANGE"}:
                raise ConfigError(
                    f"table {self.table} has index {index.name} keyed {index_keys}, not "
                    f"{index.hash_attr} (HASH) / {index.range_attr} (RANGE)"
                )
            if projection != index.projection:
                raise ConfigError(
                    f"table {self.table} has index {index.name} projecting {projection}, "
                    f"not {index.projection}"
                )
        status = str(desc.get("TableStatus", ""))
        if status == "ACTIVE" and any(
            indexes[name].get("IndexStatus", "ACTIVE") != "ACTIVE" for name in INDEXES
        ):
            return "INDEX_CREATING"
        return status

    def enable_ttl(self) -> bool:
        """Turn TTL on for ``ttl``; whether this call turned it on."""
        try:
            current = self.client.describe_time_to_live(TableName=self.table)
            desc = current.get("TimeToLiveDescription", {})
            if desc.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
                if desc.get("AttributeName") != TTL_ATTR:
                    raise ConfigError(
                        f"table {self.table} has TTL on {desc.get('AttributeName')!r}, "
                        f"not {TTL_ATTR!r}"
                    )
                return False
            self.client.update_time_to_live(
                TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTR},
            )
            return True
        except ClientError as exc:
            if "already enabled" in error_message(exc).lower():
                return False
            raise self.translate(exc) from exc
        except BotoCoreError as exc:
            raise self.unavailable(exc) from exc

    def stream_enabled(self) -> bool:
        """Whether the table has its stream of new images; another stream is refused."""
        desc = self.describe()
        stream = desc.get("StreamSpecification", {})
        if not stream.get("StreamEnabled"):
            return False
        view = stream.get("StreamViewType")
        if view not in NEW_IMAGE_VIEWS:
            raise ConfigError(
                f"table {self.table} has a stream of {view}, not of new images "
                "(webhook events are derived from them): turn it off, then run "
                "`tallybook table create` again"
            )
        return True

    def enable_stream(self) -> bool:
        """Turn the NEW_IMAGE stream on for a table made before it; whether this did."""
        if self.stream_enabled():
            return False
        try:
            self.client.update_table(
                TableName=self.table,
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
            )
            return True
        except ClientError as exc:
            raise self.translate(exc) from exc
        except BotoCoreError as exc:
            raise self.unavailable(exc) from exc

    def delete(self) -> None:
        """Delete the table and everything in it (a missing table is fine)."""
        try:
            self.client.delete_table(TableName=self.table)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise self.translate(exc) from exc
        except BotoCoreError as exc:
            raise self.unavailable(exc) from exc
