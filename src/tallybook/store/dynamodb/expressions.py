"""Typed conditions, updates and sort conditions compiled to DynamoDB expressions.

Names and values are always placeholders (``#a0`` / ``:v0``): no value text
ever reaches an expression string. A compiled condition holds exactly when
:func:`tallybook.store.evaluate.evaluate` does, with an item past its TTL seen
as absent: every condition is compiled together with a guard on ``ttl``
against the time of the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tallybook.errors import StoreValidationError
from tallybook.store.checks import check_attribute, check_value
from tallybook.store.dynamodb.values import from_item, key_av, serialize
from tallybook.store.evaluate import evaluate
from tallybook.store.port import (
    INDEX_ATTRS,
    KEY_ATTRS,
    MAX_NUMBER_DIGITS,
    TTL_ATTR,
    Action,
    Add,
    And,
    Compare,
    Condition,
    Delete,
    Exists,
    NotExists,
    Or,
    Put,
    Remove,
    Set,
    SortCondition,
    Update,
    UpdateOp,
    Value,
)

_NOOP_ATTR = "__tallybook_noop__"
_MAX_INT = 10**MAX_NUMBER_DIGITS - 1


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
        """A condition expression that holds exactly when :func:`evaluate` does."""
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
    The result is checked as :func:`tallybook.store.checks.check_item` checks a
    whole item.
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
        if isinstance(op, Set):
            check_attribute(op.attr, op.value)
            check_value(op.value, op.attr)
        elif isinstance(op, Add):
            if op.attr in INDEX_ATTRS:
                raise StoreValidationError(f"index key {op.attr} must be a non-empty string")
            check_value(op.amount, op.attr)
    return list(folded.values())


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


def compile_action(table: str, action: Action, now: int) -> dict[str, Any]:
    """One ``TransactItems`` entry (``{"Put": {...}}``, ...) for ``action``."""
    expr = Expression()
    body: dict[str, Any] = {"TableName": table}
    condition: str | None = None
    if isinstance(action, Update):
        ops = fold_updates(action.updates)
        body["Key"] = key_av(action.key)
        body["UpdateExpression"] = expr.updates(ops)
        # An expired item is replaced, not updated: the guard fails on it and
        # DynamoStore._diagnose deletes it before the retry. Add results stay in
        # 38 digits.
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
            body["Key"] = key_av(action.key)
            kind = "Delete" if isinstance(action, Delete) else "ConditionCheck"
        if action.condition is not None:
            condition = expr.guarded(action.condition, now)
    if condition is not None:
        body["ConditionExpression"] = condition
    body.update(expr.params())
    return {kind: body}
