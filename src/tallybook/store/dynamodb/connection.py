"""The DynamoDB engine's side of the endpoint: one client, what the endpoint
accepts, and requests sent with bounded retries, their consumed capacity
counted in the store's metrics and their errors turned into the port's
(:mod:`tallybook.store.dynamodb.errors`).

Only what is safe to repeat is repeated: a request whose outcome is unknown
(timeout, dropped connection, 5xx) is sent again only when ``idempotent``;
transactions carry request tokens (:mod:`tallybook.store.dynamodb.tokens`).

:class:`~tallybook.store.dynamodb.DynamoStore` holds one connection (it is
not one): the store says what to send, the connection sends it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from tallybook.errors import (
    ConfigError,
    StoreClosed,
    StoreUnavailable,
    TallybookError,
    Throttled,
    TransactionConflict,
)
from tallybook.retry import retrying
from tallybook.store.dynamodb.errors import (
    NOT_SENT,
    RETRY_POLICY,
    RetryableError,
    classify,
    translate,
    unavailable,
)
from tallybook.store.meter import Price, record_price
from tallybook.store.port import StoreMetrics

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

DEFAULT_REGION = "us-east-1"
_READS = ("get", "query", "batch_get")


class DynamoConnection:
    """The client and the request loop of :class:`~tallybook.store.dynamodb.DynamoStore`
    (whose docstring says what the arguments mean), and the metrics they count."""

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
        self.metrics = StoreMetrics()
        self._metrics_lock = threading.Lock()
        #: how retries wait (tests replace it)
        self.sleep: Callable[[float], None] = time.sleep
        self._owns_client = client is None
        self._closed = False
        if client is not None:
            self.region = region or client.meta.region_name or DEFAULT_REGION
            self.client = client
            return
        session = boto3.session.Session()
        self.region = region or session.region_name or DEFAULT_REGION
        config = Config(
            # botocore sends each request once: the engine's loop owns the retries
            # (its ``max_attempts`` counts retries, so 1 meant two sends per attempt)
            retries={"total_max_attempts": 1, "mode": "standard"},
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
        try:
            self.client = session.client("dynamodb", **kwargs)
        except (ValueError, BotoCoreError) as exc:  # a malformed endpoint or region
            raise ConfigError(
                f"cannot use DynamoDB region {self.region!r}"
                + (f" at endpoint {self.endpoint!r}" if self.endpoint else "")
                + f": {exc}"
            ) from exc

    def durability(self) -> str:
        return "DynamoDB acknowledges a write once it is stored durably (replicated across zones)"

    def describe(self) -> str:
        url = f"dynamodb://{self.table}?region={quote(self.region, safe='')}"
        if self.endpoint:
            url += f"&endpoint={quote(self.endpoint, safe=':/')}"
        return url

    def close(self) -> None:
        """Close the client (one given to the store stays open); the store refuses
        any later request (:class:`StoreClosed`), the table's management aside."""
        self._closed = True
        if self._owns_client:
            self.client.close()

    # -- metrics ------------------------------------------------------------

    def charge(self, operation: str, price: Price) -> None:
        """Count what the meter priced a request at (``priced_*`` in :attr:`metrics`)."""
        with self._metrics_lock:
            record_price(self.metrics, operation, price)

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
                if operation in _READS:
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
            elif kind == "failed":
                stats.failed += 1

    # -- requests -----------------------------------------------------------

    def send(
        self,
        operation: str,
        call: Callable[..., Any],
        params: Mapping[str, Any],
        *,
        idempotent: bool = True,
    ) -> dict[str, Any]:
        """Send one request, retrying what may be retried; errors become port errors.

        ``idempotent`` says whether a request whose outcome is unknown (timeout,
        dropped connection, 5xx) may be sent again. Every attempt counts as a
        request; a call that ends in an error (a failed condition included)
        also counts as ``failed``.
        """
        if self._closed:
            raise StoreClosed(self.describe())
        try:
            return self._attempts(operation, call, params, idempotent)
        except TallybookError:
            self._count(operation, kind="failed")
            raise

    def _attempts(
        self,
        operation: str,
        call: Callable[..., Any],
        params: Mapping[str, Any],
        idempotent: bool,
    ) -> dict[str, Any]:
        last: RetryableError | None = None
        sent = 0
        with retrying(RETRY_POLICY, sleep=self.sleep) as tries:
            for _ in tries:
                sent += 1
                if last is not None:
                    self._count(operation, retry=True)
                try:
                    response: dict[str, Any] = call(**params)
                except ClientError as exc:
                    self._record(operation, None)
                    try:
                        classify(exc, idempotent=idempotent, translate=self.translate)
                    except RetryableError as retry:
                        self._count(operation, kind=retry.kind)
                        last = retry
                        continue
                    raise AssertionError("unreachable") from exc  # pragma: no cover
                except BotoCoreError as exc:
                    self._record(operation, None)
                    if isinstance(exc, NOT_SENT) or (
                        idempotent and not isinstance(exc, NoCredentialsError)
                    ):
                        last = RetryableError("server", exc)
                        continue
                    if not idempotent and not isinstance(exc, NoCredentialsError):
                        raise StoreUnavailable(
                            f"lost the connection to {self.endpoint or 'DynamoDB'} during a "
                            f"write, which may or may not have been applied: {exc}"
                        ) from exc
                    raise self.unavailable(exc) from exc
                self._record(operation, response)
                return response
        assert last is not None
        if last.kind == "conflict":
            raise TransactionConflict(
                f"{operation} kept conflicting with concurrent transactions "
                f"({sent} attempts); try again"
            ) from last.error
        if last.kind == "throttle":
            raise Throttled(
                f"DynamoDB throttled {operation} ({sent} attempts); try again"
            ) from last.error
        raise self.unavailable(last.error) from last.error

    def send_until_processed(
        self, operation: str, pending: list[Any], send: Callable[[list[Any]], list[Any]]
    ) -> list[Any]:
        """Send a batch, then what each answer left unprocessed, with backoff.

        ``send`` sends what it is given and returns what was left; this
        returns what is still left when the retry budget is spent.
        """
        with retrying(RETRY_POLICY, sleep=self.sleep) as tries:
            for attempt in tries:
                if attempt:
                    self._count(operation, retry=True, kind="throttle")
                pending = send(pending)
                if not pending:
                    break
        return pending

    # -- errors -------------------------------------------------------------

    def translate(self, exc: ClientError) -> Exception:
        return translate(exc, table=self.table, endpoint=self.endpoint, url=self.describe())

    def unavailable(self, exc: Exception) -> Exception:
        return unavailable(exc, where=self.endpoint or f"DynamoDB in {self.region}")


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
