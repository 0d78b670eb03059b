"""Port values as DynamoDB AttributeValues and back.

Integers travel as DynamoDB numbers and come back as ``int``; what the port
cannot hold (floats, numbers beyond 38 digits, sets, binary) is refused with
:class:`StoreValidationError`, in either direction.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from tallybook.errors import StoreValidationError
from tallybook.store.checks import check_value
from tallybook.store.port import Item, Key, Value

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


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


def key_av(key: Key) -> dict[str, Any]:
    return {"pk": {"S": key.pk}, "sk": {"S": key.sk}}
