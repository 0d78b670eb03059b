"""Conditions, updates and TTL decided in Python, with DynamoDB's semantics.

The SQLite engine applies a transaction with these; the DynamoDB engine
compiles the same values to expressions that hold exactly when
:func:`evaluate` does, and uses these to explain a cancelled transaction.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from tallybook.errors import ConditionFailed, StoreValidationError
from tallybook.store.port import (
    TTL_ATTR,
    Add,
    And,
    Compare,
    CompareOp,
    Condition,
    Exists,
    Item,
    Key,
    NotExists,
    Or,
    Remove,
    Set,
    UpdateOp,
    Value,
)


def now_epoch() -> int:
    return int(time.time())


def is_expired(item: Mapping[str, Value], now: int | None = None) -> bool:
    ttl = item.get(TTL_ATTR)
    at = now_epoch() if now is None else now
    return isinstance(ttl, int) and not isinstance(ttl, bool) and ttl <= at


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
        a, b = left.encode("utf-8"), right.encode("utf-8")
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


def cancelled(reasons: list[str | None]) -> ConditionFailed:
    """The error for a transaction whose conditions failed where ``reasons`` say."""
    failing = next(i for i, r in enumerate(reasons) if r)
    return ConditionFailed(
        f"transaction cancelled: the condition of action {failing} failed", reasons
    )
