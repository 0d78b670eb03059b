"""One exception hierarchy for the whole project.

The HTTP layer maps each class to a status code and a stable problem ``type``
URI; the CLI maps each to an exit code. Storage errors are named in the
storage's own terms (as DynamoDB names them), ledger errors in the ledger's.
"""

from __future__ import annotations


class TallybookError(Exception):
    """Base class of every error tallybook raises on purpose."""

    #: short stable slug used in problem ``type`` URIs and CLI output
    code = "error"
    #: HTTP status the API answers with
    status = 500
    #: CLI exit code
    exit_code = 1
    #: the stored answer to an earlier request with the same id, given again
    replay = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- configuration ---------------------------------------------------------


class ConfigError(TallybookError):
    """A store URL, program file or setting is malformed."""

    code = "invalid-config"
    status = 400
    exit_code = 2


# --- storage ---------------------------------------------------------------


class StoreError(TallybookError):
    """Base class of errors raised by a storage engine."""

    code = "store-error"
    status = 503


class StoreValidationError(StoreError):
    """A request the store refuses as malformed (bad key, float, duplicate item...)."""

    code = "store-validation"
    status = 400
    exit_code = 2


class ConditionFailed(StoreError):
    """A condition on a write did not hold; nothing was written.

    ``reasons`` has one entry per action of the transaction: ``None`` where the
    action was fine, ``"ConditionalCheckFailed"`` where its condition failed,
    as DynamoDB's cancellation reasons do. ``index`` is the first failing one.
    """

    code = "condition-failed"
    status = 409

    def __init__(self, message: str, reasons: list[str | None] | None = None) -> None:
        super().__init__(message)
        self.reasons: list[str | None] = reasons or []
        failing = [i for i, r in enumerate(self.reasons) if r]
        self.index: int | None = failing[0] if failing else None


class TransactionConflict(StoreError):
    """Another transaction touched the same items at the same time (after retries)."""

    code = "transaction-conflict"
    status = 409


class Throttled(StoreError):
    """The store refused the request for capacity reasons, after retries."""

    code = "throttled"
    status = 429


class ItemTooLarge(StoreError):
    """An item would exceed 400 KB, the DynamoDB item size limit."""

    code = "item-too-large"
    status = 413
    exit_code = 2


class StoreUnavailable(StoreError):
    """The store could not be reached or answered with a server error."""

    code = "store-unavailable"
    status = 503


class DamagedItem(StoreError):
    """A stored item tallybook needs does not read: an attribute missing or of the
    wrong type, as storage corruption or a manual edit leaves it. Nothing was
    written; retrying does not help until the item is repaired (``tallybook
    check`` names what is wrong). A 409: the request conflicts with the state
    the store is in, not with the store's availability."""

    code = "damaged-item"
    status = 409


class StoreClosed(StoreError):
    """The store was closed (``Ledger.close()``, the end of ``with Ledger.open(url)``,
    ``store.close()``): closing is final, so every later call is refused, never
    served by quietly opening it again. Open it anew with ``Ledger.open(url)``."""

    code = "store-closed"
    status = 503

    def __init__(self, store: str) -> None:
        super().__init__(
            f"the ledger's store {store} is closed (close() or the end of its with block): "
            "open it again with Ledger.open(url)"
        )


# --- ledger ----------------------------------------------------------------


class LedgerError(TallybookError):
    """Base class of business-rule errors."""

    code = "ledger-error"
    status = 422
    exit_code = 3


class ValidationError(LedgerError):
    """Bad input: a zero, negative or oversized amount, a malformed id, ..."""

    code = "validation"
    status = 422
    exit_code = 2


class NotFound(LedgerError):
    """A program, account, fund, transaction or other resource does not exist."""

    code = "not-found"
    status = 404
    exit_code = 4


class AlreadyExists(LedgerError):
    """A resource that must be unique exists already."""

    code = "already-exists"
    status = 409
    exit_code = 5


class IdempotencyConflict(LedgerError):
    """The same transaction id was used before with a different request body."""

    code = "idempotency-conflict"
    status = 409
    exit_code = 5


class InsufficientFunds(LedgerError):
    """A debit would take a fund below zero and the fund allows no overdraft."""

    code = "insufficient-funds"
    status = 422
    exit_code = 3


class InvalidState(LedgerError):
    """The operation does not apply in the resource's state (capture after expiry, ...)."""

    code = "invalid-state"
    status = 409
    exit_code = 3


class TooManyRetries(LedgerError):
    """Optimistic concurrency gave up after its bounded retries; safe to retry."""

    code = "too-many-retries"
    status = 503
    exit_code = 6


class PaymentDeclined(LedgerError):
    """The external charge processor declined or timed out; nothing was applied."""

    code = "payment-declined"
    status = 402
    exit_code = 3


# --- access ----------------------------------------------------------------


class Unauthorized(TallybookError):
    """Missing, unknown or revoked API key."""

    code = "unauthorized"
    status = 401
    exit_code = 7


class Forbidden(TallybookError):
    """The key lacks the scope the operation needs."""

    code = "forbidden"
    status = 403
    exit_code = 7
