"""tallybook: a rewards, loyalty and wallet ledger on DynamoDB or SQLite."""

from tallybook.domain.model import (
    Account,
    Balance,
    Entry,
    FundSpec,
    Leg,
    PostedLeg,
    Program,
    Transaction,
)
from tallybook.errors import (
    AlreadyExists,
    ConditionFailed,
    ConfigError,
    Forbidden,
    IdempotencyConflict,
    InsufficientFunds,
    InvalidState,
    ItemTooLarge,
    LedgerError,
    NotFound,
    PaymentDeclined,
    StoreError,
    TallybookError,
    Throttled,
    TooManyRetries,
    TransactionConflict,
    Unauthorized,
    ValidationError,
)
from tallybook.ledger import Ledger
from tallybook.services.clock import Clock, ManualClock, SystemClock
from tallybook.store.url import DEFAULT_STORE_URL, open_store

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STORE_URL",
    "Account",
    "AlreadyExists",
    "Balance",
    "Clock",
    "ConditionFailed",
    "ConfigError",
    "Entry",
    "Forbidden",
    "FundSpec",
    "IdempotencyConflict",
    "InsufficientFunds",
    "InvalidState",
    "ItemTooLarge",
    "Ledger",
    "LedgerError",
    "Leg",
    "ManualClock",
    "NotFound",
    "PaymentDeclined",
    "PostedLeg",
    "Program",
    "StoreError",
    "SystemClock",
    "TallybookError",
    "Throttled",
    "TooManyRetries",
    "Transaction",
    "TransactionConflict",
    "Unauthorized",
    "ValidationError",
    "open_store",
]
