"""DynamoDB's errors in the port's terms, and which of them are retried.

Throttling, transaction conflicts and server errors may be sent again, with
exponential backoff and full jitter, under :data:`RETRY_POLICY` (at most
:data:`MAX_ATTEMPTS` sends for a call on its own; within a service operation,
the operation's shared budget, :mod:`tallybook.retry`); a request of unknown
outcome (5xx, lost connection) only when repeating it is safe. Everything else
becomes one of :mod:`tallybook.errors` at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import NoReturn

from botocore.exceptions import (
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
)
from tallybook.retry import RetryPolicy

MAX_ATTEMPTS = 8
#: the engine's retry loop: its backoff shape, and the budget of a call made on its own
RETRY_POLICY = RetryPolicy(attempts=MAX_ATTEMPTS, seconds=30.0, base_seconds=0.02, cap_seconds=1.0)

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
#: connection errors raised before the request left: always safe to send again
NOT_SENT = (EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError)


#: DynamoDB's answer to a query on an index the table lacks
_MISSING_INDEX = re.compile(r"does not have the specified index: ?([\w.-]+)")
#: DynamoDB's answers to a key that does not match the table's key schema (a
#: key the engine sends always has pk and sk, strings: the table's key differs)
_KEY_SCHEMA_MESSAGES = (
    "The provided key element does not match the schema",
    "One of the required keys was not given a value",
    "The number of conditions on the keys is invalid",
    "Query condition missed key schema element",
    "One or more parameter values were invalid: Type mismatch for key",
    "One or more parameter values were invalid: Missing the key",
)


class RetryableError(Exception):
    """The request may be sent again."""

    def __init__(self, kind: str, error: Exception) -> None:
        super().__init__(kind)
        self.kind = kind  # "throttle" | "conflict" | "server"
        self.error = error


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: ClientError) -> str:
    """The error's message on one line (an endpoint that is not DynamoDB may
    answer a whole HTML page), at most 300 characters."""
    text = " ".join(str(exc.response.get("Error", {}).get("Message", "")).split())
    if len(text) > 300:
        text = text[:299] + "…"
    return text or error_code(exc)


def _not_dynamodb(exc: ClientError, where: str) -> str | None:
    """What to say of an answer that does not come from DynamoDB's API (an
    HTML page, a bare HTTP status as the error code), else None."""
    code = error_code(exc)
    raw = str(exc.response.get("Error", {}).get("Message", "")).lstrip()
    if not (code.isdigit() or raw.startswith("<")):
        return None
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or code
    return (
        f"{where} answered HTTP {status}, not as DynamoDB answers: "
        "is the endpoint a DynamoDB endpoint?"
    )


def says_ten_actions(message: str) -> bool:
    """Whether an endpoint refused a transaction for holding more than 10 actions
    (DynamoDB Local builds before 2022; AWS and DynamoDB Local 3.x take 100)."""
    return "length less than or equal to 10" in message


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


def classify(
    exc: ClientError, *, idempotent: bool, translate: Callable[[ClientError], Exception]
) -> NoReturn:
    """Raise :class:`RetryableError` for a retryable error, else the port's error."""
    code = error_code(exc)
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
            raise RetryableError("conflict", exc)
        if any(c in _THROTTLE_REASONS for c in codes):
            raise RetryableError("throttle", exc)
        raise StoreUnavailable(f"transaction cancelled: {error_message(exc)}")
    if code == "ConditionalCheckFailedException":
        raise ConditionFailed("the condition of the write failed", ["ConditionalCheckFailed"])
    if code in _CONFLICT_CODES:
        raise RetryableError("conflict", exc)
    if code in _THROTTLE_CODES:
        raise RetryableError("throttle", exc)
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code in _SERVER_CODES or status >= 500:
        if idempotent:
            raise RetryableError("server", exc)
        raise StoreUnavailable(
            f"DynamoDB failed ({code or status}) during a write, which may or may not "
            "have been applied; pass a token to make retries safe"
        )
    raise translate(exc)


def translate(exc: ClientError, *, table: str, endpoint: str | None, url: str) -> Exception:
    """The port's error for a DynamoDB error that is not retried.

    ``url`` is the store's URL, quoted in the hint to create a missing table.
    """
    code = error_code(exc)
    message = error_message(exc)
    if code == "ValidationException":
        if _too_large(message):
            return ItemTooLarge(f"an item would exceed the 400 KB limit: {message}")
        remedy = (
            "it was not made by `tallybook table create`: make a new table with it, "
            "or give this one what it makes (docs/table-design.md)"
        )
        missing_index = _MISSING_INDEX.search(message)
        if missing_index:
            index = missing_index[1]
            return StoreUnavailable(
                f"table {table} has no index {index} (key {index}pk/{index}sk, "
                f"strings, projection ALL); {remedy}"
            )
        if any(text in message for text in _KEY_SCHEMA_MESSAGES):
            return StoreUnavailable(
                f"table {table} is not keyed pk/sk (strings) ({message}); {remedy}"
            )
        if says_ten_actions(message):
            return StoreValidationError(
                f"{endpoint or 'DynamoDB'} takes at most 10 actions per transaction, "
                "AWS takes 100: an old DynamoDB Local? scripts/dynamodb-local.sh "
                f"runs DynamoDB Local 3.3.1 ({message})"
            )
        return StoreValidationError(f"DynamoDB refused the request: {message}")
    if code == "IdempotentParameterMismatchException":
        return StoreValidationError(
            "this transaction token was used in the last ten minutes for a different transaction"
        )
    if code == "ResourceNotFoundException":
        return StoreUnavailable(
            f"table {table} does not exist; create it with `tallybook table create --store '{url}'`"
        )
    if code in _AUTH_CODES:
        return ConfigError(f"DynamoDB refused the credentials: {message}")
    if code in _THROTTLE_CODES:
        return Throttled(f"DynamoDB throttled the request: {message}")
    return StoreUnavailable(
        _not_dynamodb(exc, endpoint or "DynamoDB") or f"DynamoDB error {code}: {message}"
    )


def unavailable(exc: Exception, *, where: str) -> Exception:
    """The port's error for a request that could not be answered at ``where``."""
    if isinstance(exc, NoCredentialsError):
        return ConfigError(
            "no AWS credentials found (environment, ~/.aws, instance role); "
            "set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
        )
    if isinstance(exc, ClientError):
        return StoreUnavailable(
            _not_dynamodb(exc, where) or f"DynamoDB kept failing: {error_message(exc)}"
        )
    return StoreUnavailable(f"cannot reach {where}: {exc}")
