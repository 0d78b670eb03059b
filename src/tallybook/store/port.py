"""The item-store port: a small, typed mirror of DynamoDB's data model.

Every engine implements :class:`ItemStore`. Items are dicts of top-level
attributes; the key is ``pk`` / ``sk`` (strings). Two global secondary indexes
(``gsi1``, ``gsi2``) are keyed by the attributes ``gsi1pk``/``gsi1sk`` and
``gsi2pk``/``gsi2sk``; an item appears in an index only when it has both. The
attribute ``ttl`` (epoch seconds) makes an item invisible once passed.

Conditions and updates are values, never expression strings: the DynamoDB
engine compiles them to expressions with placeholders, the SQLite engine
evaluates them with :func:`tallybook.store.evaluate.evaluate`. What an
engine checks before writing is in :mod:`tallybook.store.checks`; what both
engines share to answer a query, in :mod:`tallybook.store.queries`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, TypeAlias

from tallybook.errors import StoreValidationError

Value: TypeAlias = "str | int | bool | list[Value] | dict[str, Value] | None"
Item: TypeAlias = dict[str, Value]

KEY_ATTRS = ("pk", "sk")

Projection: TypeAlias = Literal["ALL", "KEYS_ONLY", "INCLUDE"]


@dataclass(frozen=True, slots=True)
class IndexDef:
    """One global secondary index: its key attributes and what it projects.

    The single source for table creation (:mod:`.dynamodb_table`), queries and
    the capacity meter (:mod:`.capacity`), which prices index writes by it.
    """

    name: str
    hash_attr: str
    range_attr: str
    projection: Projection = "ALL"
    #: non-key attributes projected when ``projection`` is ``INCLUDE``
    include: tuple[str, ...] = ()


INDEX_DEFS: tuple[IndexDef, ...] = (
    IndexDef("gsi1", "gsi1pk", "gsi1sk"),
    IndexDef("gsi2", "gsi2pk", "gsi2sk"),
)
INDEXES: dict[str, tuple[str, str]] = {d.name: (d.hash_attr, d.range_attr) for d in INDEX_DEFS}
TTL_ATTR = "ttl"
MAX_ITEM_BYTES = 400 * 1024
MAX_TRANSACTION_ACTIONS = 100
#: the aggregate size of a transaction's items (see :mod:`tallybook.store.checks`)
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
MAX_NUMBER_DIGITS = 38
MAX_KEY_BYTES = 1024
INDEX_ATTRS = frozenset(attr for pair in INDEXES.values() for attr in pair)


@dataclass(frozen=True, slots=True)
class Key:
    pk: str
    sk: str

    def as_item(self) -> Item:
        return {"pk": self.pk, "sk": self.sk}


def key_of(item: Mapping[str, Value]) -> Key:
    pk, sk = item.get("pk"), item.get("sk")
    if not isinstance(pk, str) or not isinstance(sk, str):
        raise StoreValidationError("an item needs string attributes 'pk' and 'sk'")
    return Key(pk, sk)


# --- conditions ------------------------------------------------------------

CompareOp = Literal["=", "<>", "<", "<=", ">", ">="]


@dataclass(frozen=True, slots=True)
class Exists:
    attr: str


@dataclass(frozen=True, slots=True)
class NotExists:
    attr: str


@dataclass(frozen=True, slots=True)
class Compare:
    attr: str
    op: CompareOp
    value: Value


@dataclass(frozen=True, slots=True)
class And:
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Or:
    conditions: tuple[Condition, ...]


Condition: TypeAlias = Exists | NotExists | Compare | And | Or

#: no item at the key yet: a put that creates, and must not overwrite
ITEM_ABSENT = NotExists(KEY_ATTRS[0])
#: an item at the key: an update that must not create one
ITEM_PRESENT = Exists(KEY_ATTRS[0])


def equals(attr: str, value: Value) -> Compare:
    return Compare(attr, "=", value)


def all_of(*conditions: Condition) -> Condition:
    return conditions[0] if len(conditions) == 1 else And(tuple(conditions))


def any_of(*conditions: Condition) -> Condition:
    return conditions[0] if len(conditions) == 1 else Or(tuple(conditions))


# --- updates ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Set:
    attr: str
    value: Value


@dataclass(frozen=True, slots=True)
class Remove:
    attr: str


@dataclass(frozen=True, slots=True)
class Add:
    """Add an integer to a number attribute (a missing attribute counts as 0)."""

    attr: str
    amount: int


UpdateOp: TypeAlias = Set | Remove | Add


# --- transaction actions ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Put:
    item: Item
    condition: Condition | None = None


@dataclass(frozen=True, slots=True)
class Update:
    """Update (or create, as DynamoDB's UpdateItem does) the item at ``key``."""

    key: Key
    updates: tuple[UpdateOp, ...]
    condition: Condition | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    key: Key
    condition: Condition | None = None


@dataclass(frozen=True, slots=True)
class ConditionCheck:
    key: Key
    condition: Condition


Action: TypeAlias = Put | Update | Delete | ConditionCheck


def action_key(action: Action) -> Key:
    return key_of(action.item) if isinstance(action, Put) else action.key


# --- queries ---------------------------------------------------------------

SortOp = Literal["=", "<", "<=", ">", ">=", "begins_with", "between"]


@dataclass(frozen=True, slots=True)
class SortCondition:
    op: SortOp
    value: str
    upper: str | None = None

    @staticmethod
    def eq(value: str) -> SortCondition:
        return SortCondition("=", value)

    @staticmethod
    def lt(value: str) -> SortCondition:
        return SortCondition("<", value)

    @staticmethod
    def le(value: str) -> SortCondition:
        return SortCondition("<=", value)

    @staticmethod
    def gt(value: str) -> SortCondition:
        return SortCondition(">", value)

    @staticmethod
    def ge(value: str) -> SortCondition:
        return SortCondition(">=", value)

    @staticmethod
    def begins_with(prefix: str) -> SortCondition:
        return SortCondition("begins_with", prefix)

    @staticmethod
    def between(low: str, high: str) -> SortCondition:
        return SortCondition("between", low, high)

    def matches(self, sort_value: str) -> bool:
        v = sort_value
        match self.op:
            case "=":
                return v == self.value
            case "<":
                return _utf8(v) < _utf8(self.value)
            case "<=":
                return _utf8(v) <= _utf8(self.value)
            case ">":
                return _utf8(v) > _utf8(self.value)
            case ">=":
                return _utf8(v) >= _utf8(self.value)
            case "begins_with":
                return v.startswith(self.value)
            case "between":
                assert self.upper is not None
                return _utf8(self.value) <= _utf8(v) <= _utf8(self.upper)
        raise StoreValidationError(f"unknown sort operator {self.op!r}")  # pragma: no cover


def _utf8(s: str) -> bytes:
    return s.encode("utf-8")


@dataclass(frozen=True, slots=True)
class Query:
    """One query's arguments, as :meth:`ItemStore.query` takes them."""

    partition: str
    sort: SortCondition | None = None
    index: str | None = None
    forward: bool = True
    limit: int | None = None
    cursor: str | None = None
    consistent: bool = True


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Item]
    cursor: str | None = None


# --- metrics ---------------------------------------------------------------


@dataclass
class OperationStats:
    """Figures of one operation kind.

    ``read_units`` / ``write_units`` are what the endpoint reported
    (``ConsumedCapacity``; DynamoDB Local misreports transactions and index
    writes); ``priced_*`` are the same calls priced by AWS's rules
    (:mod:`tallybook.store.meter`), index writes included in
    ``priced_write_units``; ``estimated_writes`` counts items written whose
    before image the meter did not know.
    """

    requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    retries: int = 0
    conflicts: int = 0
    throttles: int = 0
    #: calls that ended in an error (a failed condition, a refusal, unavailable)
    failed: int = 0
    priced_read_units: float = 0.0
    priced_write_units: float = 0.0
    priced_index_write_units: float = 0.0
    estimated_writes: int = 0


@dataclass
class StoreMetrics:
    """Requests and capacity units per operation kind, since creation or reset."""

    by_operation: dict[str, OperationStats] = field(default_factory=dict)

    def record(
        self,
        operation: str,
        *,
        requests: int = 1,
        read_units: float = 0.0,
        write_units: float = 0.0,
    ) -> None:
        stats = self.stat(operation)
        stats.requests += requests
        stats.read_units += read_units
        stats.write_units += write_units

    def price(
        self,
        operation: str,
        *,
        read_units: float = 0.0,
        write_units: float = 0.0,
        index_write_units: float = 0.0,
        estimated: int = 0,
    ) -> None:
        """Add capacity priced by AWS's rules (no request is counted)."""
        stats = self.stat(operation)
        stats.priced_read_units += read_units
        stats.priced_write_units += write_units
        stats.priced_index_write_units += index_write_units
        stats.estimated_writes += estimated

    def stat(self, operation: str) -> OperationStats:
        # not setdefault: that would build a throwaway OperationStats on every call
        stats = self.by_operation.get(operation)
        if stats is None:
            stats = self.by_operation[operation] = OperationStats()
        return stats

    @property
    def requests(self) -> int:
        return sum(s.requests for s in self.by_operation.values())

    @property
    def read_units(self) -> float:
        return sum(s.read_units for s in self.by_operation.values())

    @property
    def write_units(self) -> float:
        return sum(s.write_units for s in self.by_operation.values())

    @property
    def priced_read_units(self) -> float:
        return sum(s.priced_read_units for s in self.by_operation.values())

    @property
    def priced_write_units(self) -> float:
        return sum(s.priced_write_units for s in self.by_operation.values())

    @property
    def priced_index_write_units(self) -> float:
        return sum(s.priced_index_write_units for s in self.by_operation.values())

    def reset(self) -> None:
        self.by_operation.clear()

    def snapshot(self) -> dict[str, OperationStats]:
        return {k: OperationStats(**vars(v)) for k, v in self.by_operation.items()}


# --- the port --------------------------------------------------------------


class ItemStore(ABC):
    """The storage port. Engines: :mod:`tallybook.store.sqlite`, :mod:`.dynamodb`."""

    metrics: StoreMetrics
    #: what :meth:`ttl_now` reads: ``None`` for the wall clock
    _ttl_clock: Callable[[], datetime] | None = None

    def ttl_now(self) -> int:
        """The time (epoch seconds) every ``ttl`` is read against, in reads and in
        conditions: the wall clock, or the clock :meth:`read_ttl_by` gave."""
        clock = self._ttl_clock
        return int(time.time()) if clock is None else int(clock().timestamp())

    def read_ttl_by(self, now: Callable[[], datetime]) -> None:
        """Read every ``ttl`` against ``now`` (the clock of the ledger over this
        store, which also wrote them) instead of the wall clock; a ledger with a
        ``ManualClock`` set in the past would otherwise not see its own items."""
        self._ttl_clock = now

    @abstractmethod
    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        """The item at ``key``, or ``None`` when missing or past its TTL."""

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
        """Items of one partition in sort-key order; ``cursor`` continues a page.

        ``consistent`` is ignored on an index (GSIs are eventually consistent).
        Engines and wrappers implement :meth:`run_query`, which takes the
        arguments as one :class:`Query`.
        """
        return self.run_query(Query(partition, sort, index, forward, limit, cursor, consistent))

    @abstractmethod
    def run_query(self, q: Query) -> Page:
        """:meth:`query` (the way every engine and wrapper implements it)."""

    @abstractmethod
    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        """Apply every action or none; raise :class:`ConditionFailed` with reasons.

        ``token`` makes a retry of the same transaction idempotent where the
        engine supports it (DynamoDB's ClientRequestToken, ten minutes).
        """

    @abstractmethod
    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        """The existing, unexpired items among ``keys`` (any order)."""

    @abstractmethod
    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        """Unconditional puts and deletes, chunked; not atomic across chunks."""

    def put(self, item: Item, condition: Condition | None = None) -> None:
        self.transact_write([Put(item, condition)])

    def update(
        self, key: Key, updates: Sequence[UpdateOp], condition: Condition | None = None
    ) -> None:
        self.transact_write([Update(key, tuple(updates), condition)])

    def delete(self, key: Key, condition: Condition | None = None) -> None:
        self.transact_write([Delete(key, condition)])

    def query_all(
        self,
        partition: str,
        sort: SortCondition | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        page_size: int = 500,
        consistent: bool = True,
    ) -> Iterable[Item]:
        """Every item of a query, following cursors page by page."""
        cursor: str | None = None
        while True:
            page = self.query(
                partition,
                sort,
                index=index,
                forward=forward,
                limit=page_size,
                cursor=cursor,
                consistent=consistent,
            )
            yield from page.items
            if page.cursor is None:
                return
            cursor = page.cursor

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the store is unusable afterwards."""

    @abstractmethod
    def describe(self) -> str:
        """A one-line description for logs and ``--help`` output (no secrets)."""

    def durability(self) -> str:
        """One line on what an acknowledged write survives (printed by ``serve``)."""
        return "as the engine guarantees"
