"""DynamoDB engine: the boto3 low-level client, one table, two GSIs, TTL.

This module holds the port's operations; around it, by concern:
:mod:`.connection` (the client, requests, retries, metrics: the store holds
one :class:`~.connection.DynamoConnection` and sends through it),
:mod:`.errors` (errors in the port's terms, the retry policy),
:mod:`.expressions` (typed conditions and updates compiled to
expressions with placeholders), :mod:`.values` (AttributeValues),
:mod:`.tokens` (request tokens) and :mod:`.table` (the table's definition,
creation, TTL).

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
bounded, with exponential backoff and full jitter, and counted in
:attr:`DynamoStore.metrics`. Only what is safe to repeat is repeated: every
multi-action ``TransactWriteItems`` carries a ``ClientRequestToken`` (the
caller's, or one made per call; :mod:`.tokens`), so a retry after an
unknown outcome cannot apply it twice; a single action without a token is sent
as a plain ``PutItem`` / ``UpdateItem`` / ``DeleteItem`` (half the write units
of a transaction) and is retried only when it certainly was not applied.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tallybook.errors import ConditionFailed, StoreValidationError, Throttled
from tallybook.store.checks import check_actions, check_batch_write, check_item, check_key
from tallybook.store.dynamodb.connection import DynamoConnection
from tallybook.store.dynamodb.expressions import (
    Expression,
    compile_action,
    compile_sort,
    fold_updates,
)
from tallybook.store.dynamodb.table import TableAdmin, TableSetup, table_definition
from tallybook.store.dynamodb.tokens import RequestTokens
from tallybook.store.dynamodb.values import from_item, key_av, serialize, to_item
from tallybook.store.evaluate import apply_updates, cancelled, evaluate, is_expired
from tallybook.store.meter import CapacityMeter, is_transactional
from tallybook.store.port import (
    Action,
    Delete,
    Item,
    ItemStore,
    Key,
    Page,
    Query,
    Update,
    action_key,
    key_of,
)
from tallybook.store.queries import shape

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25
_DIAGNOSE_ROUNDS = 4


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
        #: the client, the request loop and the metrics it counts
        self.connection = DynamoConnection(table, region=region, endpoint=endpoint, client=client)
        self.table = self.connection.table
        self.metrics = self.connection.metrics
        self._tokens = RequestTokens(self.table)

    @property
    def client(self) -> DynamoDBClient:
        return self.connection.client

    @property
    def endpoint(self) -> str | None:
        return self.connection.endpoint

    @property
    def region(self) -> str:
        return self.connection.region

    def durability(self) -> str:
        return self.connection.durability()

    def describe(self) -> str:
        return self.connection.describe()

    def close(self) -> None:
        self.connection.close()

    @cached_property
    def meter(self) -> CapacityMeter:
        """Prices every request by AWS's rules into :attr:`metrics` (``priced_*``)."""
        return CapacityMeter()

    # -- table management ---------------------------------------------------

    def table_definition(self) -> dict[str, Any]:
        """The ``CreateTable`` arguments for this store's table."""
        return table_definition(self.table)

    def create_table(
        self, wait: bool = True, timeout: float = 600.0, *, stream: bool = True
    ) -> TableSetup:
        """Create the table, its indexes and TTL; an existing table is fine.

        With ``wait`` it returns once the table and both indexes are ACTIVE and
        TTL is on; without, TTL is enabled only if the table is already ACTIVE
        (run it again later). Without ``stream`` a new table has no stream (no
        webhooks: the tests' tables that do not read it).
        """
        return self._table_admin().create(wait, timeout, stream)

    def delete_table(self) -> None:
        """Delete the table and everything in it (a missing table is fine)."""
        self._table_admin().delete()

    def _table_admin(self) -> TableAdmin:
        return TableAdmin(
            self.client,
            self.table,
            translate=self.connection.translate,
            unavailable=self.connection.unavailable,
            sleep=self.connection.sleep,
            poll_seconds=0.1 if self.endpoint else 2.0,
        )

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        check_key(key)
        item = self._get_raw(key, consistent=consistent)
        if item is None or is_expired(item, self.ttl_now()):
            return None
        return item

    def _get_raw(self, key: Key, *, consistent: bool = True) -> Item | None:
        response = self.connection.send(
            "get",
            self.client.get_item,
            {
                "TableName": self.table,
                "Key": key_av(key),
                "ConsistentRead": consistent,
                "ReturnConsumedCapacity": "TOTAL",
            },
        )
        raw = response.get("Item")
        item = to_item(raw) if raw else None
        self.connection.charge("get", self.meter.get(key, item, consistent=consistent))
        return item

    def run_query(self, q: Query) -> Page:
        shaped = shape(q)
        partition, index, limit, consistent = q.partition, q.index, q.limit, q.consistent
        pk_attr, sk_attr = shaped.pk_attr, shaped.sk_attr
        start: dict[str, Any] | None = None
        if shaped.after is not None:
            start = {name: {"S": value} for name, value in shaped.after.items()}
        expr = Expression()
        expr.names["#pk"] = pk_attr
        expr.values[":pk"] = serialize(partition)
        sort_text, possible = compile_sort(q.sort, sk_attr, expr)
        if not possible:
            return Page([])
        key_condition = "#pk = :pk" if sort_text is None else f"#pk = :pk AND {sort_text}"
        now = self.ttl_now()
        params: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": key_condition,
            "FilterExpression": expr.ttl_live(now),
            "ScanIndexForward": q.forward,
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
            response = self.connection.send("query", self.client.query, request)
            page = [to_item(raw) for raw in response.get("Items", [])]
            self.connection.charge(
                "query", self.meter.query(page, index=index, consistent=consistent)
            )
            items.extend(page)
            if limit is not None and len(items) > limit:
                return shaped.page(items)
            start = response.get("LastEvaluatedKey")
            if not start:
                return shaped.page(items)

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        for key in keys:
            check_key(key)
        unique = list(dict.fromkeys(keys))
        now = self.ttl_now()
        out: list[Item] = []

        def send(pending: list[Any]) -> list[Any]:
            response = self.connection.send(
                "batch_get",
                self.client.batch_get_item,
                {
                    "RequestItems": {self.table: {"Keys": pending, "ConsistentRead": consistent}},
                    "ReturnConsumedCapacity": "TOTAL",
                },
            )
            found = [to_item(raw) for raw in response.get("Responses", {}).get(self.table, [])]
            out.extend(item for item in found if not is_expired(item, now))
            unprocessed = response.get("UnprocessedKeys", {}).get(self.table)
            left = list(unprocessed["Keys"]) if unprocessed else []
            missing = len(pending) - len(found) - len(left)
            self.connection.charge(
                "batch_get", self.meter.batch_get(found, missing, consistent=consistent)
            )
            return left

        for begin in range(0, len(unique), BATCH_GET_MAX):
            chunk = [key_av(k) for k in unique[begin : begin + BATCH_GET_MAX]]
            pending = self.connection.send_until_processed("batch_get", chunk, send)
            if pending:
                raise Throttled(
                    f"DynamoDB left {len(pending)} keys unprocessed when the retries ran out"
                )
        return out

    # -- writes -------------------------------------------------------------

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        check_batch_write(puts, deletes)
        requests: list[tuple[Key, dict[str, Any], Item | None]] = [
            (Key(str(i["pk"]), str(i["sk"])), {"PutRequest": {"Item": from_item(i)}}, i)
            for i in puts
        ] + [(k, {"DeleteRequest": {"Key": key_av(k)}}, None) for k in deletes]
        # a batch may not name one key twice: start a new one where it would
        chunks: list[list[dict[str, Any]]] = []
        priced: list[tuple[list[Item], list[Key]]] = []
        seen: set[Key] = set()
        for key, request, item in requests:
            if not chunks or len(chunks[-1]) == BATCH_WRITE_MAX or key in seen:
                chunks.append([])
                priced.append(([], []))
                seen = set()
            chunks[-1].append(request)
            if item is None:
                priced[-1][1].append(key)
            else:
                priced[-1][0].append(item)
            seen.add(key)

        def send(pending: list[Any]) -> list[Any]:
            response = self.connection.send(
                "batch_write",
                self.client.batch_write_item,
                {"RequestItems": {self.table: pending}, "ReturnConsumedCapacity": "TOTAL"},
            )
            return list(response.get("UnprocessedItems", {}).get(self.table, []))

        for chunk, (chunk_puts, chunk_deletes) in zip(chunks, priced, strict=True):
            pending = self.connection.send_until_processed("batch_write", chunk, send)
            if pending:
                self.meter.forget([*map(key_of, chunk_puts), *chunk_deletes])
                raise Throttled(
                    f"DynamoDB left {len(pending)} writes unprocessed when the retries ran "
                    "out; the batch was partly applied"
                )
            self.connection.charge("batch_write", self.meter.batch_write(chunk_puts, chunk_deletes))

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        check_actions(actions)
        for action in actions:
            if isinstance(action, Update):
                fold_updates(action.updates)
        now = self._tokens.now_for(token, self.ttl_now())
        request_token = self._tokens.request_token(token)
        try:
            self._transact_rounds(actions, token, request_token, now)
        except (ConditionFailed, StoreValidationError):
            self.meter.forget(map(action_key, actions))
            # certainly not applied: a later call with this token starts afresh
            if token is not None:
                self._tokens.forget(token)
            raise
        except Exception:
            self.meter.forget(map(action_key, actions))
            raise

    def _transact_rounds(
        self, actions: Sequence[Action], token: str | None, request_token: str, now: int
    ) -> None:
        for round_ in range(_DIAGNOSE_ROUNDS):
            try:
                if is_transactional(actions, token):
                    self._transact(actions, request_token, now)
                else:
                    self._write_one(actions[0], now)
                return
            except ConditionFailed as exc:
                if round_ == _DIAGNOSE_ROUNDS - 1 or not self._diagnose(actions, exc.reasons, now):
                    raise

    def compile_action(self, action: Action, now: int) -> dict[str, Any]:
        """One ``TransactItems`` entry (``{"Put": {...}}``, ...) for ``action``."""
        return compile_action(self.table, action, now)

    def _transact(self, actions: Sequence[Action], token: str, now: int) -> None:
        items = [self.compile_action(a, now) for a in actions]
        with self._charged_if_failed("transact_write", actions, transactional=True):
            self.connection.send(
                "transact_write",
                self.client.transact_write_items,
                {
                    "TransactItems": items,
                    "ClientRequestToken": token,
                    "ReturnConsumedCapacity": "TOTAL",
                },
            )
        self.connection.charge("transact_write", self.meter.write(actions, transactional=True))

    @contextlib.contextmanager
    def _charged_if_failed(
        self, operation: str, actions: Sequence[Action], *, transactional: bool
    ) -> Iterator[None]:
        """Price a request that a failed condition cancelled: AWS charges it all
        the same (:meth:`~tallybook.store.meter.CapacityMeter.failed_write`)."""
        try:
            yield
        except ConditionFailed:
            price = self.meter.failed_write(actions, transactional=transactional)
            self.connection.charge(operation, price)
            raise

    def _write_one(self, action: Action, now: int) -> None:
        ((kind, body),) = self.compile_action(action, now).items()
        call: Callable[..., Any]
        if kind == "Put":
            call = self.client.put_item
        elif kind == "Update":
            call = self.client.update_item
        else:
            call = self.client.delete_item
        operation = kind.lower()  # counted as what was sent: put, update or delete
        # without a token a request of unknown outcome is not sent again
        with self._charged_if_failed(operation, [action], transactional=False):
            self.connection.send(
                operation,
                call,
                {**body, "ReturnConsumedCapacity": "TOTAL"},
                idempotent=False,
            )
        self.connection.charge(operation, self.meter.write([action], transactional=False))

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
            raise cancelled(genuine)
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
            "Key": key_av(key),
            "ConditionExpression": expr.ttl_expired(now),
            "ReturnConsumedCapacity": "TOTAL",
        }
        params.update(expr.params())
        with (
            contextlib.suppress(ConditionFailed),  # replaced or removed meanwhile
            self._charged_if_failed("transact_write", [Delete(key)], transactional=False),
        ):
            self.connection.send("delete", self.client.delete_item, params)
            price = self.meter.write([Delete(key)], transactional=False)
            self.connection.charge("transact_write", price)
